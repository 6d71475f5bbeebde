"""A real kube-apiserver on 127.0.0.1, for the tests that need the Kubernetes API itself.

kube-apiserver and kubectl are built from Go modules by scripts/setup.d/30-kube-apiserver.sh
(cached; .tools/kube points at the build), storage is Debian's etcd (`services.etcd`), and
the certificates are made with openssl in the fixture's temporary directory: a CA, the
server's certificate for 127.0.0.1, an admin client certificate (system:masters) for kubectl,
and the key pair that signs service account tokens (`kubectl create token`). RBAC is the
authorizer, as in a cluster: a service account can do what its roles say, nothing else.

Fixtures (module-scoped: one API server per test module, started once):

- `kube_apiserver`: the server and an admin kubectl (`Kube`);
- `kube`: the same with the prometheus-operator CRDs established and the generated
  manifests' namespaces created (what tests/deploy/test_manifests_apiserver.py validates against).

Bind them in a test module as `kube = kubeapi.kube` (ruff reports F811 on an imported
fixture used as an argument).
"""

from __future__ import annotations

import ssl
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from support import services
from support.manifests import GENERATED
from support.paths import REPO

KUBE = REPO / ".tools" / "kube"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _certificates(d: Path) -> None:
    """CA, serving certificate for 127.0.0.1, an admin client (system:masters), SA keys."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
             "-out", "ca.crt", "-days", "1", "-subj", "/CN=fioprobe-test-ca", cwd=d)  # fmt: skip
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject, ext in (
        ("server", "/CN=kube-apiserver", ["-extfile", "san.cnf"]),
        ("admin", "/O=system:masters/CN=admin", []),
    ):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", "-subj", subject, cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", *ext, cwd=d)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


class Kube:
    """A running kube-apiserver and a kubectl bound to it."""

    def __init__(self, kubeconfig: Path, url: str = "", directory: Path | None = None) -> None:
        self.kubeconfig = kubeconfig
        #: https://127.0.0.1:<port>, and the directory holding ca.crt (the CA that signed it).
        self.url = url
        self.directory = directory or kubeconfig.parent

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    def kubectl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(KUBE / "bin" / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def token_file(self, account: str, namespace: str, directory: Path) -> Path:
        """A real token of the service account (`kubectl create token`, an hour), written to
        `directory`/token as the kubelet projects one into a pod."""
        token = self.kubectl("create", "token", account, "-n", namespace, "--duration=1h")
        assert token.returncode == 0, token.stderr
        path = directory / "token"
        path.write_text(token.stdout.strip())
        return path

    def dry_run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.kubectl("apply", "--dry-run=server", "--validate=strict", *args)

    def apply(self, document: object) -> None:
        """Create or update the objects of `document` (a dict or a list of dicts)."""
        documents = document if isinstance(document, list) else [document]
        text = yaml.safe_dump_all(documents)
        result = subprocess.run(
            [str(KUBE / "bin" / "kubectl"), f"--kubeconfig={self.kubeconfig}", "apply",
             "-f", "-"],
            input=text, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr


def _kubeconfig(d: Path, url: str) -> Path:
    path = d / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "test",
                        "cluster": {"server": url, "certificate-authority": str(d / "ca.crt")},
                    }
                ],
                "users": [
                    {
                        "name": "admin",
                        "user": {
                            "client-certificate": str(d / "admin.crt"),
                            "client-key": str(d / "admin.key"),
                        },
                    }
                ],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
                "current-context": "test",
            }
        )
    )
    return path


@contextmanager
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    for path in (KUBE / "bin" / "kube-apiserver", KUBE / "bin" / "kubectl"):
        if not path.exists():
            pytest.fail(f"{path} missing: run `make setup` (scripts/setup.d/30-kube-apiserver.sh)")
    d = tmp_path_factory.mktemp("kube")
    _certificates(d)
    etcd = services.etcd(d / "etcd", d / "etcd-data").start()
    port = services.free_port()
    context = ssl.create_default_context(cafile=str(d / "ca.crt"))
    apiserver = services.Service(
        "kube-apiserver",
        [
            str(KUBE / "bin" / "kube-apiserver"),
            f"--etcd-servers={etcd.url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={d}",
            f"--tls-cert-file={d / 'server.crt'}",
            f"--tls-private-key-file={d / 'server.key'}",
            f"--client-ca-file={d / 'ca.crt'}",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/24",
            "--authorization-mode=RBAC",
            "--profiling=false",
        ],
        port,
        d / "apiserver",
        ready_path="/readyz",
        scheme="https",
        ready_context=context,
    )
    try:
        apiserver.start(timeout=120)
        yield Kube(_kubeconfig(d, apiserver.url), apiserver.url, d)
    finally:
        apiserver.stop()
        etcd.stop()


@pytest.fixture(scope="module")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """A kube-apiserver of the test module's own, with an admin kubectl."""
    with started(tmp_path_factory) as k:
        yield k


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """A kube-apiserver ready for the generated manifests: the prometheus-operator CRDs
    established, the manifests' namespaces created (dry-run objects need them, and Pod
    Security admission reads their labels)."""
    with started(tmp_path_factory) as k:
        crds = k.kubectl("apply", "--server-side", "-f", str(KUBE / "crds"))
        assert crds.returncode == 0, crds.stderr
        # kubectl wait fails at once (".status.conditions accessor error") while a CRD just
        # created has no status yet; on a loaded machine that lasts a moment: ask again.
        for _ in range(30):
            waited = k.kubectl(
                "wait", "--for=condition=Established", "--timeout=60s",
                "crd/servicemonitors.monitoring.coreos.com",
                "crd/podmonitors.monitoring.coreos.com",
                "crd/prometheusrules.monitoring.coreos.com",
                timeout=90,
            )  # fmt: skip
            if waited.returncode == 0 or "accessor error" not in waited.stderr:
                break
            time.sleep(1)
        assert waited.returncode == 0, waited.stderr
        for path in sorted(GENERATED.glob("*namespace*.yaml")):
            created = k.kubectl("apply", "-f", str(path))
            assert created.returncode == 0, created.stderr
        yield k

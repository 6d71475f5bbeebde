"""Authenticated, encrypted pushes against a real Pushgateway with a web config file.

The Pushgateway gets TLS (a self-signed certificate made here with openssl) and basic auth
(a bcrypt hash), as a Kubernetes deployment would with a mounted Secret. fioprobe reads the
username and password from files or the environment and the CA from a file. What must hold:
an authenticated https push and its read-back work; a push without credentials, with a wrong
password, or against a certificate the CA does not vouch for is refused, reported as a push
failure (exit 4) with one clear line, and changes nothing in the Pushgateway.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest
from conftest import CORPUS, REPO, fioprobe
from fioprobe.gateway.api import list_groups
from fioprobe.gateway.transport import Transport
from fioprobe.grouping import JOB
from support import services

USER = "fioprobe"
PASSWORD = "s3cret-probe-password"
KEY = {"storageclass": "gp3", "profile": "randread-iops"}
SAMPLE = CORPUS / "fio343-client-1client-psync-randread.json"


def make_cert(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA), with openssl as an admin would."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "2", "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


@dataclass
class SecureGateway:
    service: services.Service
    ca: Path
    wrong_ca: Path
    secrets: Path

    @property
    def url(self) -> str:
        return self.service.url

    def transport(self, **overrides: object) -> Transport:
        options: dict[str, object] = {
            "username": USER,
            "password": PASSWORD,
            "ca_file": str(self.ca),
            "attempts": 1,
        }
        return Transport(url=self.url, **{**options, **overrides})  # type: ignore[arg-type]

    def groups(self) -> list[dict[str, object]]:
        return [g for g in list_groups(self.transport()) if g["labels"].get("job") == JOB]


@pytest.fixture
def secure_gateway(tmp_path: Path) -> Iterator[SecureGateway]:
    tls = tmp_path / "tls"
    tls.mkdir()
    cert, key = make_cert(tls, "pushgateway")
    wrong_ca, _ = make_cert(tls, "someone-else")
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    web_config = tmp_path / "web-config.yml"
    web_config.write_text(
        json.dumps(  # JSON is YAML
            {
                "tls_server_config": {"cert_file": str(cert), "key_file": str(key)},
                "basic_auth_users": {USER: hashed},
            }
        )
    )
    secrets = tmp_path / "secret"  # what a mounted Secret looks like: one file per key
    secrets.mkdir()
    (secrets / "username").write_text(USER + "\n")
    (secrets / "password").write_text(PASSWORD + "\n")
    (secrets / "wrong-password").write_text("not-the-password\n")
    service = services.pushgateway(tmp_path / "pgw", web_config=web_config)
    service.scheme = "https"
    service.ready_context = ssl.create_default_context(cafile=str(cert))
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    service.ready_headers = {"Authorization": f"Basic {token}"}
    service.start()
    yield SecureGateway(service, cert, wrong_ca, secrets)
    service.stop()


def push(gateway: SecureGateway, state: Path, *extra: str, env: dict[str, str] | None = None):
    return fioprobe(
        "push", str(SAMPLE), "--gateway", gateway.url, "--storageclass", KEY["storageclass"],
        "--profile", KEY["profile"], "--state", str(state), "--attempts", "1", "--quiet", *extra,
        env=env,
    )  # fmt: skip


def with_files(gateway: SecureGateway, password: str = "password") -> list[str]:
    return [
        "--username-file", str(gateway.secrets / "username"),
        "--password-file", str(gateway.secrets / password),
        "--ca-file", str(gateway.ca),
    ]  # fmt: skip


def runs_total(gateway: SecureGateway) -> float | None:
    for group in gateway.groups():
        if group["labels"] == {"job": JOB, **KEY}:
            return float(group["fioprobe_runs_total"]["metrics"][0]["value"])
    return None


def one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    message = result.stderr.decode().strip()
    assert message.count("\n") == 0, message
    assert "Traceback" not in message
    return message


def test_authenticated_https_push_and_readback(secure_gateway: SecureGateway, tmp_path: Path):
    first = push(secure_gateway, tmp_path / "a" / "state.json", *with_files(secure_gateway))
    assert first.returncode == 0, first.stderr.decode()
    assert runs_total(secure_gateway) == 1
    # A fresh container (no state file) reads the totals back over https with auth.
    second = push(secure_gateway, tmp_path / "b" / "state.json", *with_files(secure_gateway))
    assert second.returncode == 0, second.stderr.decode()
    assert runs_total(secure_gateway) == 2
    # Credentials from the environment, as `env: valueFrom: secretKeyRef` would give them.
    env = {"FIOPROBE_PUSHGATEWAY_USERNAME": USER, "FIOPROBE_PUSHGATEWAY_PASSWORD": PASSWORD}
    third = push(secure_gateway, tmp_path / "c" / "state.json", "--ca-file",
                 str(secure_gateway.ca), env=env)  # fmt: skip
    assert third.returncode == 0, third.stderr.decode()
    assert runs_total(secure_gateway) == 3


def test_plain_http_and_no_credentials_are_refused(secure_gateway: SecureGateway, tmp_path: Path):
    """Nobody without the password writes into the gateway, and fioprobe says why."""
    request = urllib.request.Request(
        f"{secure_gateway.url}/metrics/job/{JOB}/storageclass/x/profile/y",
        data=b"fioprobe_runs_total 1\n",
        method="PUT",
    )
    context = ssl.create_default_context(cafile=str(secure_gateway.ca))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5, context=context)
    assert refused.value.code == 401
    assert secure_gateway.groups() == []

    result = push(secure_gateway, tmp_path / "state.json", "--ca-file", str(secure_gateway.ca))
    assert result.returncode == 4
    message = one_line(result)
    refused_line = (
        f"{secure_gateway.url} answered HTTP 401 Unauthorized (credentials missing or wrong)"
    )
    assert refused_line in message
    assert secure_gateway.groups() == []

    # Plain http to the TLS port is refused too (the server answers 400 to plain HTTP).
    http_url = secure_gateway.url.replace("https://", "http://")
    plain = fioprobe("push", str(SAMPLE), "--gateway", http_url, "--storageclass", "gp3",
                     "--profile", "randread-iops", "--state", str(tmp_path / "p.json"),
                     "--attempts", "1", "--quiet", *with_files(secure_gateway))  # fmt: skip
    assert plain.returncode == 4
    assert f"{http_url} answered HTTP 400" in one_line(plain)
    assert secure_gateway.groups() == []


def test_wrong_password_is_refused_and_changes_nothing(
    secure_gateway: SecureGateway, tmp_path: Path
):
    state = tmp_path / "state.json"
    assert push(secure_gateway, state, *with_files(secure_gateway)).returncode == 0
    before = secure_gateway.groups()
    result = push(secure_gateway, state, *with_files(secure_gateway, "wrong-password"))
    assert result.returncode == 4
    message = one_line(result)
    # The state has not claimed the group yet (it is one run old), so the group is read
    # back first: that request is the one refused.
    assert message.startswith(f"fioprobe: error: read back: {secure_gateway.url} answered HTTP 401")
    assert "credentials missing or wrong" in message
    assert "kept in the state file" in message
    assert secure_gateway.groups() == before  # same push_time_seconds: nothing was written
    # The refused run was kept: the next authenticated push carries it (3 runs, not 2).
    assert push(secure_gateway, state, *with_files(secure_gateway)).returncode == 0
    assert runs_total(secure_gateway) == 3


def test_untrusted_certificate_is_refused_with_a_clear_message(
    secure_gateway: SecureGateway, tmp_path: Path
):
    result = push(
        secure_gateway, tmp_path / "state.json",
        "--username-file", str(secure_gateway.secrets / "username"),
        "--password-file", str(secure_gateway.secrets / "password"),
        "--ca-file", str(secure_gateway.wrong_ca),
    )  # fmt: skip
    assert result.returncode == 4
    message = one_line(result)
    assert f"TLS certificate of {secure_gateway.url} is not trusted" in message
    assert "certificate verify failed" in message
    assert "--ca-file" in message  # says what to fix
    assert secure_gateway.groups() == []

    missing = push(
        secure_gateway, tmp_path / "state2.json", "--ca-file", str(tmp_path / "no-such-ca.crt")
    )
    assert missing.returncode == 4
    assert f"cannot read CA file {tmp_path / 'no-such-ca.crt'}" in one_line(missing)


def test_configured_run_pushes_over_tls(secure_gateway: SecureGateway, tmp_path: Path):
    """`fioprobe run` takes the same settings from its YAML file (what the manifests mount)."""
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "pushgateway": {
                    "url": secure_gateway.url,
                    "username_file": str(secure_gateway.secrets / "username"),
                    "password_file": str(secure_gateway.secrets / "password"),
                    "ca_file": str(secure_gateway.ca),
                    "attempts": 1,
                },
                "targets": [
                    {
                        "name": "local",
                        "directory": str(probe_dir),
                        "profiles": [{"name": "etcd-fsync", "size": "256k", "runtime": 5}],
                    }
                ],
            }
        )
    )
    result = fioprobe("run", "--config", str(config), "--jobs-dir", str(REPO / "jobs"))
    assert result.returncode == 0, result.stderr.decode()
    (group,) = secure_gateway.groups()
    assert group["labels"] == {"job": JOB, "storageclass": "local", "profile": "etcd-fsync"}
    assert float(group["fioprobe_success"]["metrics"][0]["value"]) == 1

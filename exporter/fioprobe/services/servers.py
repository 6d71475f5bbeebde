"""Start real Pushgateway, Prometheus and Alertmanager processes on 127.0.0.1.

`fioprobe demo` runs the whole chain on one machine, so the package needs this launcher:
every process gets a free port, its own data directory, a bounded wait until it answers, and
is stopped by PID (SIGTERM, then SIGKILL). The tests and benchmarks start the same processes
through `tests/support/services.py`, which adds what only they need (etcd, a write load).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from fioprobe.errors import FioprobeError
from fioprobe.gateway.transport import RefuseRedirects

LOCALHOST = "127.0.0.1"


class ServiceError(FioprobeError):
    """A component did not start or answer in time."""


class RedirectRefused(ServiceError, OSError):
    """A 3xx answer to a request that carries credentials (or a body): never followed.

    urllib would send the Authorization header on to wherever the Location points, another
    origin included, and turn a POST into a GET of that page whose 200 looks like success.
    An OSError too, so the callers' network error handling takes it like a refused connection.
    """


#: The answers urllib's redirect handler follows when they name a Location.
_FOLLOWED = frozenset({301, 302, 303, 307, 308})


def _redirect_refused(error: urllib.error.HTTPError) -> Exception:
    """RedirectRefused for a redirect urllib would have followed, the HTTPError for any other
    3xx."""
    headers = error.headers
    location = headers["location"] if "location" in headers else headers.get("uri")
    if error.code not in _FOLLOWED or location is None:
        return error
    error.close()
    target = urllib.parse.urljoin(error.url, location)
    return RedirectRefused(
        f"{error.url} answered {error.code} {error.msg} to {target[:200]!r}: not followed "
        "(the request carries credentials)"
    )


def open_without_redirects(
    request: urllib.request.Request, timeout: float, context: ssl.SSLContext | None = None
) -> http.client.HTTPResponse:
    """urlopen that never follows a redirect: a 301/302/303/307/308 raises RedirectRefused,
    any other 3xx is an HTTPError as urllib makes it."""
    handlers: list[urllib.request.BaseHandler] = [RefuseRedirects(_redirect_refused)]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers)
    # typeshed leaves open()'s answer untyped; over http(s) it is an HTTPResponse.
    response: http.client.HTTPResponse = opener.open(request, timeout=timeout)
    return response


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Service:
    name: str
    command: list[str]
    port: int
    workdir: Path
    ready_path: str = "/-/ready"
    scheme: str = "http"
    #: For a component behind TLS and basic auth (a web config file): how the readiness
    #: probe trusts its certificate and which headers (Authorization) it sends.
    ready_context: ssl.SSLContext | None = field(default=None, repr=False)
    ready_headers: dict[str, str] = field(default_factory=dict, repr=False)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{LOCALHOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def start(self, timeout: float = 30.0, ready: bool = True) -> Service:
        binary = shutil.which(self.command[0])
        if binary is None:
            raise ServiceError(f"{self.command[0]} is not installed (run `make setup`)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [binary, *self.command[1:]],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                start_new_session=True,
            )
        if ready:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ServiceError(self._exit_message())
            try:
                request = urllib.request.Request(
                    self.url + self.ready_path, headers=self.ready_headers
                )
                # ready_headers may hold credentials: a redirect is not an answer.
                with open_without_redirects(
                    request, timeout=2, context=self.ready_context
                ) as response:
                    if response.status == 200:
                        self._check_still_ours()
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise ServiceError(f"{self.name} did not answer on {self.url} within {timeout}s")

    def _exit_message(self) -> str:
        """Why the process ended before it answered. A port taken between free_port() and our
        bind shows as an exit (status 0 for some daemons) whose log says so: say it plainly,
        whichever came first, that exit or the other process's answer to our readiness check."""
        tail = self.tail()
        code = self.process.returncode if self.process is not None else None
        if "address already in use" in tail.lower():
            return (
                f"{self.name} exited {code}: the port was probably taken by another process "
                f"({tail})"
            )
        return f"{self.name} exited {code}: {tail}"

    def _check_still_ours(self) -> None:
        """The port came from free_port(), which releases it before we bind it: another
        process (a concurrent test run) may have taken it, and then it answered our readiness
        check while our process failed to bind and exits. Give that exit a moment to show."""
        time.sleep(0.3)
        if self.process is not None and self.process.poll() is not None:
            raise ServiceError(
                f"{self.name} exited {self.process.returncode} after {self.url} answered: "
                f"the port was probably taken by another process ({self.tail()})"
            )

    def stop(self, timeout: float = 10.0) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout=timeout)
                return
            except subprocess.TimeoutExpired:
                continue

    def tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def pushgateway(
    workdir: Path,
    *,
    persistence: Path | None = None,
    web_config: Path | None = None,
    port: int | None = None,
) -> Service:
    """A Pushgateway; with `persistence`, its metrics survive a restart."""
    port = port or free_port()
    command = ["prometheus-pushgateway", f"--web.listen-address={LOCALHOST}:{port}"]
    # Debian's build defaults --persistence.file to /var/lib/prometheus/pushgateway.data,
    # shared by every instance on the machine: always say explicitly which file, or none.
    command.append(f"--persistence.file={persistence or ''}")
    if persistence is not None:
        command.append("--persistence.interval=1s")
    if web_config is not None:
        command.append(f"--web.config.file={web_config}")
    return Service("pushgateway", command, port, workdir)


def prometheus(
    workdir: Path,
    scrape_targets: dict[str, str],
    *,
    scrape_interval: str = "1s",
    rule_files: list[Path] | None = None,
    alertmanager_url: str | None = None,
    external_labels: dict[str, str] | None = None,
    evaluation_interval: str = "1s",
    target_labels: dict[str, str] | None = None,
    file_sd: dict[str, Path] | None = None,
) -> Service:
    """A Prometheus scraping `scrape_targets` ({job: host:port}) with honor_labels.

    `target_labels` are added to every scraped series that lacks them (e.g. the `cluster`
    label a multi-cluster setup has, which the dashboards' variables select on). `file_sd`
    ({job: file}) scrapes the targets a file lists, read again whenever it changes: for
    targets that appear later (a pod's address).
    """
    port = free_port()
    config: dict[str, object] = {
        "global": {
            "scrape_interval": scrape_interval,
            "evaluation_interval": evaluation_interval,
            "external_labels": external_labels or {},
        },
        "scrape_configs": [
            {
                "job_name": job,
                "honor_labels": True,
                "static_configs": [{"targets": [target], "labels": target_labels or {}}],
            }
            for job, target in scrape_targets.items()
        ]
        + [
            {"job_name": job, "honor_labels": True, "file_sd_configs": [{"files": [str(path)]}]}
            for job, path in (file_sd or {}).items()
        ],
    }
    if rule_files:
        config["rule_files"] = [str(path) for path in rule_files]
    if alertmanager_url:
        host = urllib.parse.urlparse(alertmanager_url).netloc
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [host]}]}]}
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "prometheus.yml"
    config_path.write_text(json.dumps(config, indent=2))  # JSON is valid YAML
    command = [
        "prometheus",
        f"--config.file={config_path}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address={LOCALHOST}:{port}",
        "--web.enable-lifecycle",
    ]
    return Service("prometheus", command, port, workdir)


def alertmanager(workdir: Path, webhook_url: str | None = None) -> Service:
    port = free_port()
    receiver: dict[str, object] = {"name": "default"}
    if webhook_url:
        receiver["webhook_configs"] = [{"url": webhook_url}]
    config = {
        "route": {"receiver": "default", "group_wait": "1s", "group_interval": "1s"},
        "receivers": [receiver],
    }
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "alertmanager.yml"
    config_path.write_text(json.dumps(config))
    command = [
        "prometheus-alertmanager",
        f"--config.file={config_path}",
        f"--storage.path={workdir / 'am-data'}",
        f"--web.listen-address={LOCALHOST}:{port}",
        "--cluster.listen-address=",  # no gossip: nothing but loopback
    ]
    return Service("alertmanager", command, port, workdir)


def prometheus_api(
    prometheus_url: str, path: str, params: dict[str, str] | list[tuple[str, str]]
) -> Any:
    """GET one Prometheus HTTP API endpoint; its `data`, or ServiceError with its error.

    `data` is parsed JSON whose shape is the endpoint's (an object for a query, a list of
    strings for label values), hence Any: the caller knows which endpoint it asked."""
    url = f"{prometheus_url}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        raise ServiceError(f"{path} {params}: HTTP {exc.code}: {exc.read(500)!r}") from None
    if body.get("status") != "success":
        raise ServiceError(f"{path} {params}: {body}")
    return body["data"]


class Series(TypedDict, total=False):
    """One series of a query's result: `value` in an instant vector, `values` in a range
    vector; a point is [unix time, the number as text]."""

    metric: dict[str, str]
    value: list[float | str]
    values: list[list[float | str]]


def query(prometheus_url: str, promql: str, at: float | None = None) -> list[Series]:
    """Instant query; returns the result vector (raises ServiceError on an API error)."""
    params = {"query": promql}
    if at is not None:
        params["time"] = f"{at:.3f}"
    result: list[Series] = prometheus_api(prometheus_url, "/api/v1/query", params)["result"]
    return result

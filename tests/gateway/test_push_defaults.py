"""The Pushgateway client's defaults have one home (fioprobe.gateway.defaults); the client, the
configuration file, the command line and the manifests' defaults all say the same."""

from __future__ import annotations

import json
import subprocess

from conftest import REPO
from fioprobe.cli.main import build_parser
from fioprobe.gateway import defaults as push_defaults
from fioprobe.gateway.settings import PushgatewayConfig
from fioprobe.gateway.transport import Transport
from support.paths import GO_JSONNET

EXPECTED = (push_defaults.TIMEOUT_SECONDS, push_defaults.ATTEMPTS)


def test_client_configuration_and_command_line_agree() -> None:
    transport = Transport("http://127.0.0.1:9091")
    config = PushgatewayConfig("http://127.0.0.1:9091")
    args = build_parser().parse_args(["push", "-", "--storageclass", "a", "--profile", "b"])
    assert (transport.timeout_seconds, transport.attempts) == EXPECTED
    assert (config.timeout_seconds, config.attempts) == EXPECTED
    assert (args.timeout, args.attempts) == EXPECTED
    assert transport.backoff_seconds == push_defaults.BACKOFF_SECONDS


def test_manifests_default_to_the_same() -> None:
    """The manifests write both into every probe's configuration (and size the CronJob's
    deadline from them): their defaults are the client's."""
    program = (
        "local probes = import 'manifests/lib/monitoring-config.libsonnet';"
        "local pgw = probes.merged(import 'manifests/config.libsonnet').pushgateway;"
        "[pgw.timeoutSeconds, pgw.attempts]"
    )
    result = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e", program],
        capture_output=True, text=True, timeout=120, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert tuple(json.loads(result.stdout)) == EXPECTED

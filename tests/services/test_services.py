"""The launcher of real components: a port taken by someone else is an error, not a mix-up."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from support import services


def test_a_taken_port_is_reported_not_mistaken_for_ours(tmp_path: Path) -> None:
    first = services.pushgateway(tmp_path / "a").start()
    second = services.pushgateway(tmp_path / "b", port=first.port)
    try:
        with pytest.raises(services.ServiceError, match="port was probably taken"):
            second.start()
    finally:
        second.stop()
        first.stop()


def test_a_port_held_by_a_silent_listener_is_reported_as_taken(tmp_path: Path) -> None:
    """The other order: our process fails to bind and exits before anything answered the
    readiness check (the port's holder accepts connections and never answers). The message
    says the same, whichever comes first."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(16)
        service = services.pushgateway(tmp_path / "a", port=holder.getsockname()[1])
        try:
            with pytest.raises(services.ServiceError, match="port was probably taken"):
                service.start()
        finally:
            service.stop()


def test_wait_for_is_bounded() -> None:
    with pytest.raises(TimeoutError, match=r"timed out after 0\.3s waiting for nothing"):
        services.wait_for(lambda: None, timeout=0.3, what="nothing", interval=0.05)
    assert services.wait_for(lambda: 42, timeout=1) == 42

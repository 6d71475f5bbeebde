"""Every error fioprobe raises on purpose is a FioprobeError that carries its exit status.

Why: the command line maps errors to exit statuses through that one base class alone
(`cli.main`); an error type outside it would end in a traceback, or need a special case
that the next new error type would miss.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import fioprobe
import pytest
from fioprobe.cli import main as cli
from fioprobe.errors import ExitCode, FioprobeError


def package_modules() -> list[str]:
    """Every module of the package but `__main__`, which runs the command when imported."""
    names = (info.name for info in pkgutil.walk_packages(fioprobe.__path__, prefix="fioprobe."))
    return sorted(name for name in names if name != "fioprobe.__main__")


def public_error_types() -> dict[str, type[BaseException]]:
    """Exception classes each module defines, except private ones (control flow inside a
    module, never leaving it)."""
    found = {}
    for name in package_modules():
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not attribute.startswith("_")
            ):
                found[f"{name}.{attribute}"] = value
    return found


#: Control flow shared by the modules of one subpackage, or raised by a foundation module to
#: the stage that uses it, and caught there: public so that those modules may import it,
#: never raised to a caller beyond them.
SUBPACKAGE_CONTROL_FLOW = {
    # the read-back's and the listing's "this answer is malformed", turned into PushError
    "fioprobe.gateway.api.Shape",
    # one HTTP exchange's "no answer in time" and "answer too large", turned into PushError
    # by the Pushgateway's transport and into KubeError by the Kubernetes API client
    "fioprobe.exchange.DeadlineHit",
    "fioprobe.exchange.TooLarge",
}


def test_every_error_type_derives_from_the_one_base() -> None:
    errors = public_error_types()
    assert len(errors) >= 10, sorted(errors)  # the scan found the package's errors
    outside = sorted(name for name, kind in errors.items() if not issubclass(kind, FioprobeError))
    assert outside == sorted(SUBPACKAGE_CONTROL_FLOW)


@pytest.mark.parametrize("name", sorted(set(public_error_types()) - SUBPACKAGE_CONTROL_FLOW))
def test_each_error_type_has_a_documented_exit_status(name: str) -> None:
    kind = public_error_types()[name]
    assert kind.exit_code in set(ExitCode), f"{name}: exit {kind.exit_code}"


def test_cli_maps_errors_to_exits_through_the_base_class_alone() -> None:
    """main() catches the one base class (and the signals); no handler names a module or a
    concrete error type to pick an exit status."""
    commands = [i.name for i in pkgutil.iter_modules(fioprobe.cli.__path__, "fioprobe.cli.")]
    assert len(commands) >= 10, commands  # main, options and every command module
    for name in commands:
        assert "sys.modules" not in inspect.getsource(importlib.import_module(name)), name
    handlers = [
        line.strip()
        for line in inspect.getsource(cli.main).splitlines()
        if line.strip().startswith("except ")
    ]
    assert handlers == [
        "except KeyboardInterrupt:",
        "except Interrupted as exc:",
        "except FioprobeError as exc:",
    ]

"""The command line that starts a child Python running fioprobe's own code.

Children (the volume worker, the continuous stream's writers) run the very interpreter the
parent runs, as whatever user the parent runs as. `sys.executable` is only a path: one the
user may not be able to reach (a virtualenv whose interpreter links into a directory private
to another user, started once by a privileged launcher and never again by the process
itself), or one that names another binary by now (an upgrade). /proc/self/exe is the running
binary itself, whatever path led to it.

`-I` (isolated: no environment variables, no user site, not the current directory) keeps
everything of the environment out of the child. An interpreter started as /proc/self/exe
does not find its virtualenv either, so the parent's import path goes on the command line:
the child imports exactly the modules the parent does, from the same places.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

#: The running interpreter, by the kernel's own link (Linux).
_SELF = "/proc/self/exe"
#: The directory that holds the fioprobe package.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def python_command(statement: str, *args: str) -> list[str]:
    """argv of a child running `statement`; in it, sys.argv[1] is the import path (JSON)
    and sys.argv[2:] are `args`."""
    interpreter = _SELF if os.path.exists(_SELF) else sys.executable
    paths = [_PACKAGE_ROOT] + [p for p in sys.path if os.path.isabs(p) and p != _PACKAGE_ROOT]
    bootstrap = "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    return [interpreter, "-I", "-c", bootstrap + statement, json.dumps(paths), *args]

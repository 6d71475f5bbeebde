"""Where the repository and the tests' data are, for a test in any folder under tests/.

A test never finds them from its own file (`Path(__file__).parents[N]`): the test folders are
one level or more below tests/, and a test that moves would silently read from elsewhere.
"""

from pathlib import Path

#: The repository's root: this file is tests/support/paths.py.
REPO = Path(__file__).resolve().parents[2]
#: Data files the tests read (the fio corpus, saved help texts, vendored kube-prometheus).
TEST_DATA = REPO / "tests" / "data"
#: The jsonnet interpreter of the generated files (scripts/setup.d/31-go-jsonnet.sh), and of
#: every test's render: Debian's C++ jsonnet takes about 7 times its CPU for the mixin's
#: rules, and the demo (`make demo`, its test) already runs that one.
GO_JSONNET = REPO / ".tools" / "bin" / "go-jsonnet"

// fioprobe's version, read from its one home: the `__version__ = "..."` line of
// exporter/fioprobe/__init__.py, which the package, its wheel (pyproject.toml) and so the
// image take it from too. tests/repo/test_single_home.py checks that this is the value Python reads.
local source = importstr '../../exporter/fioprobe/__init__.py';
local prefix = '__version__ = "';
local lines = [line for line in std.split(source, '\n') if std.startsWith(line, prefix)];
assert std.length(lines) == 1 && std.endsWith(lines[0], '"')
       : 'exporter/fioprobe/__init__.py: expected one line __version__ = "<version>"';
std.substr(lines[0], std.length(prefix), std.length(lines[0]) - std.length(prefix) - 1)

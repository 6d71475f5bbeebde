"""Bounds against a hang for the tests of scripts/run-tests.sh's CPU lane (the mixin's promtool
and jsonnet suites), which runs at `nice` 10 beside the waiting lane and gets the CPU that lane
leaves: a promtool run of 150 s alone can take several times that there. The bounds only stop
a hung tool; how fast the suites are is measured (docs/BENCHMARKS.md), never asserted."""

#: One promtool, jsonnet or generator run.
RUN_SECONDS = 1800
#: One test, its module fixture's runs included (pytest-timeout).
TEST_SECONDS = 3600

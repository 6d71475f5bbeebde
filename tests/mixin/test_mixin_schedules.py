"""The alert scenarios at 10 and 15 minute probe schedules (5 minutes: the committed files),
with the real promtool.

Why: the mixin's windows are derived from the one probe interval, so every alert must keep
its stated behaviour at every schedule: fire after the stated number of runs, never on one
slow run, never on stale data. alerts/tests/scenarios.py writes each check relative to the
interval (silent one evaluation before the stated time, firing at it), so these runs are
what docs/MIXIN.md's table of time-to-fire per schedule was measured with.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import scenarios
import yaml
from observed import narrowed
from support import lanes
from support.paths import GO_JSONNET, REPO

pytestmark = pytest.mark.timeout(lanes.TEST_SECONDS)


def render(tmp_path: Path, interval_min: int, group: str) -> Path:
    """The mixin's rules and the `fioprobe.expected` group of the deployment `group`'s
    scenarios run in (manifests/rules.jsonnet's example, with its keys), at this schedule, as
    one rule file."""
    config = json.dumps(
        {**scenarios.deployment_config(group), "probeIntervalSeconds": interval_min * 60}
    )
    proc = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "--tla-code", f"config={config}",
         "--tla-str", f"example={scenarios.example(group)}", str(REPO / scenarios.RULES_JSONNET)],
        capture_output=True, text=True, timeout=lanes.RUN_SECONDS, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / f"rules-{interval_min}m.json"
    path.write_text(proc.stdout)
    return path


# The 5-minute schedule is the committed files' (alerts/tests/*.yaml, generated from the same
# scenarios, run on the committed rules by tests/mixin/test_mixin.py, both checked to be what their
# generators write): running it here again would only repeat them.
CASES = [(group, interval) for interval in (10, 15) for group in sorted(scenarios.GROUPS)]


def run_case(workdir: Path, group: str, interval_min: int) -> subprocess.CompletedProcess[str]:
    rules = render(workdir, interval_min, group)
    test_file = workdir / f"{group}-{interval_min}m.yaml"
    # The scenarios about the rules' memory (restart and gap twins, a day-long lost group) run
    # in the committed 5-minute files (tests/mixin/test_mixin.py): at every schedule they would
    # triple the slowest promtool runs for what no window of the schedule changes.
    document = scenarios.document(group, interval_min, str(rules), memory=False)
    # Only the groups the checks can observe: the verdict is the whole file's, at a fraction
    # of promtool's time (alerts/tests/observed.py).
    only, document = narrowed(json.loads(rules.read_text()), document)
    rules.write_text(json.dumps(only))
    test_file.write_text(yaml.safe_dump(document))
    return subprocess.run(
        ["promtool", "test", "rules", str(test_file)],
        capture_output=True, text=True, timeout=lanes.RUN_SECONDS, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[subprocess.CompletedProcess[str]]:
    """Every case's promtool run, as many at a time as there are CPUs (independent cases,
    each in a directory of its own)."""
    base = tmp_path_factory.mktemp("schedules")

    def one(index: int) -> subprocess.CompletedProcess[str]:
        workdir = base / str(index)
        workdir.mkdir()
        return run_case(workdir, *CASES[index])

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return list(pool.map(one, range(len(CASES))))


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"{g}-{i}m" for g, i in CASES])
def test_scenarios_at_each_schedule(
    runs: list[subprocess.CompletedProcess[str]], index: int
) -> None:
    proc = runs[index]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "SUCCESS" in proc.stdout


def test_committed_unit_tests_are_the_5_minute_scenarios(tmp_path: Path) -> None:
    """alerts/tests/*.yaml are generated: regenerate them with scripts/generate.sh."""
    scenarios.main(["scenarios.py", str(tmp_path)])
    for path in sorted(tmp_path.glob("*.yaml")):
        committed = REPO / "alerts" / "tests" / path.name
        assert committed.read_text() == path.read_text(), f"{path.name}: run scripts/generate.sh"

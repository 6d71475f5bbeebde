"""The README's promises: its metric table matches the exporter's, its two commands exist."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fioprobe.metrics.table import METRICS
from support.paths import REPO


def test_metric_table_is_generated_from_the_metric_table() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "generated_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    readme = (REPO / "README.md").read_text()
    for metric in METRICS:
        assert f"`{metric.name}`" in readme


def test_two_commands_and_ci_agree() -> None:
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_readme_config_example_is_valid(tmp_path: Path) -> None:
    from fioprobe.target.config import load_config

    readme = (REPO / "README.md").read_text()
    example = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "config.yaml"
    path.write_text(example)
    config = load_config(path)
    assert [t.name for t in config.targets] == ["gp2-standard", "etcd-disk"]
    assert config.targets[1].node_local and config.targets[1].profiles[0].overrides

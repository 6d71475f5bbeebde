#!/usr/bin/env python3
"""Draw each Grafana dashboard's data without a Grafana: docs/dashboards/<uid>.png.

Why: no Grafana server can be installed here, and a reader of docs/DASHBOARDS.md should see
what the dashboards show before deploying them. This runs the same live setup as
tests/mixin/test_dashboards_live.py (real probes on a plain directory and on a FUSE filesystem
that delays fsync by 15 ms, a probe failing on purpose, real Pushgateway, Prometheus with
the mixin's recording rules, and etcd on the slow filesystem), runs every panel query of
every dashboard with its variables substituted, and plots each result where the panel sits
in the dashboard's grid: time series as lines (with the dashed threshold lines), bar
gauges as bars coloured by threshold, stats as coloured numbers, tables as tables, the
heatmap as a heatmap. Units follow each panel's unit.

Run with tests/ and tests/mixin/ on the import path (it reuses the live test's setup):

    export PYTHONPATH=tests:tests/mixin
    .venv/bin/python scripts/dashboard_pictures.py   # live setup (root, FUSE)
    .venv/bin/python scripts/dashboard_pictures.py --rounds 6
    FIOPROBE_LIVE_RESULTS=/tmp/live.json .venv/bin/pytest tests/mixin/test_dashboards_live.py
    .venv/bin/python scripts/dashboard_pictures.py --results /tmp/live.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

from fioprobe.preview.draw import save_pictures

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "dashboards"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="query results written by the live test")
    parser.add_argument("--rounds", type=int, default=4, help="probe rounds of the live setup")
    parser.add_argument("--save-results", type=Path, help="also write the query results here")
    parser.add_argument("--out", type=Path, default=OUT, help="output directory")
    args = parser.parse_args(argv)

    import test_dashboards_live as live  # the test's setup and Grafana substitution (tests/mixin/)

    if args.results:
        results = json.loads(args.results.read_text())
        source = results.get("source", f"data: {args.results.name} from a live test run")
    else:
        reason = live.fuse_unavailable()
        if reason:
            print(f"dashboard_pictures: cannot run the live setup: {reason}", file=sys.stderr)
            return 2
        with (
            tempfile.TemporaryDirectory(prefix="fioprobe-pictures-") as tmp,
            live.live_stack(Path(tmp), rounds=args.rounds) as stack,
        ):
            results = live.collect_results(stack.prometheus_url, stack.start, stack.end)
        source = f"data: live setup of scripts/dashboard_pictures.py, {args.rounds} probe rounds"
    if args.save_results:
        args.save_results.write_text(json.dumps({**results, "source": source}))
    start = dt.datetime.fromtimestamp(results["start"], dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    span = results["end"] - results["start"]
    note = (
        f"{source}; time range {start} UTC + {span:.0f} s. Targets: {live.PLAIN} (plain "
        f"directory, dedicated gp2 {live.PLAIN_GP2_GIB}Gi model, no node), {live.SLOW} (FUSE, "
        f"fsync +{live.FSYNC_DELAY_MS:g} ms, node {live.NODE}, dedicated gp2 "
        f"{live.SLOW_GP2_GIB}Gi model; etcd's data dir is here too), {live.BROKEN} (fails "
        "every run: unsafe_target)."
    )
    for path in save_pictures(results, args.out, note, live.needs_external_data()):
        print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

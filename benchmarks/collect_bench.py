"""collect at scale: 10,000 result files (target < 10 s) and a re-collect with nothing new (target < 1 s).

The result files are copies of one real worker result with their point varied (nodes, ZeRO stage,
I/O mode, repetition), each in its own point/attempt directory, with a ledger to match.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from studyctl.backends.base import Update
from studyctl.ledger import Ledger
from studyctl.points import Point
from studyctl.reporting import collect_study
from studyctl.states import State

REPO = Path(__file__).resolve().parents[1]


def template_result() -> dict:
    found = sorted(REPO.glob("results/*/points/*/attempt-*/result.json"))
    if not found:
        raise SystemExit("no worker result to copy: run `bash scripts/quickstart.sh` first")
    return json.loads(found[0].read_text())


def make_study(root: Path, n: int, template: dict) -> Path:
    study = root / "bench-collect"
    (study / "points").mkdir(parents=True)
    (study / "sweep.yaml").write_text("study: bench-collect\ndescription: synthetic copies of a real result\n")
    rows, done = [], []
    for i in range(n):
        data = json.loads(json.dumps(template))
        pt = data["point"]
        pt.update(nodes=[1, 2, 4, 8][i % 4], zero_stage=[1, 3][(i // 4) % 2],
                  io_mode=["buffered", "direct"][(i // 8) % 2], repetition=i // 16, ranks_per_node=1)
        point = Point.model_validate(pt)
        data["point_id"] = point.point_id
        adir = study / "points" / point.point_id / "attempt-1"
        adir.mkdir(parents=True)
        (adir / "result.json").write_text(json.dumps(data))
        rows.append((point.point_id, i, point.canonical(), False, None))
        done.append(point.point_id)
    with Ledger(study / "ledger.sqlite") as ledger:
        ledger.sync_points(rows)
        ledger.new_attempts([(p, "local") for p in done])
        ledger.record_updates([Update(p, 1, State.COMPLETED) for p in done])
    return study


def main(n: int = 10_000, repeat: int = 5) -> int:
    template = template_result()
    first, again = [], []
    for _ in range(repeat):
        root = Path(tempfile.mkdtemp(prefix="studyctl-collect-bench-"))
        try:
            study = make_study(root, n, template)
            t0 = time.perf_counter()
            out = collect_study(study)
            first.append(time.perf_counter() - t0)
            assert out.completed == n and not out.problems, (out.completed, out.problems[:3])
            t0 = time.perf_counter()
            out = collect_study(study)
            again.append(time.perf_counter() - t0)
            assert out.unchanged
        finally:
            shutil.rmtree(root, ignore_errors=True)
    for name, times, target in ((f"collect {n:,} result files", first, 10.0),
                                ("re-collect, nothing new", again, 1.0)):
        med = statistics.median(times)
        print(f"{name:<44} median {med:6.3f} s  min {min(times):6.3f}  max {max(times):6.3f}  "
              f"target < {target:g} s  {'ok' if med < target else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:])))

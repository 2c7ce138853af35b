"""`studyctl sweep status` on a 1,000-point study: the real command in a fresh process, as a user runs it.

Target: under 0.5 s, for `sweep cancel`, `sweep resubmit` and `plan` too. The study is built with
the library's own ledger and task files (tests/studygen.py: 950 COMPLETED, 30 FAILED, 20 never run; one attempt
directory each), so each command opens, checks and reconciles a real ledger and prints its answer. Printed
beside them, measured back to back: `--help` (the CLI's own start-up), a bare interpreter, and which heavy
libraries the status process loaded (none should be).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.studygen import build_study

TARGET_S = 0.5
HEAVY = ("pandas", "matplotlib", "jinja2", "submitit", "numpy", "pyarrow")
LOADED = ("import sys, runpy; sys.argv = ['studyctl', 'sweep', 'status', {study!r}]\n"
          "try:\n    runpy.run_module('studyctl.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
          "print('loaded:', *(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)")


def timed(argv: list[str], repeat: int, check: bool = True) -> list[float]:
    """Wall seconds of each run; `check=False` where exit 1 is the answer (a study with FAILED points)."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, check=check, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


def row(name: str, times: list[float], target: float | None = None) -> str:
    med = statistics.median(times)
    verdict = "" if target is None else f"  target < {target:g} s  {'ok' if med < target else 'MISSED'}"
    return f"{name:<44} median {med:6.3f} s  min {min(times):6.3f}  max {max(times):6.3f}{verdict}"


def main(points: int = 1000, repeat: int = 10) -> int:
    cli = [sys.executable, "-m", "studyctl.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        study = str(build_study(Path(tmp), points).root)
        subprocess.run([*cli, "sweep", "status", study], check=True, stdout=subprocess.DEVNULL)  # warm the caches
        status = timed([*cli, "sweep", "status", study], repeat)
        as_json = timed([*cli, "sweep", "status", study, "--json"], repeat)
        cancel = timed([*cli, "sweep", "cancel", study], repeat)  # nothing is queued: reconcile, find none
        resubmit = timed([*cli, "sweep", "resubmit", study, "--max-attempts", "1"], repeat, check=False)
        plan = timed([*cli, "plan", str(Path(tmp) / "status-bench.yaml")], repeat)
        helped = timed([*cli, "--help"], repeat)
        bare = timed([sys.executable, "-c", "pass"], repeat)
        probe = subprocess.run([sys.executable, "-c", LOADED.format(study=study, heavy=HEAVY)], check=True,
                               capture_output=True, text=True).stderr
        heavy = next(line for line in probe.splitlines() if line.startswith("loaded:")).split()[1:]
    print(row(f"sweep status, {points:,} points", status, TARGET_S))
    print(row(f"sweep status --json, {points:,} points", as_json, TARGET_S))
    print(row(f"sweep cancel, {points:,} points (none queued)", cancel, TARGET_S))
    print(row(f"sweep resubmit, {points:,} points (none to rerun)", resubmit, TARGET_S))
    print(row(f"plan, {points:,} points", plan, TARGET_S))
    print(row("studyctl --help (start-up alone)", helped))
    print(row("python -c pass", bare))
    print(f"heavy libraries the status process loaded: {' '.join(heavy) or 'none'} (of {', '.join(HEAVY)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))

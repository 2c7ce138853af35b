"""`python -m benchmarks all` (or one of: orchestrator, status, collect, memory, submission, fio, buffered,
strategies, ledger, ceilings, dispatch_share, engines, engines_cpu; `engines_paired`, the second half of
`engines`, alone; `projection`, `s3_clients`, `hung_timeout` and
`plan_restart` run only when named: a 20 GiB checkpoint; the project's S3 server, started when down; minutes of
three busy loops loading the machine; the code before a change checked out and run)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from benchmarks import page_reuse


def header() -> None:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    mem_kib = int(next(ln.split()[1] for ln in meminfo if ln.startswith("MemTotal")))
    disk = subprocess.run(["df", "-h", "/var/tmp"], capture_output=True, text=True).stdout.splitlines()[-1]
    print(f"# studyctl benchmarks, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"# {platform.node()}: {platform.machine()}, {len(os.sched_getaffinity(0))} cores, "
          f"{mem_kib // 1024 // 1024} GiB, kernel {platform.release()}, Python {platform.python_version()}")
    print(f"# scratch disk: {disk}")
    print(f"# {page_reuse.memory_return()}")


def main(argv: list[str]) -> int:
    which = argv[0] if argv else "all"
    repeat = int(argv[1]) if len(argv) > 1 else 5
    header()
    if which in ("all", "orchestrator"):
        from benchmarks import orchestrator

        orchestrator.main(repeat)
    if which in ("all", "status"):
        from benchmarks import status_speed

        status_speed.main(1000, max(repeat, 10))
    if which in ("all", "collect"):
        from benchmarks import collect_bench

        collect_bench.main(10_000, repeat)
    if which in ("all", "memory"):
        from benchmarks import worker_memory

        worker_memory.main(repeat)
    if which in ("all", "submission"):
        from benchmarks import submission

        submission.main(500)
    if which in ("all", "fio"):
        from benchmarks import worker_vs_fio

        worker_vs_fio.main(["--repeat", str(repeat)])
    if which in ("all", "buffered"):
        from benchmarks import buffered_fsync

        buffered_fsync.main(repeat)
    if which in ("all", "ledger"):
        from benchmarks import ledger_journal

        ledger_journal.main(repeat)
    if which in ("all", "strategies"):
        from benchmarks import strategies_bench

        strategies_bench.main(repeat)
    if which in ("all", "ceilings"):
        from benchmarks import ceiling_vs_fio

        ceiling_vs_fio.main(["--repeat", str(repeat)])
    if which in ("all", "dispatch_share"):
        from benchmarks import dispatch_share

        dispatch_share.main(repeat)
    if which in ("all", "engines"):
        from benchmarks import engines_bench

        engines_bench.main(repeat if len(argv) > 1 else 3)
    if which == "engines_paired":  # part of `engines`: its calls paired in one process
        from benchmarks import engines_paired

        engines_paired.run_all(repeat if len(argv) > 1 else engines_paired.REPS)
    if which in ("all", "engines_cpu"):
        from benchmarks import engines_cpu_check

        engines_cpu_check.main(repeat if len(argv) > 1 else 2)
    if which == "s3_clients":  # not in `all`: it needs the S3 server (started here when down)
        from benchmarks import s3_clients

        s3_clients.main(repeat)
    if which == "s3_worker":  # not in `all`: the worker's S3 I/O vs the clients driven directly (the S3 server)
        from benchmarks import s3_worker

        s3_worker.main(repeat)
    if which == "plan_restart":  # not in `all`: the code before is checked out and runs for minutes
        from benchmarks import plan_restart

        plan_restart.main(repeat if len(argv) > 1 else 3)
    if which == "projection":  # not in `all`: a 20 GiB checkpoint, ~45 GiB of scratch disk, minutes
        from benchmarks import projection_bench

        projection_bench.main(int(argv[1]) if len(argv) > 1 else 3)
    if which == "hung_timeout":  # not in `all`: it loads the machine with 3 busy loops for minutes
        from benchmarks import hung_timeout

        hung_timeout.main(int(argv[1]) if len(argv) > 1 else 20, int(argv[2]) if len(argv) > 2 else 6)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

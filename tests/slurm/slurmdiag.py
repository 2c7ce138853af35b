"""What a failed Slurm test prints: the queue, the daemons' recent errors and the jobs' own logs.

A job that hangs or fails on a CI machine cannot be looked at afterwards; its evidence goes into the
assertion message instead.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

LAB = Path(os.environ.get("SLURM_LAB_DIR", "/tmp/slurm-local"))


def _tail(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def cluster_snapshot(error_lines: int = 12) -> str:
    """squeue with pending reasons and the daemons' latest error lines."""
    queue = subprocess.run(["squeue", "-a", "-o", "%i %j %T %M %l %D %R"], capture_output=True, text=True)
    out = ["squeue:", queue.stdout.strip() or queue.stderr.strip()]
    for log in sorted((LAB / "log").glob("slurm*.log")):
        errors = [line for line in _tail(log, 2000) if "error" in line.lower() and "pmix" not in line.lower()]
        if errors:
            out += [f"{log.name}:", *errors[-error_lines:]]
    return "\n".join(out)


def job_logs(folders: Iterable[Path], lines: int = 15) -> str:
    """The tails of every submitit log under the given folders (stderr first)."""
    out = []
    for folder in folders:
        for log in sorted(Path(folder).rglob("*_log.*"), key=lambda p: (p.suffix != ".err", str(p))):
            tail = _tail(log, lines)
            if tail:
                out += [f"--- {log}", *tail]
    return "\n".join(out)


def diagnose(*folders: Path) -> str:
    return f"\n{cluster_snapshot()}\n{job_logs(folders)}"

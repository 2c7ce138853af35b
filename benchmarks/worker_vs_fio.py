"""The worker against fio on the same bytes, ranks and block size: write and cold read, buffered and direct,
on a quiet machine and under a load the benchmark makes itself.

Design (docs/io-limits.md): for each pattern run fio, then the worker, then fio again; the
ratio is worker / mean(fio before, fio after); a run whose two fio figures differ by more than 15%
is discarded and repeated. fio: one job per rank, `bs` = the worker's block, end_fsync=1, the read
job on the same files (fio invalidates the page cache first; direct=1 for the direct pattern).
The worker writes one checkpoint of a ZeRO-3 layout (two files per rank, model + optimizer shard)
scaled so each rank writes `--gib-per-rank` GiB, then restores it cold (fadvise or O_DIRECT).

Like for like on this VM (the worker at fio's rate): memory freed is handed back to the host bit by bit from ~2 s on
(virtio-balloon free page reporting), and a buffered write into memory the host must back again runs at a third
of the rate or less, the longer the memory sat free the slower (benchmarks/page_gap.py). fio used to start
within milliseconds of the last files' deletion, the worker 1-3 s later (MPI launch, imports, its buffer): fio
wrote into memory the host still backed, the worker into memory it had to take back. Now each fio run starts
its write as long after the last deletion as the worker's did (the worker's gap, from the deletion to its
write's step directory appearing, measured on every run; a first unmeasured worker run calibrates it), so all
three write into the same state. `--loads 0,2`: each pattern quiet, then beside N busy processes the benchmark
starts and ends. The worker's slowest write rank's per-rank time split is printed beside.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from studyctl.definition.checkpoint.layout import summarize
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.units import GIB, MIB

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")


def fio(directory: Path, rw: str, ranks: int, size: int, block: int, direct: bool) -> float:
    """Aggregate bytes/s of one fio job group."""
    cmd = ["fio", "--name=ckpt", f"--directory={directory}", f"--rw={rw}", f"--bs={block}", f"--size={size}",
           f"--numjobs={ranks}", "--ioengine=psync", f"--direct={int(direct)}", "--group_reporting",
           "--output-format=json", "--invalidate=1"]
    if rw == "write":
        cmd += ["--end_fsync=1", "--create_on_open=1"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return float(job["read" if rw == "read" else "write"]["bw_bytes"])


POLL_S = 0.002  # how often the benchmark looks for the worker's first step directory


def fio_pair(directory: Path, ranks: int, size: int, block: int, direct: bool, gap_s: float = 0.0
             ) -> tuple[float, float]:
    """fio's write `gap_s` after the caller's last deletion, then its cold read; its files deleted after."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    time.sleep(gap_s)
    write = fio(directory, "write", ranks, size, block, direct)
    read = fio(directory, "read", ranks, size, block, direct)
    shutil.rmtree(directory, ignore_errors=True)
    return write, read


def worker_task(root: Path, ranks: int, gib_per_rank: float, block_mib: int, io_mode: str, buffer_mib: int = 64
                ) -> tuple[Path, int]:
    model = lookup("gpt2-1.5b")
    probe = Point(model=model, zero_stage=3, nodes=1, ranks_per_node=ranks, filesystem="bench")
    full = summarize(model, probe.parallelism).total_bytes
    scale = min(1.0, gib_per_rank * GIB * ranks / full)
    point = Point(model=model, zero_stage=3, nodes=1, ranks_per_node=ranks, filesystem="bench", io_mode=io_mode,
                  checkpoint=CheckpointOptions(writes=1, reads=1, scale=scale, buffer_mib=buffer_mib,
                                                         block_mib=block_mib))
    out = root / "out"
    out.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)  # the worker creates only its own directories below a filesystem path
    task = WorkerTask(study="bench", point_id=point.point_id, point=point, filesystem_path=str(root / "data"),
                      result_path=str(out / "result.json"), error_path=str(out / "error.json"))
    path = root / "task.json"
    path.write_text(task.model_dump_json())
    return path, summarize(model, point.parallelism, scale).bytes_per_rank_max


Split = dict[str, float]


def worker_pair(task: Path, ranks: int) -> tuple[float, float, Split, float]:
    """(write B/s, read B/s, the slowest write rank's split, gap): gap is the time from this call (right after the
    caller's last deletion) to the worker's first step directory: when its write starts, give or take the
    off-clock stamping of its buffer."""
    began = time.monotonic()
    proc = subprocess.Popen([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "worker", str(task)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    gap = 0.0
    while not gap and proc.poll() is None:
        if any((task.parent / "data").glob("*/*/global_epoch1_step1")):
            gap = time.monotonic() - began
        time.sleep(POLL_S)
    _, err = proc.communicate()
    if proc.returncode:
        raise RuntimeError(err[-2000:])
    result = json.loads((task.parent / "out" / "result.json").read_text())
    by_phase = {c["phase"]: c["aggregate_GiBps"] * GIB for c in result["checkpoints"]}
    write = next(c for c in result["checkpoints"] if c["phase"] == "write")
    slowest = max(write["ranks"], key=lambda r: r["duration_s"])
    return (by_phase["write"], by_phase["read"], {"duration_s": slowest["duration_s"], **(slowest["split"] or {})},
            gap)


@contextlib.contextmanager
def busy(processes: int) -> Iterator[None]:
    """`processes` busy loops beside the measurement (a machine under a load of about that many)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


Run = tuple[float, float, float, Split]  # (ratio, worker B/s, fio B/s, worker's slowest write rank's split)


def measure(root: Path, mode: str, ranks: int, gib_per_rank: float, block_mib: int, repeat: int,
            buffer_mib: int = 64, max_spread: float = 0.15) -> dict[str, list[Run]]:
    """(ratio, worker B/s, fio B/s, split with the gap) per valid run, per phase; fio gets the worker's gap."""
    task, per_rank = worker_task(root / f"{mode}-{ranks}", ranks, gib_per_rank, block_mib, mode, buffer_mib)
    fio_dir = root / "fio"
    out: dict[str, list[Run]] = {"write": [], "read": []}
    gap = worker_pair(task, ranks)[3]  # calibration: the worker's gap as it runs now
    tries = 0
    while min(len(v) for v in out.values()) < repeat and tries < repeat * 3:
        tries += 1
        before = fio_pair(fio_dir, ranks, per_rank, block_mib * MIB, mode == "direct", gap)
        *mine, split, gap = worker_pair(task, ranks)
        after = fio_pair(fio_dir, ranks, per_rank, block_mib * MIB, mode == "direct", gap)
        for i, phase in enumerate(("write", "read")):
            ref = (before[i] + after[i]) / 2
            if abs(before[i] - after[i]) / ref > max_spread or len(out[phase]) >= repeat:
                continue  # the disk changed under us: this run says nothing
            out[phase].append((mine[i] / ref, mine[i], ref, {**split, "gap_s": gap}))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--gib-per-rank", type=float, default=1.0)
    ap.add_argument("--block-mib", type=int, default=16)
    ap.add_argument("--buffer-mib", type=int, default=64, help="the worker's buffer (its default: 64)")
    ap.add_argument("--dir", type=Path, default=None, help="scratch directory on the disk under test")
    ap.add_argument("--modes", default="buffered,direct")
    ap.add_argument("--ranks", default="2")
    ap.add_argument("--loads", default="0,2", help="busy processes beside each pattern, one pass per value")
    args = ap.parse_args(argv)
    if not shutil.which("fio"):
        print("fio is not installed (apt-get install fio)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="studyctl-bench-", dir=args.dir or "/var/tmp"))
    rows = []
    try:
        for load in (int(n) for n in args.loads.split(",")):
            for mode in args.modes.split(","):
                for ranks in (int(r) for r in args.ranks.split(",")):
                    with busy(load):
                        start_load = os.getloadavg()[0]
                        res = measure(root, mode, ranks, args.gib_per_rank, args.block_mib, args.repeat,
                                      args.buffer_mib)
                    for phase in ("write", "read"):
                        rows.append((mode, phase, ranks, load, start_load, _stats(res[phase])))
                        print(_row(rows[-1]), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    missed = [r for r in rows if r[5] is None or r[5][0] < 0.95]
    print(f"{len(rows) - len(missed)}/{len(rows)} patterns at >= 0.95x fio (median)")
    return 0


def _stats(runs: list[Run]) -> tuple | None:
    if not runs:
        return None
    ratios = [r[0] for r in runs]
    split = {k: statistics.median(r[3].get(k, 0.0) for r in runs) for k in runs[0][3]}
    return (statistics.median(ratios), min(ratios), max(ratios), len(runs), statistics.median(r[1] for r in runs) / GIB,
            statistics.median(r[2] for r in runs) / GIB, split)


def _row(row: tuple) -> str:
    mode, phase, ranks, load, start_load, stats = row
    where = f"{mode:<8} {phase:<5} ranks={ranks} busy={load} (loadavg {start_load:.1f})"
    if stats is None:
        return f"worker/fio {where}: no valid run (fio varied > 15%)"
    med, lo, hi, n, worker, ref, split = stats
    line = (f"worker/fio {where}: median {med:.3f}  min {lo:.3f}  max {hi:.3f}  "
            f"(n={n}; worker {worker:.2f} GiB/s, fio {ref:.2f} GiB/s)")
    if phase == "write" and "transfer_s" in split:
        line += ("  slowest write rank s: " + " ".join(f"{k.removesuffix('_s')} {split[k]:.3f}" for k in
                                                      ("gap_s", "duration_s", "open_s", "transfer_s", "fsync_s",
                                                       "close_s", "other_s")))
    return line


if __name__ == "__main__":
    sys.exit(main())

"""The ceiling point's storage probe against fio on the same bytes, ranks and block (its target: >= 0.95x fio).

A ceiling point (worker.ceiling) writes and fsyncs one file per rank of the largest shard, then reads it back cold,
and the same with the checkpoint's bytes spread evenly, each up to definition.planning.ceilings.PROBE_MAX_BYTES per rank
(`probes_run`; a phase also stops at PROBE_STREAM_S: keep --gib-per-rank within what the disk moves in that time);
each the median of its rounds (definition.planning.ceilings.another_round). fio runs the same
pattern (docs/io-limits.md: one job per rank, `bs` = the block, end_fsync=1, the read job on the same
files with the page cache invalidated; direct=1 for the direct mode) right before and right after the worker,
for both sizes; the ratio is the worker's / the mean of fio's two; a run whose two fio figures differ by more
than 15% is discarded. The point is a ZeRO-1 layout (data-parallel rank 0 holds the model states, so its shard
is larger than the even share), scaled so the largest shard is `--gib-per-rank` GiB.
fio is Debian's package `fio` (`apt-get install fio`); without it the benchmark says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.worker_vs_fio import GIB, MIB, MPIEXEC, fio_pair
from studyctl.definition.checkpoint.layout import summarize
from studyctl.definition.checkpoint.points import CheckpointOptions, Point, WorkerTask
from studyctl.definition.inputs.catalog import lookup
from studyctl.definition.planning.ceilings import probes_run

PROBES = {"largest": ("storage_write_GiBps", "storage_read_GiBps"), "even": ("even_write_GiBps", "even_read_GiBps")}


def ceiling_task(root: Path, ranks: int, gib_per_rank: float, block_mib: int, io_mode: str) -> tuple[Path, Point]:
    model = lookup("gpt2-1.5b")
    probe = Point(model=model, zero_stage=1, nodes=1, ranks_per_node=ranks, filesystem="bench")
    scale = min(1.0, gib_per_rank * GIB / summarize(model, probe.parallelism).bytes_per_rank_max)
    point = Point(model=model, zero_stage=1, nodes=1, ranks_per_node=ranks, filesystem="bench", io_mode=io_mode,
                  role="ceiling", checkpoint=CheckpointOptions(writes=1, reads=1, scale=scale, block_mib=block_mib))
    out = root / "out"
    out.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    task = WorkerTask(study="bench", point_id=point.point_id, point=point, filesystem_path=str(root / "data"),
                      result_path=str(out / "result.json"), error_path=str(out / "error.json"))
    path = root / "task.json"
    path.write_text(task.model_dump_json())
    return path, point


def run_ceiling(task: Path, ranks: int) -> dict[str, float]:
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "worker", str(task)], capture_output=True,
                          text=True)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return dict(json.loads((task.parent / "out" / "result.json").read_text())["ceilings"])


def fio_both(directory: Path, ranks: int, sizes: dict[str, int], block: int, direct: bool) -> dict[str, tuple]:
    return {probe: fio_pair(directory, ranks, size, block, direct) for probe, size in sizes.items()}


def measure(root: Path, mode: str, ranks: int, gib_per_rank: float, block_mib: int, repeat: int,
            max_spread: float = 0.15) -> dict[tuple[str, str], list[tuple[float, float, float]]]:
    """(ratio, worker B/s, fio B/s) per valid run, per (probe, phase)."""
    task, point = ceiling_task(root / f"{mode}-{ranks}", ranks, gib_per_rank, block_mib, mode)
    probed = probes_run(point)
    sizes = {"largest": probed["largest"], "even": probed.get("even", probed["largest"])}
    out: dict[tuple[str, str], list[tuple[float, float, float]]] = {(p, ph): [] for p in PROBES
                                                                     for ph in ("write", "read")}
    for _ in range(repeat * 3):
        if min(len(v) for v in out.values()) >= repeat:
            break
        before = fio_both(root / "fio", ranks, sizes, block_mib * MIB, mode == "direct")
        mine = run_ceiling(task, ranks)
        after = fio_both(root / "fio", ranks, sizes, block_mib * MIB, mode == "direct")
        for probe, fields in PROBES.items():
            for i, phase in enumerate(("write", "read")):
                ref = (before[probe][i] + after[probe][i]) / 2
                runs = out[(probe, phase)]
                if abs(before[probe][i] - after[probe][i]) / ref > max_spread or len(runs) >= repeat:
                    continue  # the disk changed under us: this run says nothing
                worker = mine[fields[i]] * GIB
                runs.append((worker / ref, worker, ref))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gib-per-rank", type=float, default=1.0)
    ap.add_argument("--block-mib", type=int, default=16)
    ap.add_argument("--dir", type=Path, default=None, help="scratch directory on the disk under test")
    ap.add_argument("--modes", default="buffered,direct")
    ap.add_argument("--ranks", default="2")
    args = ap.parse_args(argv)
    if not shutil.which("fio"):
        print("fio is not installed (apt-get install fio)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="studyctl-ceiling-", dir=args.dir or "/var/tmp"))
    passed = total = 0
    try:
        for mode in args.modes.split(","):
            for ranks in (int(r) for r in args.ranks.split(",")):
                for (probe, phase), runs in measure(root, mode, ranks, args.gib_per_rank, args.block_mib,
                                                    args.repeat).items():
                    total += 1
                    passed += bool(runs) and statistics.median(r[0] for r in runs) >= 0.95
                    print(_row(mode, probe, phase, ranks, runs), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{passed}/{total} ceiling probes at >= 0.95x fio (median)")
    return 0


def _row(mode: str, probe: str, phase: str, ranks: int, runs: list[tuple[float, float, float]]) -> str:
    what = f"ceiling/fio {mode:<8} {probe:<7} {phase:<5} ranks={ranks}"
    if not runs:
        return f"{what}: no valid run (fio varied > 15%)"
    ratios = [r[0] for r in runs]
    return (f"{what}: median {statistics.median(ratios):.3f}  min {min(ratios):.3f}  max {max(ratios):.3f}  "
            f"(n={len(runs)}; ceiling {statistics.median(r[1] for r in runs) / GIB:.2f} GiB/s, "
            f"fio {statistics.median(r[2] for r in runs) / GIB:.2f} GiB/s)")


if __name__ == "__main__":
    sys.exit(main())

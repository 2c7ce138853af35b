"""studyctl's checkpoint engines against the same framework calls made directly, and against `stream`.

    python -m benchmarks engines [repeat]      (3 rounds: 4-11 minutes on these 2-core VMs, ~2.5 of it the paired calls)

On the same tensors, ranks and disk (gpt2-125m at scale 0.1, ZeRO-1, 2 ranks on this host: ~170 MB a
checkpoint, rank 0 writing the weights and half the optimizer, rank 1 the other half):
  studyctl  a small study through the library API on the local backend: engines torch_save and dcp, and
            stream, each sync and async, 3 checkpoints then 1 cold restore a point; figures from the results;
  direct    `benchmarks.engines_direct` under mpiexec: a plain PyTorch script calling torch.save / torch.load,
            dcp.save / dcp.async_save / dcp.load on the same list of tensors, one process per strategy as
            studyctl runs one per point: 3 checkpoints then 1 cold restore.
Each (engine, strategy) pair is one direct run and one studyctl point side by side, which goes first alternating
from pair to pair and round to round, `repeat` rounds; `stream`'s two points run once a round as their own study.
Both sides run torch with THREADS intra-op threads (the worker through OMP_NUM_THREADS in its environment, which
mpiexec passes on; the script through torch.set_num_threads) and meet before each timed call without spinning.
Figures (seconds, the slowest rank, per checkpoint): sync save, cold restore, async blocking, persist (async
return to files complete). studyctl / direct: target 0.95-1.05x (studyctl adds nothing). Engine / stream on the
same layout: the framework's overhead over raw bytes. The async points' simulated step is a sleep (accelerator
compute, dispatch share 0, no all-reduce), so that nothing of studyctl's training competes with the persist the
direct script runs alone. Beside the wall figures, the CPU seconds of each side's whole run (os.times of the
finished mpiexec and its ranks: start-up, allocation, every save and the restore; studyctl's worker also
allocates the state its restore fills before the saves). The figures depend on this machine (2 shared cores, one
virtio disk, host tensors).
Last, the verdict on "studyctl adds nothing": `engines_paired`, the same calls paired in one process per rank
(40 repetitions a side at scale 0.3, ~6 minutes), whose ratios carry a 95% interval; whole runs minutes apart
swing with the load and with the memory each process is handed (`page_reuse`), so their per-round ratios above
show the spread, not the verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.engines_check import Samples, cell, engine_figures, merge, result_files
from benchmarks.worker_vs_fio import MPIEXEC

MODEL, SCALE, ZERO, RANKS, WRITES, THREADS = "gpt2-125m", 0.1, 1, 2, 3, 1
ENGINES = ("torch_save", "dcp")
FIGURES = (("sync", "sync save"), ("restore", "cold restore"), ("blocked", "async blocking"),
           ("persist", "persist"))
TARGET = 0.05
SWEEP = f"""study: {{name}}
models: [{MODEL}]
matrix: {{{{zero_stage: {ZERO}, nodes: 1, ranks_per_node: {RANKS}, io_mode: buffered,
          engine: {{engine}}, strategy: {{strategy}}}}}}
filesystems: {{{{disk: {{{{path: {{data}}, kind: local}}}}}}}}
checkpoint: {{{{writes: {WRITES}, reads: 1, scale: {SCALE}, buffer_mib: 64, block_mib: 16}}}}
ceilings: off
calibration: off
repetitions: 1
training: {{{{simulated_step: {{{{compute: accelerator, compute_s: 0.05, dispatch_share: 0, allreduce_mib: 0}}}}}}}}
local: {{{{max_concurrent: 1, timeout_s: 600}}}}
"""


def studyctl_samples(results: list[dict[str, Any]]) -> dict[str, Samples]:
    """Per engine (stream included): sync save and restore of its sync point; blocking and persist of its async
    point; restores of both (`engines_check.engine_figures`)."""
    out: dict[str, Samples] = {}
    for result in results:
        got = engine_figures(result)
        got.pop("lost")
        merge(out.setdefault(result["point"]["checkpoint"].get("engine") or "stream", {}), got)
    return out


def direct_samples(records: list[list[dict[str, float]]], saves: list[str], out: Samples) -> Samples:
    """engines_direct's per-rank records (each save, then the load): the slowest rank of each, added to `out`."""
    out.setdefault("restore", []).append(max(r[len(saves)]["load_s"] for r in records))
    for i, how in enumerate(saves):
        ranks = [r[i] for r in records]
        if how == "sync":
            out.setdefault("sync", []).append(max(r["seconds"] for r in ranks))
        else:
            out.setdefault("blocked", []).append(max(r["blocked_s"] for r in ranks))
            out.setdefault("persist", []).append(max(r["done_s"] - r["blocked_s"] for r in ranks))
    return out


def children_cpu() -> float:
    """CPU seconds of this process's finished children (mpiexec, and its ranks once it has waited for them)."""
    t = os.times()
    return t.children_user + t.children_system


def run_direct(scratch: Path, engine: str, how: str, out: Samples) -> float:
    """One process as studyctl runs one point: its saves, then one cold load; its CPU seconds."""
    root = Path(tempfile.mkdtemp(prefix="engines-direct-", dir=scratch))
    saves = [how] * WRITES
    try:
        config = root / "config.json"
        config.write_text(json.dumps({"model": MODEL, "tp": 1, "pp": 1, "zero": ZERO, "scale": SCALE,
                                      "root": str(root / "data"), "engine": engine, "saves": saves,
                                      "threads": THREADS}))
        result = root / "out.json"
        cpu = children_cpu()
        proc = subprocess.run([MPIEXEC, "-n", str(RANKS), sys.executable, "-m", "benchmarks.engines_direct",
                               str(config), str(result)], capture_output=True, text=True)
        cpu = children_cpu() - cpu
        if proc.returncode:
            raise RuntimeError(f"engines_direct ({engine}) failed: {proc.stderr[-2000:]}")
        records = json.loads(result.read_text())
        if {r[-1]["threads"] for r in records} != {THREADS}:
            raise RuntimeError(f"engines_direct ran with {records[0][-1]['threads']} threads, not {THREADS}")
        direct_samples(records, saves, out)
        return cpu
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_studyctl(scratch: Path, name: str, engine: str, strategy: str) -> tuple[dict[str, Samples], float]:
    """A study of the engine's points (`engine`, `strategy`: a value or a list, as the sweep says them); its
    samples per engine and the CPU seconds of its points' processes."""
    from studyctl import api

    root = Path(tempfile.mkdtemp(prefix="engines-studyctl-", dir=scratch))
    try:
        (root / "data").mkdir()
        sweep = root / "sweep.yaml"
        sweep.write_text(SWEEP.format(name=name, data=root / "data", engine=engine, strategy=strategy))
        cpu = children_cpu()
        api.submit(sweep, "local", results=root / "results")
        cpu = children_cpu() - cpu
        return studyctl_samples(result_files(root / "results" / name)), cpu
    finally:
        shutil.rmtree(root, ignore_errors=True)


def ratio(a: list[float], b: list[float]) -> float | None:
    return statistics.median(a) / statistics.median(b) if a and b and statistics.median(b) else None


Round = tuple[dict[str, Samples], dict[str, Samples]]  # one round's (direct, studyctl) samples per engine


def paired(rounds: list[Round], engine: str, key: str) -> str:
    """studyctl / direct within each round (the two ran minutes apart, under the same load): their median and
    min-max, the verdict's figure; a pooled ratio would mix rounds of different load."""
    got = [r for d, s in rounds if (r := ratio(s.get(engine, {}).get(key, []), d.get(engine, {}).get(key, [])))]
    if not got:
        return "— | —"
    mid = statistics.median(got)
    within = "yes" if abs(mid - 1) <= TARGET else "**no**"
    return f"{mid:.2f}x ({min(got):.2f}–{max(got):.2f}) | {within}"


def tables(rounds: list[Round]) -> list[str]:
    """studyctl against direct calls (per engine and figure), then each engine against stream."""
    direct: dict[str, Samples] = {}
    ours: dict[str, Samples] = {}
    for d, s in rounds:
        for into, more in ((direct, d), (ours, s)):
            for engine, samples in more.items():
                merge(into.setdefault(engine, {}), samples)
    lines = ["| engine | figure | direct, s (median, min-max, n) | studyctl, s | studyctl / direct, per round "
             f"(median, min-max) | within ±{TARGET:.0%} |", "|---|---|---|---|---|---|"]
    for engine in ENGINES:
        for key, label in FIGURES:
            theirs, mine = direct.get(engine, {}).get(key, []), ours.get(engine, {}).get(key, [])
            lines.append(f"| {engine} | {label} | {cell(theirs)} | {cell(mine)} | {paired(rounds, engine, key)} |")
    lines += ["", "| engine | figure | engine, s | stream, s | engine / stream |", "|---|---|---|---|---|"]
    stream = ours.get("stream", {})
    for engine in ENGINES:
        for key, label in FIGURES:
            mine, raw = ours.get(engine, {}).get(key, []), stream.get(key, [])
            r = ratio(mine, raw)
            lines.append(f"| {engine} | {label} | {cell(mine)} | {cell(raw)} | {f'{r:.2f}x' if r else '—'} |")
    return lines


Cpu = dict[str, dict[str, list[float]]]  # (engine.strategy) -> side -> CPU seconds of each run


def cpu_table(cpu: Cpu) -> list[str]:
    lines = ["| engine, strategy | direct run, CPU s (median, min-max, n) | studyctl point, CPU s | "
             "studyctl / direct |", "|---|---|---|---|"]
    for key, sides in cpu.items():
        r = ratio(sides.get("studyctl", []), sides.get("direct", []))
        lines.append(f"| {key} | {cell(sides.get('direct', []))} | {cell(sides.get('studyctl', []))} | "
                     f"{f'{r:.2f}x' if r else '—'} |")
    return lines


def main(repeat: int = 3, scratch: Path = Path("/var/tmp")) -> list[Round]:
    import torch

    print(f"\n## Checkpoint engines: studyctl vs direct PyTorch calls vs stream (`python -m benchmarks engines "
          f"{repeat}`)")
    print(f"# {MODEL} scale {SCALE}, ZeRO-{ZERO}, {RANKS} ranks on this host, {WRITES} checkpoints + 1 cold restore "
          f"per run, host tensors, torch {torch.__version__}, {THREADS} intra-op thread(s) a rank on both sides; "
          f"{repeat} rounds, each pair alternating; this machine's 2 shared cores and disk")
    threads = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(THREADS)  # the worker's ranks inherit it through mpiexec
    rounds: list[Round] = []
    cpu: Cpu = {}
    try:
        for r in range(repeat):
            direct: dict[str, Samples] = {}
            ours: dict[str, Samples] = {}
            for j, (engine, how) in enumerate((e, h) for e in ENGINES for h in ("sync", "async")):
                sides = ("direct", "studyctl") if (r + j) % 2 == 0 else ("studyctl", "direct")
                spent = cpu.setdefault(f"{engine}, {how}", {})
                for side in sides:
                    if side == "direct":
                        used = run_direct(scratch, engine, how, direct.setdefault(engine, {}))
                    else:
                        got, used = run_studyctl(scratch, f"engines-bench-{r}-{j}", engine, how)
                        merge(ours.setdefault(engine, {}), got.get(engine, {}))
                    spent.setdefault(side, []).append(used)
            got, _ = run_studyctl(scratch, f"engines-bench-{r}-stream", "stream", "[sync, async]")
            merge(ours.setdefault("stream", {}), got.get("stream", {}))
            rounds.append((direct, ours))
            print(f"# round {r + 1}/{repeat} done (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        if threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = threads
    print("\n".join(tables(rounds)))
    print()
    print("\n".join(cpu_table(cpu)))
    from benchmarks import engines_paired  # it takes the layout from here

    print("\n# The calls paired in one process per rank (`engines_paired`): the verdict on studyctl / direct")
    engines_paired.run_all(scratch=scratch)
    return rounds


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)

"""A real training job's checkpoints beside studyctl's engine points of the same layout, on the same disk.

The real side is `benchmarks.real_training` (a GPT-2-shaped model trained in plain torch, checkpointed with
torch.save, DCP save and DCP async_save beside its steps, restored cold), run as its own process. The studyctl side
is a small study of the same model (a custom model with the real one's layers, hidden size, FFN, heads, vocabulary,
positions, biases and tied embeddings), one rank, ZeRO 0, `state: torch` (the fp32 weights + Adam m, v the real
job holds), engines `torch_save` and `dcp`, strategies sync and async with the same stagers, on the device the
real job trained on, submitted through the library API on the local backend; its figures are read from the points'
result files. The two sides alternate (real first, then studyctl, then the other order), `repeat` rounds.

Both sides take as many samples a round: studyctl's points write `writes` checkpoints each and restore as many
(cold), and the real job runs its whole sequence `writes` times over (a job that checkpoints only once measures a
cold allocator: its first staging copy page-faults every page, which a job's later checkpoints, and a point's,
do not).

Figures (seconds; the trimmed mean of the samples, their min-max the spread; ratio = studyctl / real, with its 95%
interval and the verdict it gives: `equivalence`):
  sync save, cold restore   the save call to its return (files fsynced), the load call to its return
  async blocking, persist   async_save's return; from then until the files are complete
  interference              compute lost beside the persist: sum(steps during) - n x idle step
The studyctl step stands for the real one: on a CPU job `compute: cpu` (the dispatch, holding the GIL, then the
kernels on the same core; no all-reduce: one rank), on a GPU job `compute: accelerator`, each with its default
dispatch share (measured from this real job's step for `cpu`: `dispatch_share.cpu_share`; on a GPU the share of
its idle step the real job's host took to launch it) and `compute_s` = the
real job's idle step.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import page_reuse
from benchmarks.equivalence import OUTSIDE, UNDECIDED, WITHIN, ratio_interval, trimmed_mean, verdict
from benchmarks.real_training import POSITIONS, SHAPES, STAGERS, VOCAB, Shape

SYNC_TARGET, ASYNC_TARGET, INTERFERENCE_TARGET = 0.10, 0.15, 0.30


@dataclass(frozen=True)
class Figure:
    """One row of the table: what it measures and how far studyctl may be from the real job."""

    key: str
    label: str
    target: float


def figures(device: str) -> list[Figure]:
    """The rows: each engine's sync save and cold restore, then each DCP async stager's three figures."""
    rows = [Figure("torch_save.sync", "torch.save, sync", SYNC_TARGET),
            Figure("torch_save.restore", "torch.load, cold restore", SYNC_TARGET),
            Figure("dcp.sync", "DCP save, sync", SYNC_TARGET),
            Figure("dcp.restore", "DCP load, cold restore", SYNC_TARGET)]
    for stager in STAGERS[device]:
        rows += [Figure(f"dcp.async.{stager}.blocked", f"DCP async ({stager}): blocking", ASYNC_TARGET),
                 Figure(f"dcp.async.{stager}.persist", f"DCP async ({stager}): persist", ASYNC_TARGET),
                 Figure(f"dcp.async.{stager}.lost", f"DCP async ({stager}): lost compute", INTERFERENCE_TARGET)]
    return rows


Samples = dict[str, list[float]]


def real_samples(record: dict[str, Any], device: str) -> Samples:
    """The real job's figures from its JSON (`real_training`), every repetition a sample."""
    out: Samples = {}
    for key in record.get("steps", []):
        value = record[key]
        name, _, _ = key.rpartition("_")
        if name == "torch_save":
            out.setdefault("torch_save.sync", []).append(value["s"])
        elif name == "torch_load":
            out.setdefault("torch_save.restore", []).append(value["s"])
        elif name == "dcp_save":
            out.setdefault("dcp.sync", []).append(value["s"])
        elif name == "dcp_load":
            out.setdefault("dcp.restore", []).append(value["s"])
        elif name.startswith("dcp_async_"):
            stager = name.removeprefix("dcp_async_")
            for figure, field in (("blocked", "blocked_s"), ("persist", "persist_s"), ("lost", "lost_compute_s")):
                out.setdefault(f"dcp.async.{stager}.{figure}", []).append(value[field])
    return out


def stager_of(checkpoint: dict[str, Any], device: str) -> str:
    """The STAGERS name of a point's async stager settings (the default when none is set)."""
    for name, options in STAGERS[device].items():
        if options and checkpoint.get("stager_shared") == options["use_shared_memory"] \
                and checkpoint.get("stager_async") == options["use_async_staging"] \
                and bool(checkpoint.get("pinned")) == options["use_pinned_memory"]:
            return name
    return "default"


def engine_figures(result: dict[str, Any]) -> dict[str, list[float]]:
    """A point's per-checkpoint figures: its engine section's calls where it has one (the save, load and async
    calls themselves, the slowest rank), else the checkpoint phases (`stream`); the interference from the
    strategy section either way. Keys: sync, restore, blocked, persist (from the async call's return to the files
    complete), lost."""
    engine = result.get("engine") or {}
    timings = (result.get("strategy") or {}).get("checkpoints", [])
    out: dict[str, list[float]] = {
        "lost": [c["interference_s"] for c in timings if c["phase"] == "write"]}
    if engine.get("checkpoints"):
        rows = engine["checkpoints"]
        writes = [c for c in rows if c["phase"] == "write"]
        out["restore"] = [c["engine_s"] for c in rows if c["phase"] == "read"]
        if any(c.get("blocked_s") is not None for c in writes):
            out["blocked"] = [c["blocked_s"] for c in writes]
            out["persist"] = [c["persist_s"] - c["blocked_s"] for c in writes]
        else:
            out["sync"] = [c["engine_s"] for c in writes]
        return out
    out["restore"] = [c["duration_max_s"] for c in result["checkpoints"] if c["phase"] == "read"]
    if result["point"]["checkpoint"]["strategy"] == "sync":
        out["sync"] = [c["duration_max_s"] for c in result["checkpoints"] if c["phase"] == "write"]
    else:
        out["blocked"] = [c["blocking_s"] for c in timings if c["phase"] == "write"]
        out["persist"] = [c["background_s"] for c in timings if c["phase"] == "write"]
    return out


def studyctl_samples(results: Iterable[dict[str, Any]], device: str) -> Samples:
    """studyctl's figures from its points' result files: every checkpoint and restore a sample."""
    out: Samples = {}
    for result in results:
        checkpoint = result["point"]["checkpoint"]
        engine, strategy = checkpoint.get("engine", "stream"), checkpoint["strategy"]
        got = engine_figures(result)
        if strategy == "sync":
            merge(out, {f"{engine}.sync": got["sync"], f"{engine}.restore": got["restore"]})
        elif engine == "dcp":
            base = f"dcp.async.{stager_of(checkpoint, device)}"
            merge(out, {f"{base}.{key}": got[key] for key in ("blocked", "persist", "lost")})
    return out


def result_files(study: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(study.glob("points/*/attempt-*/result.json"))]


def model_entry(shape: Shape) -> str:
    """The real model as a custom studyctl model (GPT-2's architecture keys come from its base)."""
    return (f"{{name: gpt2-{shape.n_layer}x{shape.n_embd}, base: gpt2-1.5b, num_layers: {shape.n_layer}, "
            f"hidden_size: {shape.n_embd}, ffn_hidden_size: {4 * shape.n_embd}, num_attention_heads: "
            f"{shape.n_head}, num_kv_heads: {shape.n_head}, vocab_size: {VOCAB}, position_embeddings: {POSITIONS}}}")


def step_entry(device: str, idle: dict[str, float]) -> str:
    """The simulated step standing for the real one's idle step (module docstring): on a GPU with the share of it
    the real job's host took to launch it, where measured."""
    compute_s = idle["median_s"]
    if device == "cuda":
        share = f", dispatch_share: {min(idle['host_share'], 1.0):.3f}" if "host_share" in idle else ""
        return f"{{compute: accelerator, compute_s: {compute_s:.4f}{share}, allreduce_mib: 0}}"
    return f"{{compute: cpu, compute_s: {compute_s:.4f}, allreduce_mib: 0}}"


def sweep_text(study: str, shape: Shape, device: str, data: Path, idle: dict[str, float], writes: int) -> str:
    """The studyctl side's sweep: torch_save and DCP sync; DCP async with each stager of STAGERS (one zip group:
    crossed, the stager settings would make sync points that are the same point)."""
    stagers = list(STAGERS[device].values())
    zipped: dict[str, list[Any]] = {"engine": ["torch_save", "dcp", *["dcp"] * len(stagers)],
              "strategy": ["sync", "sync", *["async"] * len(stagers)]}
    for option, key in (("stager_shared", "use_shared_memory"), ("stager_async", "use_async_staging"),
                        ("pinned", "use_pinned_memory")):
        zipped[option] = [False, False, *(bool(o.get(key, False)) for o in stagers)]
    found = shutil.which("mpiexec")  # the one on PATH (the GPU check puts mpich's wheel's first)
    mpiexec = f", mpiexec: {found}" if found else ""
    return f"""study: {study}
models: [{model_entry(shape)}]
matrix: {{zero_stage: 0, nodes: 1, ranks_per_node: 1, io_mode: buffered, device: {device}, state: torch}}
zip: [{json.dumps(zipped)}]
filesystems: {{disk: {{path: {data}, kind: local}}}}
checkpoint: {{writes: {writes}, reads: {writes}, scale: 1.0, buffer_mib: 64, block_mib: 16}}
ceilings: off
calibration: off
repetitions: 1
training: {{simulated_step: {step_entry(device, idle)}}}
local: {{max_concurrent: 1, timeout_s: 900{mpiexec}}}
"""


def run_studyctl(scratch: Path, name: str, shape: Shape, device: str, idle: dict[str, float], writes: int,
                 keep: Path | None = None, threads: int = 1) -> list[dict[str, Any]]:
    """One study of the real job's layout in a directory of its own (removed after); its points' results. The
    worker runs torch with the real job's intra-op `threads` (OMP_NUM_THREADS, passed on by mpiexec)."""
    from studyctl import api

    root = Path(tempfile.mkdtemp(prefix="engines-check-", dir=scratch))
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        (root / "data").mkdir()
        sweep = root / "sweep.yaml"
        sweep.write_text(sweep_text(name, shape, device, root / "data", idle, writes))
        api.submit(sweep, "local", results=root / "results")
        results = result_files(root / "results" / name)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for i, r in enumerate(results):
                (keep / f"{name}-result-{i}.json").write_text(json.dumps(r, indent=1))
        return results
    finally:
        if before is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = before
        shutil.rmtree(root, ignore_errors=True)


def run_real(scratch: Path, shape: str, out: Path, threads: int = 1, saves: int = 1) -> dict[str, Any]:
    """The real job in its own process (so its memory and threads are its own), its sequence of saves and
    restores `saves` times over (a job checkpoints again and again: its allocator and page cache warm as a studyctl
    point's do over its writes); its record."""
    d = Path(tempfile.mkdtemp(prefix="engines-real-", dir=scratch))
    try:
        proc = subprocess.run([sys.executable, "-m", "benchmarks.real_training", str(d), str(out), shape, str(saves),
                               str(threads)], capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"real_training failed: {proc.stderr[-2000:]}")
        record: dict[str, Any] = json.loads(out.read_text())
        return record
    finally:
        shutil.rmtree(d, ignore_errors=True)


def merge(into: Samples, more: Samples) -> None:
    for key, values in more.items():
        into.setdefault(key, []).extend(values)


def cell(values: list[float]) -> str:
    """Trimmed mean (min-max, n) of a figure's samples."""
    if not values:
        return "—"
    return f"{trimmed_mean(values):.3f} ({min(values):.3f}–{max(values):.3f}, {len(values)})"


def judged(real: list[float], ours: list[float], target: float) -> tuple[str, str, str]:
    """One figure's ratio with its interval, whether the estimate lies inside the target, and the verdict from the
    interval (`equivalence`: the two sides' processes are not paired); no interval from one sample a side."""
    if not real or not ours or trimmed_mean(real) == 0:
        return "—", "—", "—"
    if min(len(real), len(ours)) < 2:
        ratio = trimmed_mean(ours) / trimmed_mean(real)
        return f"{ratio:.2f}x (no interval: one sample)", _inside(ratio, target), "—"
    mid, low, high = ratio_interval(ours, real, paired=False)
    return f"{mid:.2f}x [{low:.2f}–{high:.2f}]", _inside(mid, target), verdict(low, high, target)


def _inside(ratio: float, target: float) -> str:
    return "yes" if abs(ratio - 1) <= target else "**no**"


def table(real: Samples, ours: Samples, device: str) -> list[str]:
    """The comparison as markdown lines: trimmed means, spreads, the ratio with its 95% interval, whether the
    estimate is inside the target and the verdict the interval gives; then a count of the verdicts."""
    lines = ["| figure | real job, s (trimmed mean, min-max, n) | studyctl, s (trimmed mean, min-max, n) | "
             "studyctl / real [95% interval] | target | estimate inside | verdict |", "|---|---|---|---|---|---|---|"]
    verdicts: list[str] = []
    for fig in figures(device):
        r, s = real.get(fig.key, []), ours.get(fig.key, [])
        ratio, inside, said = judged(r, s, fig.target)
        verdicts.append(said)
        lines.append(f"| {fig.label} | {cell(r)} | {cell(s)} | {ratio} | ±{fig.target:.0%} | {inside} | {said} |")
    counts = {name: verdicts.count(label) for name, label in
              (("within", WITHIN), ("outside", OUTSIDE), ("undecided", UNDECIDED))}
    lines.append(f"# verdicts from the intervals: {counts['within']} within, {counts['outside']} outside, "
                 f"{counts['undecided']} undecided of {len(verdicts)}")
    return lines


def state_line(record: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """The two sides' state: the real state dict's tensors and bytes against studyctl's checkpoint at
    `state: torch` (its tensors: the engine section's count; a framework pays per tensor as well as per byte)."""
    ours = {r["sizes"]["written_checkpoint_bytes"] for r in results}
    tensors = {int(r["engine"]["tensors_per_rank_max"]) for r in results if r.get("engine")}
    model = record["model"]
    return (f"real state: {model['params']:,} parameters, {model['tensors']} tensors, {model['state_bytes']:,} B "
            f"({model['bytes_per_param']:.3f} B/param); studyctl's checkpoint: {', '.join(f'{b:,}' for b in ours)} "
            f"B in {', '.join(str(t) for t in sorted(tensors)) or '?'} tensors")


def main(repeat: int = 2, shape: str = "cpu", out: Path | None = None, scratch: Path = Path("/var/tmp"),
         writes: int = 3) -> tuple[Samples, Samples]:
    """`repeat` alternating rounds of the real job and studyctl's study; prints the table (and writes it, the
    records and results under `out`)."""
    work = Path(tempfile.mkdtemp(prefix="engines-check-", dir=scratch))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if _has_cuda() else "cpu"
    real: Samples = {}
    ours: Samples = {}
    records: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    runs: dict[str, list[tuple[float, float]]] = {}  # side -> (wall s, CPU s) of each run, its processes'
    try:
        for r in range(repeat):
            order = ("real", "studyctl") if r % 2 == 0 else ("studyctl", "real")
            for side in order:
                wall, cpu = time.perf_counter(), children_cpu()
                if side == "real":
                    record = run_real(work, shape, (out or work) / f"real-{r}.json", saves=writes)
                    records.append(record)
                    merge(real, real_samples(record, device))
                else:
                    idle = (records[-1] if records else run_real(work, shape, work / "probe.json"))["step_idle"]
                    got = run_studyctl(work, f"engines-{r}", SHAPES[shape], device, idle, writes, out)
                    results += got
                    merge(ours, studyctl_samples(got, device))
                runs.setdefault(side, []).append((time.perf_counter() - wall, children_cpu() - cpu))
                print(f"# round {r + 1}/{repeat}: {side} done in {runs[side][-1][0]:.1f} s wall, "
                      f"{runs[side][-1][1]:.1f} s CPU (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(records, results, real, ours, device, out, runs)
    return real, ours


CALLS = ("torch_save", "torch_load", "dcp_save", "dcp_load")


def real_calls(records: list[dict[str, Any]], field: str) -> dict[str, list[float]]:
    """The real job's figure `field` (cpu_s, minflt) of each sync call, by call."""
    return {name: [r[k][field] for r in records for k in r.get("steps", [])
                   if k.rpartition("_")[0] == name and field in r[k]] for name in CALLS}


def studyctl_calls(results: list[dict[str, Any]], field: str) -> dict[str, list[float]]:
    """The same figure of studyctl's engine calls (the slowest rank's), named as the real job names its calls."""
    name = {("torch_save", "write"): "torch_save", ("torch_save", "read"): "torch_load",
            ("dcp", "write"): "dcp_save", ("dcp", "read"): "dcp_load"}
    key = {"cpu_s": "cpu_s", "minflt": "minor_faults"}[field]
    out: dict[str, list[float]] = {call: [] for call in CALLS}
    for result in results:
        engine = result.get("engine") or {}
        for row in engine.get("checkpoints", []):
            if row.get(key) is not None:
                out[name[engine["engine"], row["phase"]]].append(row[key])
    return out


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children: the real job's process, or the local
    backend's mpiexec and the worker it waited for."""
    t = os.times()
    return t.children_user + t.children_system


def report(records: list[dict[str, Any]], results: list[dict[str, Any]], real: Samples, ours: Samples,
           device: str, out: Path | None, runs: dict[str, list[tuple[float, float]]] | None = None) -> None:
    env = records[0]["env"] if records else {}
    idle = [r["step_idle"]["median_s"] for r in records]
    host = [r["step_idle"]["host_share"] for r in records if "host_share" in r["step_idle"]]
    lines = [f"# real job: torch {env.get('torch')}, {env.get('device_name')}, shape {env.get('shape')} "
             f"({env.get('n_layer')} layers x {env.get('n_embd')}, batch {env.get('batch')} x {env.get('seq')}), "
             f"{env.get('threads')} intra-op thread(s), {env.get('host_cores')} cores; idle step "
             f"{', '.join(f'{s:.3f}' for s in idle)} s (launched by the host at "
             f"{', '.join(f'{h:.2f}' for h in host)} of it); load {os.getloadavg()[0]:.1f}",
             f"# {page_reuse.memory_return()}"]
    if records and results:
        lines.append("# " + state_line(records[0], results))
    for field, what in (("cpu_s", "CPU s"), ("minflt", "minor page faults")):
        for side, got in (("real job", real_calls(records, field)), ("studyctl", studyctl_calls(results, field))):
            lines.append(f"# {side}, {what} per call (process, all threads; median): " + ", ".join(
                f"{name} {statistics.median(v):.3f}" if field == "cpu_s" else f"{name} {statistics.median(v):,.0f}"
                for name, v in got.items() if v))
    lines += [f"# {side} runs (whole process: start-up, training or simulated steps, every save and restore): "
              + ", ".join(f"{w:.1f} s wall / {c:.1f} s CPU" for w, c in got) for side, got in (runs or {}).items()]
    lines += table(real, ours, device)
    print("\n".join(lines))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "table.md").write_text("\n".join(lines) + "\n")
        (out / "samples.json").write_text(json.dumps({"real": real, "studyctl": ours}, indent=1))


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())

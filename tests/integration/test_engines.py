"""The checkpoint engines under real mpiexec ranks, real torch tensors and real files: every save restores to the
tensors it saved, the files are the framework's own (DLIO's names for torch.save, `.distcp` + `.metadata` for
DCP), and their bytes exceed the plan's by no more than the framework's framing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve()
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
# Framing per tensor: torch.save's zip entry (local header, central directory, 64-byte alignment, pickle) is
# ~320 B with our names; DCP writes each tensor as its own torch.save record (~1.5 KiB) and describes it in
# .metadata (~300 B). Measured on these runs; the bounds leave room for longer names.
TORCH_SAVE_PER_TENSOR = 512
DCP_PER_TENSOR = 2048
METADATA_PER_TENSOR = 1024
FIXED = 4096  # per file: the archive's own records (version, byteorder, data.pkl header)


def _run(tmp_path: Path, ranks: int, config: dict[str, Any]) -> list[dict[str, Any]]:
    config = {"root": str(tmp_path / "ckpt"), **config}
    (tmp_path / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out.json"
    proc = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, "-m", "tests.integration.engines_mpi",
                           str(tmp_path / "config.json"), str(out)], capture_output=True, text=True, timeout=600,
                          cwd=HERE.parents[2])  # as a module: this checkout's studyctl and worker
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def _check_restores(records: list[dict[str, Any]], saves: list[str], dcp: bool = False) -> None:
    """Every restore gives back what was saved; it read the rank's files (DCP: its records, and every rank
    the `.metadata` rank 0 wrote)."""
    for r in records:
        assert [s["how"] for s in r["saves"]] == saves
        for step, s in enumerate(r["saves"]):
            assert s["changed"], "the state did not change after the save: the restore would prove nothing"
            assert s["restored"], f"rank {r['rank']}: the {s['how']} restore differs from what was saved"
            metadata = dict(records[0]["saves"][step]["files"]).get(".metadata", 0) if dcp else 0
            own = sum(n for name, n in s["files"] if name != ".metadata")
            assert s["load"]["nbytes"] == (own + metadata if dcp else s["timing"]["nbytes"]) > 0
            if s["how"] == "async":
                t = s["timing"]
                assert 0 <= t["blocked_s"] <= t["staged_s"] <= t["done_s"]


def _on_disk(root: Path, steps: int) -> dict[int, dict[str, int]]:
    return {step: {p.name: p.stat().st_size for p in (root / f"step{step}").iterdir()} for step in range(steps)}


# (ranks, model, TP, PP, ZeRO, scale, options)
TORCH_SAVE = [
    (2, "gpt2-125m", 1, 1, 1, 0.01, {}),
    (4, "gpt2-125m", 2, 2, 1, 0.02, {"crc32": False, "fsync": False}),  # one file per layer, no CRC
    (2, "llama3-8b", 1, 1, 3, 0.001, {"pinned": True}),  # pinned asked on the host: plain host copies
]


@pytest.mark.parametrize(("ranks", "model", "tp", "pp", "zero", "scale", "options"), TORCH_SAVE)
def test_torch_save_round_trip(tmp_path: Path, ranks: int, model: str, tp: int, pp: int, zero: int, scale: float,
                               options: dict[str, Any]) -> None:
    saves = ["sync", "async"]
    records = _run(tmp_path, ranks, {"model": model, "tp": tp, "pp": pp, "zero": zero, "scale": scale,
                                     "saves": saves, "options": {"engine": "torch_save", **options}})
    _check_restores(records, saves)
    disk = _on_disk(tmp_path / "ckpt", len(saves))
    for step in range(len(saves)):
        assert sorted(disk[step]) == sorted(n for r in records for n in r["plan_files"]), "DLIO's names, no others"
    for r in records:
        for s in r["saves"]:
            assert [n for n, _ in s["files"]] == r["plan_files"]
            extra = s["timing"]["nbytes"] - r["plan_bytes"]
            assert 0 < extra <= FIXED * len(r["plan_files"]) + TORCH_SAVE_PER_TENSOR * r["plan_tensors"]


# (ranks, ZeRO, scale, saves, options)
DCP = [
    (2, 1, 0.01, ["sync", "async"], {"dcp_threads": 2}),
    (2, 1, 0.01, ["async", "sync"], {"stager_async": True, "stager_shared": True, "fsync": False}),
    (3, 3, 0.003, ["async", "async"], {"dcp_executor": "process", "pinned": True}),
]


@pytest.mark.parametrize(("ranks", "zero", "scale", "saves", "options"), DCP)
def test_dcp_round_trip(tmp_path: Path, ranks: int, zero: int, scale: float, saves: list[str],
                        options: dict[str, Any]) -> None:
    records = _run(tmp_path, ranks, {"model": "gpt2-125m", "tp": 1, "pp": 1, "zero": zero, "scale": scale,
                                     "saves": saves, "options": {"engine": "dcp", **options}})
    _check_restores(records, saves, dcp=True)
    disk = _on_disk(tmp_path / "ckpt", len(saves))
    threads = options.get("dcp_threads", 1)
    tensors = sum(r["plan_tensors"] for r in records)
    for step in range(len(saves)):
        assert sorted(disk[step]) == sorted(n for r in records for n, _ in r["saves"][step]["files"])
        for r in records:
            names = [n for n, _ in r["saves"][step]["files"]]
            distcp = [n for n in names if re.fullmatch(rf"__{r['rank']}_\d+\.distcp", n)]
            assert len(distcp) == threads
            assert names == distcp + ([".metadata"] if r["rank"] == 0 else [])
            sizes = dict(r["saves"][step]["files"])
            extra = sum(sizes[n] for n in distcp) - r["plan_bytes"]
            assert 0 < extra <= FIXED * threads + DCP_PER_TENSOR * r["plan_tensors"]
        assert 0 < disk[step][".metadata"] <= FIXED + METADATA_PER_TENSOR * tensors

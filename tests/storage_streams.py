"""Checks every `worker.storage` implementation must pass with real bytes: the engines' streams (a torch.save
into `open_write` and a torch.load from `open_read`, a failed write leaving nothing, seeks), `list_step`, and a
file written from the cycling buffer read back whole. Used by the POSIX tests (real files) and the S3 tests (the
project's server)."""

from __future__ import annotations

import os

import pytest

from studyctl.definition.checkpoint.layout import CheckpointFile
from worker import io
from worker.storage import Storage

MIB = 1 << 20
STEP = "global_step1"


def state(mib: int) -> dict[str, object]:
    """A small model-and-optimizer-like state: tensors of the dtypes a checkpoint holds, `mib` MiB or so."""
    import torch

    n = mib * MIB // 10  # 2 + 4 + 4 bytes per parameter
    gen = torch.Generator().manual_seed(7)
    return {"model": {"w": torch.randn(n, generator=gen).to(torch.bfloat16)},
            "optimizer": {"m": torch.randn(n, generator=gen), "v": torch.rand(n, generator=gen)},
            "step": 12}


def torch_round_trip(storage: Storage, name: str, mib: int) -> int:
    """torch.save into the write stream, torch.load from the read stream: equal tensors; returns the file's size."""
    import torch

    saved = state(mib)
    storage.prepare_step(STEP)
    with storage.open_write(STEP, name) as out:
        torch.save(saved, out)
    with storage.open_read(STEP, name) as back:
        loaded = torch.load(back, weights_only=True)
    assert loaded["step"] == 12
    for group in ("model", "optimizer"):
        for key, tensor in saved[group].items():  # type: ignore[attr-defined]
            assert torch.equal(loaded[group][key], tensor), (group, key)
    sizes = dict(storage.list_step(STEP))
    return sizes[name]


def raw_round_trip(storage: Storage, name: str, nbytes: int) -> None:
    """Bytes through the streams unchanged, read back in pieces after seeks (the reader torch.load needs)."""
    data = os.urandom(nbytes)
    storage.prepare_step(STEP)
    with storage.open_write(STEP, name) as out:
        for off in range(0, nbytes, 3 * MIB + 1):  # writes that straddle every part and buffer boundary
            out.write(data[off:off + 3 * MIB + 1])
    with storage.open_read(STEP, name) as back:
        assert back.read() == data
        back.seek(nbytes // 2)
        assert back.read(1000) == data[nbytes // 2:nbytes // 2 + 1000]
        back.seek(-10, os.SEEK_END)
        assert back.read() == data[-10:]
    assert (name, nbytes) in storage.list_step(STEP)


def failed_write_leaves_nothing(storage: Storage, name: str, nbytes: int) -> None:
    """A serialiser that raises halfway through: no file or object of that name afterwards."""
    storage.prepare_step(STEP)
    with pytest.raises(RuntimeError, match="serialiser failed"), storage.open_write(STEP, name) as out:
        out.write(os.urandom(nbytes))
        raise RuntimeError("serialiser failed")
    assert name not in dict(storage.list_step(STEP))


def buffer_file_round_trip(storage: Storage, nbytes: int) -> None:
    """A file written from the cycling buffer (the stream engine's path) is read back whole, the same size the
    engines' listing reports."""
    buf = io.Buffer.allocate(16 * MIB)  # at least a part (S3 parts are cut from it)
    try:
        f = CheckpointFile(name="layer_01-model_00-model_states.pt", kind="model", nbytes=nbytes)
        storage.prepare_step(STEP)
        storage.write_file(STEP, f, buf, io.Split())
        assert storage.read_file(STEP, f, buf, io.Split()) == nbytes
        assert (f.name, nbytes) in storage.list_step(STEP)
    finally:
        buf.close()

"""What an engine point refuses before it writes anything, and how it reads the point's options."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from studyctl.definition.checkpoint.engine_tensors import file_tensors
from studyctl.definition.checkpoint.layout import Parallelism
from studyctl.definition.checkpoint.points import CheckpointOptions
from studyctl.definition.inputs.catalog import CATALOG
from worker.engines import EngineConfigError, EngineOptions, make_engine


def _plan() -> list:
    return file_tensors(CATALOG["gpt2-125m"], Parallelism(1, 1, 1, 1), 0, 0.001)


@pytest.mark.parametrize("engine", ["torch_save", "dcp"])
def test_cuda_where_there_is_none_is_one_line_and_nothing_written(tmp_path: Path, engine: str) -> None:
    opts = EngineOptions(engine=engine, device="cuda")
    if torch.cuda.is_available():  # a GPU machine: the device is granted (the GPU check exercises it)
        assert make_engine(opts, _plan(), lambda step: tmp_path / str(step), None).state.device.type == "cuda"
        return
    with pytest.raises(EngineConfigError) as caught:  # refused before any process group or tensor: comm unused
        make_engine(opts, _plan(), lambda step: tmp_path / str(step), None)
    assert "checkpoint.device cuda" in str(caught.value) and "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_engine_is_named() -> None:
    with pytest.raises(EngineConfigError, match=re.escape("checkpoint.engine 'stream': not one of torch_save, dcp")):
        make_engine(EngineOptions(engine="stream"), _plan(), lambda step: Path(str(step)), None)


def test_options_come_from_the_point_with_the_engine_defaults_for_what_it_lacks() -> None:
    opts = EngineOptions.of(CheckpointOptions(fsync=False))
    assert opts.fsync is False
    assert opts.crc32 is True and opts.dcp_threads == 1 and opts.dcp_executor == "thread"

"""The torch_save engine's restore does with each file what the framework's load_state_dict does: a model file is
copied into the allocated parameters; an optimizer file is copied into flat fp32 partitions (`state: megatron`)
or kept as torch.load made it (`state: torch`, as torch.optim's Optimizer.load_state_dict keeps it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from studyctl.definition.checkpoint.engine_tensors import file_tensors
from studyctl.definition.checkpoint.layout import Convention, Parallelism
from studyctl.definition.inputs.catalog import CATALOG
from worker.engines import EngineOptions, make_engine


class _OneRank:
    def Get_rank(self) -> int:  # mpi4py's name
        return 0


@pytest.mark.parametrize("state", ["megatron", "torch"])
def test_restore_copies_or_keeps_each_file_as_the_framework_does(tmp_path: Path, state: str) -> None:
    plan = file_tensors(CATALOG["gpt2-125m"], Parallelism(1, 1, 1, 0), 0, 0.001, conv=Convention(state))
    engine = make_engine(EngineOptions(engine="torch_save", state=state), plan, lambda step: tmp_path / f"s{step}",
                         _OneRank())
    engine.allocate()
    live = engine.state
    engine.save(0)  # stamps the state with the checkpoint's tag, then saves it
    saved = live.digest()
    storage = {name: {k: t.untyped_storage().data_ptr() for k, t in named.items()} for name, named in
               live.files.items()}
    live.stamp(777)  # training moved on
    assert live.digest() != saved
    engine.load(0)
    assert live.digest() == saved  # every tensor holds the checkpoint again, copied or kept
    kinds = {f.file.name: f.file.kind for f in plan}
    assert "model" in kinds.values() and set(kinds.values()) - {"model"}
    for name, named in live.files.items():
        same = {k: t.untyped_storage().data_ptr() == storage[name][k] for k, t in named.items()}
        copied = kinds[name] == "model" or state == "megatron"
        assert all(same.values()) if copied else not any(same.values()), (name, kinds[name], state)
    engine.close()

"""A checkpoint's engine options: how its bytes reach storage (the framework's path or raw bytes), where its
tensors live, what they hold per parameter, and who writes what replicas share. `CheckpointOptions` takes them as
its own; each is a sweep axis, left out of a point's identity at its default."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from studyctl.definition.checkpoint.layout import Convention
from studyctl.definition.inputs.point_id import later
from studyctl.definition.inputs.vocabulary import DcpExecutor, Engine, ReplicatedWriter, StateConvention, StateDevice

__all__ = ["DcpExecutor", "Engine", "EngineOptions", "ReplicatedWriter", "StateConvention", "StateDevice"]

class EngineOptions(BaseModel):
    """The engine, its settings, and the state convention and replicated writer every engine follows."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: Engine = later("stream",
                           description="stream: raw bytes from one reused buffer, the storage's own cost; torch_save: "
                                       "each file one torch.save of real tensors (DeepSpeed's engine, DLIO's "
                                       "pt_save); dcp: torch.distributed.checkpoint over the point's ranks "
                                       "(FSDP2, torchtitan, Megatron torch_dist): what a training framework pays")
    device: StateDevice = later("cpu",
                                description="engines: where a rank's tensors live; cuda: its local GPU, so "
                                            "device-to-host copies are real (refused where no GPU is)")
    state: StateConvention = later("megatron",
                                   description="megatron: 14 B/param (bf16 weights + fp32 master, Adam m, v: "
                                               "Megatron, DeepSpeed ZeRO-1/2, DLIO); torch: 12 B/param (fp32 "
                                               "weights + Adam m, v: PyTorch AMP, FSDP2, DeepSpeed ZeRO-3)")
    replicated_writer: ReplicatedWriter = later(
        "dp0", description="dp0: data-parallel replica 0 writes the states replicas share (DLIO, DeepSpeed); spread: "
                           "each shared file cut evenly over the DP ranks (Megatron's fully parallel save)")
    crc32: bool = later(True,
                        description="torch_save: torch.save's CRC-32 of each record (false: faster, unchecked)")
    pinned: bool = later(False,
                         description="torch_save: pinned host memory for the device-to-host copy; dcp async: the "
                                     "stager pins its host copy")
    dcp_threads: int = later(1, ge=1, le=64,
                             description="dcp: writer threads per rank (FileSystemWriter thread_count; a "
                                         "`.distcp` file each)")
    stager_shared: bool = later(False,
                                description="dcp async: the stager's host copy in shared memory")
    stager_async: bool = later(False,
                               description="dcp async: the stager copies in the background (training resumes "
                                           "before staging ends)")
    dcp_executor: DcpExecutor = later("thread",
                                      description="dcp async: async_save's executor, a thread or a process")

    @model_validator(mode="after")
    def _engine_consistent(self) -> EngineOptions:
        if self.device != "cpu" and self.engine == "stream":
            raise ValueError(f"device {self.device} needs an engine (torch_save or dcp): stream writes raw bytes "
                             "from host memory")
        return self

    @property
    def convention(self) -> Convention:
        """The state convention and replicated writer, as the layout takes them."""
        return Convention(self.state, self.replicated_writer)


# Engine settings by the engine they set: (always, with strategy async only: async_save's stager and executor).
# Every other engine setting goes back to its default on a point (`for_strategy`); `state` and
# `replicated_writer` apply to every engine, stream included.
ENGINE_SETTINGS: dict[Engine, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "stream": ((), ()),
    "torch_save": (("device", "crc32", "pinned"), ()),
    "dcp": (("device", "dcp_threads"), ("pinned", "stager_shared", "stager_async", "dcp_executor")),
}
ENGINE_OPTION_DEFAULTS = {name: EngineOptions.model_fields[name].default
                          for name in dict.fromkeys(n for always, background in ENGINE_SETTINGS.values()
                                                    for n in (*always, *background))}


def engine_options(engine: Engine, strategy: str) -> frozenset[str]:
    """The engine settings that change what a point of this engine and strategy does."""
    always, background = ENGINE_SETTINGS[engine]
    return frozenset((*always, *background) if strategy == "async" else always)

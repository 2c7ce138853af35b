"""How `worker.run` asks for a strategy's and a restore mode's part of each phase, in one object.

For `sync` writes and `rank`/`full` restores without a tier the run's own phases stand (`write_work` and
`read_work` return None); strategy fields are then derived from the phase timing itself. An engine point
(`worker.engine_point`) restores through its engine in every mode, so it has no `Restorer`; its strategy
writes through the engine.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from studyctl.definition.checkpoint.layout import CheckpointFile
from studyctl.definition.checkpoint.points import WorkerTask
from studyctl.definition.checkpoint.restore_rules import restore_rule
from studyctl.definition.result.result_fields import StrategyInfo, StrategyTiming
from studyctl.definition.result.result_schema import CheckpointTiming
from studyctl.removal import remove_place
from studyctl.states import FailureClass
from worker import io, stop
from worker.interference import write_timing
from worker.nodes import NodeMap, node_map, tier_place
from worker.restore import Restorer, read_timing, replace_nodes
from worker.strategies import Describe, WriteStrategy

if TYPE_CHECKING:
    from worker.engine_point import EnginePoint
    from worker.storage import Storage

Work = Callable[[Any], None]


@dataclass
class Checkpointing:
    task: WorkerTask
    nodes: NodeMap
    writer: WriteStrategy | None
    restorer: Restorer | None
    engine: EnginePoint | None = None
    timings: list[StrategyTiming] = field(default_factory=list)

    @classmethod
    def create(cls, task: WorkerTask, comm: Any, buf: io.Buffer, io_mode: str, cold_read: str, point_dir: Path,
               reads: list[CheckpointFile], describe: Describe, wtime: Callable[[], float],
               storage: Storage, engine: EnginePoint | None = None) -> tuple[Checkpointing, tuple[str, str] | None]:
        """Collective: every rank gets the same problem (or None) back. `storage`: the shared target (files or
        objects), which the strategies write and the restorer reads through; `engine`: an engine point's."""
        opts = task.point.checkpoint
        nodes = node_map(comm, task.point.ranks_per_node)
        writer = None
        if opts.strategy != "sync":
            if opts.strategy == "tiered" and not task.tier_path:
                return cls(task, nodes, None, None, engine), (FailureClass.CONFIG.value,
                                                              "strategy tiered but the task names no tier path")
            writer = WriteStrategy(task, comm, nodes, buf, io_mode, describe, wtime, point_dir, storage, engine)
            problem = writer.setup()
            if problem:
                return cls(task, nodes, writer, None, engine), problem
        restorer = None
        wants = restore_rule(opts.restore).broadcasts or (writer is not None and writer.tier_dir is not None)
        if opts.reads and wants and engine is None:
            tier_dir = writer.tier_dir if writer is not None else None
            restorer = Restorer(task.point, comm, reads, buf, cold_read, storage, tier_dir,
                                writer is not None and writer.tier_mode != "buffered", describe, wtime)
        return cls(task, nodes, writer, restorer, engine), None

    def tier_target(self) -> Any:
        """An engine point's node-local tier (None where the point has none)."""
        return self.writer.tier_target if self.writer is not None else None

    def write_prepare(self, step: str, tag: int) -> None:
        if self.writer is not None:
            self.writer.prepare(step, tag)

    def write_work(self, index: int, step: str) -> Work | None:
        writer = self.writer
        return None if writer is None else lambda ph: writer.work(ph, index, step)

    def record_write(self, index: int, timing: CheckpointTiming, extras: list[Any]) -> None:
        if self.writer is None:
            self.timings.append(StrategyTiming(phase="write", index=index, blocking_s=timing.duration_max_s))
            return
        self.timings.append(write_timing(index, extras))
        self.writer.after(index)

    def before_reads(self, comm: Any) -> None:
        """Off the clock: nodes 'replaced after a failure' lose their tier before the first restore."""
        if self.restorer is not None:
            self.restorer.replace_nodes(self.nodes, self.task.point.checkpoint.replaced_nodes)
        elif self.writer is not None:  # an engine point's restores read the tier through the engine
            replace_nodes(self.writer.tier_dir, self.nodes, self.task.point.checkpoint.replaced_nodes)
        comm.Barrier()

    def read_prepare(self, step: str) -> None:
        if self.restorer is not None:
            self.restorer.prepare(step)

    def read_sample(self, step: str) -> tuple[int, int] | None:
        return self.restorer.resident(step) if self.restorer is not None else None

    def read_work(self, step: str) -> Work | None:
        restorer = self.restorer
        return None if restorer is None else lambda ph: restorer.work(ph, step)

    def record_read(self, index: int, timing: CheckpointTiming, extras: list[Any]) -> None:
        if self.engine is not None:
            self.timings.append(read_timing(index, extras))
        elif self.restorer is None:
            self.timings.append(StrategyTiming(phase="read", index=index, shared_bytes=timing.bytes,
                                               read_s=timing.duration_max_s))
        else:
            self.timings.append(read_timing(index, extras))

    def info(self, idle_steps: list[float], bytes_per_rank_max: int) -> StrategyInfo:
        opts = self.task.point.checkpoint
        writer = self.writer
        tiered = opts.strategy == "tiered"
        return StrategyInfo(
            strategy=opts.strategy, restore_mode=opts.restore, step_s=opts.step_s,
            compute_step_s_idle=statistics.fmean(idle_steps) if writer is not None and idle_steps else None,
            snapshot_bytes_per_rank_max=bytes_per_rank_max if opts.strategy == "async" else 0,
            tier_path=self.task.tier_path if tiered else None, tier_io_mode=writer.tier_mode if writer else None,
            tier_fstype=writer.tier_fstype if writer else None,
            drain=opts.drain if tiered else None, tier_keep=opts.tier_keep if tiered else None,
            replaced_nodes=opts.replaced_nodes if tiered else 0, checkpoints=self.timings)

    def idle_step_s(self) -> float:
        return self.writer.trainer.baseline_s if self.writer is not None else 0.0

    def background_threads(self) -> int:
        return self.writer.background_threads if self.writer is not None else 0

    def close(self, keep: bool) -> None:
        """Free memory (an engine's tensors, its process group); node leaders remove their node's tier directory
        of this point unless kept."""
        if self.engine is not None:
            engine, self.engine = self.engine, None
            engine.close()
        if self.writer is None:
            return
        self.writer.close()
        stop.disown()  # from here the worker removes (or keeps) its tier itself
        if self.writer.tier_dir is not None and not keep and self.nodes.leader:
            remove_place(tier_place(self.task, self.nodes.name))  # <tier>/<study>.<key>/<point>: every node's

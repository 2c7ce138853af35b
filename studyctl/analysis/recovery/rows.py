"""One recovery result → one plain row: the restart's phases, beside the point's own same-shape restore.

Built with the other rows of a result when it is parsed (cached as plain JSON). Seconds are the whole job's
(`definition.result.result_fields.RecoveryTiming`); bytes per rank are what each new rank restored.
"""

from __future__ import annotations

import math
from typing import Any

from studyctl.definition.result.result_schema import Result

PHASES = ("launch_s", "setup_s", "restore_s", "read_s", "broadcast_s", "ready_s", "time_to_first_step_s", "prepare_s")
LAYOUT = ("old_world_size", "old_tensor_parallel", "old_pipeline_parallel", "old_data_parallel", "new_world_size",
          "new_tensor_parallel", "new_pipeline_parallel", "new_data_parallel", "lost_nodes")


def recovery_row(r: Result, base: dict[str, Any]) -> dict[str, Any] | None:
    """The point's settings (`base`), the restart's layout and phases, and its own restores' mean span."""
    x = r.recovery
    if x is None:
        return None
    per_rank = x.bytes_restored_per_rank or [0]
    own = [c.span_s for c in r.checkpoints if c.phase == "read"]
    return {**base, "repetition": r.point.repetition, "scenario": x.scenario, "launcher": x.launcher,
            "shared_clock": x.shared_clock, "simulated_nodes": r.provenance.simulated_nodes, "step_dir": x.step_dir,
            **{k: getattr(x, k) for k in (*LAYOUT, *PHASES)}, "step_s": x.step_s,
            "bytes_read": x.bytes_read, "tier_bytes": x.tier_bytes, "broadcast_bytes": x.broadcast_bytes,
            "bytes_per_rank_max": max(per_rank), "bytes_per_rank_mean": math.fsum(per_rank) / len(per_rank),
            "files_opened": x.files_opened, "files_per_rank_max": max(x.files_opened_per_rank or [0]),
            "same_shape_restore_s": math.fsum(own) / len(own) if own else None}

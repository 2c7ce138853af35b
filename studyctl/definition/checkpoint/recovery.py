"""Recovery after a failure: the `recovery:` axis, and what a restart of a point looks like.

A recovery point writes its checkpoints in its own layout, then a NEW launch of the restart world (a new
`mpiexec` locally, a new job step under Slurm) restores the last checkpoint its restores read and runs one
simulated training step. Scenarios, as written in a sweep:
- `same`: the job restarts in the same shape (every file from shared storage, as after a full restart);
- `{lost_nodes: N}`: the same shape, N nodes replaced (their node-local tier is gone: tiered points only);
- `{shrink_to: RANKS}` / `{grow_to: RANKS}`: the restart's world size in ranks, at most MAX_RANKS (2^20; not
  nodes; ranks_per_node is kept, so its nodes = RANKS / ranks_per_node), with `tensor_parallel` /
  `pipeline_parallel` when they change too. ZeRO stage is kept. Each new rank reads exactly its byte ranges of
  the old files (the reshard map, `definition.checkpoint.reshard`).
`none` (the default) is a point without a restart. Impossible restarts are infeasible points at plan time, with
the reason (`recovery_problems`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from studyctl.definition.checkpoint.layout import Parallelism, step_dir_name
from studyctl.definition.inputs.catalog import ModelSpec
from studyctl.definition.inputs.training import SimulatedStep
from studyctl.definition.inputs.worlds import over_max_ranks

Scenario = Literal["same", "lost_nodes", "shrink", "grow"]
# The sweep's keys of a scenario given as a mapping, and the scenario each names.
SCENARIO_KEYS: dict[str, Scenario] = {"lost_nodes": "lost_nodes", "shrink_to": "shrink", "grow_to": "grow"}
LAYOUT_KEYS = ("tensor_parallel", "pipeline_parallel")
ALLOWED = ("none, same, {lost_nodes: N}, {shrink_to: RANKS}, {grow_to: RANKS} "
           "(shrink_to/grow_to may add tensor_parallel, pipeline_parallel)")


class Recovery(BaseModel):
    """A restart after a failure; `world_size` None: the point's own (same, lost_nodes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: Scenario
    world_size: int | None = Field(None, ge=1)
    tensor_parallel: int | None = Field(None, ge=1)
    pipeline_parallel: int | None = Field(None, ge=1)
    lost_nodes: int = Field(0, ge=0)
    # The first training step after the restore (the sweep's training.simulated_step): part of what is measured.
    step: SimulatedStep = SimulatedStep()

    def label(self) -> str:
        """How tables, plots and the report name the scenario, in the sweep's own words."""
        if self.scenario == "same":
            return "same"
        if self.scenario == "lost_nodes":
            return f"lost_nodes {self.lost_nodes}"
        key = "shrink_to" if self.scenario == "shrink" else "grow_to"
        extra = "".join(f", {k} {getattr(self, k)}" for k in LAYOUT_KEYS if getattr(self, k) is not None)
        return f"{key} {self.world_size}{extra}"


def parse_recovery(value: Any) -> Recovery | None:
    """The sweep's form → a Recovery (None for `none`); ValueError naming the allowed forms."""
    if isinstance(value, Recovery) or value is None:
        return value
    if isinstance(value, str) and value.strip().lower() in ("none", "same"):
        return None if value.strip().lower() == "none" else Recovery(scenario="same")
    if not isinstance(value, dict):
        raise ValueError(f"{value!r} is not a recovery scenario; allowed: {ALLOWED}")
    named = [k for k in value if k in SCENARIO_KEYS]
    unknown = [k for k in value if k not in SCENARIO_KEYS and k not in LAYOUT_KEYS]
    if len(named) != 1 or unknown:
        raise ValueError(f"{value!r}: give exactly one of {', '.join(SCENARIO_KEYS)}; allowed: {ALLOWED}")
    key = named[0]
    count = value[key]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"{key}: {count!r} is not a whole number ≥ 1")
    if key != "lost_nodes" and over_max_ranks(count):
        raise ValueError(f"{key}: {over_max_ranks(count)}")
    layout = {k: value[k] for k in LAYOUT_KEYS if k in value}
    if key == "lost_nodes":
        if layout:
            raise ValueError(f"{value!r}: lost_nodes restarts in the same layout; a layout change needs "
                             "shrink_to or grow_to")
        return Recovery(scenario="lost_nodes", lost_nodes=count)
    for k, v in layout.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{k}: {v!r} is not a whole number ≥ 1")
        if over_max_ranks(v):
            raise ValueError(f"{k}: {over_max_ranks(v)}")
    return Recovery(scenario=SCENARIO_KEYS[key], world_size=count, **layout)


def restart_world(world_size: int, recovery: Recovery) -> int:
    """Ranks of the restart world."""
    return recovery.world_size or world_size


def restart_layout(model: ModelSpec, old: Parallelism, recovery: Recovery) -> Parallelism:
    """The restart's parallel layout; raises reshard's ReshardError (a ValueError) with the reason."""
    if recovery.scenario in ("same", "lost_nodes"):
        return old
    from studyctl.definition.checkpoint.reshard import restart_parallelism

    return restart_parallelism(old, restart_world(old.ranks, recovery), recovery.tensor_parallel,
                               recovery.pipeline_parallel, model=model)


def restart_step(writes: int, reads: int) -> int:
    """The checkpoint the restart restores: the last one the point's own restores read (still on disk)."""
    return max(0, min(writes, reads) - 1)


def restart_step_dir(writes: int, reads: int, naming: Any) -> str:
    return step_dir_name(restart_step(writes, reads), naming)


def recovery_problems(recovery: Recovery, model: ModelSpec, old: Parallelism, nodes: int, ranks_per_node: int, *,
                      tiered: bool, writes: int, reads: int, subset: bool) -> list[str]:
    """Why this restart cannot happen (empty: it can), each reason one line naming the key."""
    world = nodes * ranks_per_node
    problems = []
    if writes < 1 or reads < 1:
        problems.append("recovery needs checkpoint.writes ≥ 1 and checkpoint.reads ≥ 1 (the restart restores the "
                        "last checkpoint the point's restores read)")
    if subset:
        problems.append("recovery: a subset-mode point (checkpoint.subset_world_size) has no whole checkpoint to "
                        "restart from")
    new = recovery.world_size
    if recovery.scenario == "lost_nodes":
        if not tiered:
            problems.append(f"recovery lost_nodes {recovery.lost_nodes}: needs strategy tiered (a node-local tier "
                            "to lose); without one a restart reads shared storage as in `same`")
        if not 1 <= recovery.lost_nodes <= nodes:
            problems.append(f"recovery lost_nodes {recovery.lost_nodes}: allowed 1 to the point's {nodes} nodes")
    elif new is not None:
        key = "shrink_to" if recovery.scenario == "shrink" else "grow_to"
        if (recovery.scenario == "shrink") != (new < world) or new == world:
            side = "fewer" if recovery.scenario == "shrink" else "more"
            problems.append(f"recovery {key} {new}: must be {side} ranks than the point's {world}")
        if new % ranks_per_node:
            problems.append(f"recovery {key} {new}: not a whole number of nodes of {ranks_per_node} ranks "
                            "(ranks_per_node is kept)")
    if not problems:
        try:
            restart_layout(model, old, recovery)
        except ValueError as exc:
            problems.append(f"recovery {recovery.label()}: {exc}")
    return problems


def allocation_nodes(nodes: int, ranks_per_node: int, recovery: Recovery | None) -> int:
    """Nodes a recovery point holds: the larger of the writing and the restart world."""
    if recovery is None:
        return nodes
    return max(nodes, -(-restart_world(nodes * ranks_per_node, recovery) // ranks_per_node))


def before_restart_path(path: str) -> str:
    """The writing world's copy of a recovery point's task, or where it leaves its result until the restart adds
    its timing: the same name with `.before-restart` before `.json`."""
    return path.removesuffix(".json") + ".before-restart.json"


# The launcher's wall clock (time.time()) just before it starts the restart world: the restart's launch runs from it.
LAUNCH_T0_ENV = "STUDYCTL_LAUNCH_T0"

"""Where the point's plan fixes or bounds a figure, a result that disagrees is unusable, even with figures well
inside their units' bounds: the restart's world, the bytes it reads, an object store's request counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from studyctl.definition.checkpoint.recovery import parse_recovery
from studyctl.definition.result.plausibility import implausible
from studyctl.definition.result.result_schema import Result
from tests.resultgen import make_point, recovery_timing, result_dict


def _restart() -> dict[str, Any]:
    p = make_point(writes=1, reads=1).model_copy(update={"recovery": parse_recovery({"shrink_to": 1})})
    data = result_dict(p, [2.0], [3.0])
    data["recovery"] = recovery_timing(p, 0.5, 1.0, 0.3)
    for c in data["checkpoints"]:
        for r in c["ranks"]:
            r["requests"] = {"put": r["files"], "part": 0, "get": 0, "head": 0, "list": 0, "delete": 0,
                             "retries": 0, "throttled": 0}
    return data


def test_the_generated_restart_is_plausible() -> None:
    assert implausible(Result.model_validate(_restart())) is None


def _set(section: str, **values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d[section].update(values)


def _rank0(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["checkpoints"][0]["ranks"][0]["requests"].update(values)


@pytest.mark.parametrize(("change", "field"), [
    (_set("recovery", new_world_size=2), "recovery.new_world_size"),  # the plan restarts on 1 rank
    (_set("recovery", old_data_parallel=4), "recovery.old_data_parallel"),
    (_set("recovery", bytes_read=3 << 30), "recovery.bytes_read"),  # 3 GiB: plausible bytes, not this restore's
    (_set("recovery", files_opened=999), "recovery.files_opened"),
    (_set("recovery", time_to_first_step_s=100.0), "recovery.time_to_first_step_s"),
    (_set("recovery", broadcast_s=50.0), "recovery.broadcast_s"),  # longer than the restore it is part of
    (_set("recovery", lost_nodes=1), "recovery.lost_nodes"),
    (_rank0(put=10_000), "checkpoints.0.ranks.0.requests.put"),  # a few objects of a few MiB: not 10,000 PUTs
    (_rank0(get=1 << 30), "checkpoints.0.ranks.0.requests.get"),
    (_rank0(retries=10 ** 9), "checkpoints.0.ranks.0.requests.retries"),
    (_set("io", buffer_bytes=1 << 20), "io.buffer_bytes"),
    (_set("filesystem", free_bytes_after=1 << 50), "filesystem.free_bytes_after"),  # more free than the total
    (_set("sizes", read_bytes_per_restore=1), "sizes.read_bytes_per_restore"),
])
def test_a_figure_the_plan_fixes_or_bounds_is_named(change: Callable[[dict[str, Any]], None], field: str) -> None:
    data = _restart()
    change(data)
    assert field in (implausible(Result.model_validate(data)) or "")


def test_a_section_the_point_has_no_use_for_is_refused() -> None:
    data = result_dict(make_point(), [2.0], [3.0])
    data["recovery"] = _restart()["recovery"]
    assert "recovery: present" in (implausible(Result.model_validate(data)) or "")


def _ceiling(tmp_path: Any, streamed: int | None = None) -> dict[str, Any]:
    import json

    from tests.resultgen import write_ceiling

    ceiling = write_ceiling(tmp_path, make_point(), 2.0, 3.0, streamed)
    return json.loads((tmp_path / "points" / ceiling.point_id / "attempt-1" / "result.json").read_text())


def test_a_ceilings_rounds_are_those_its_figures_are_the_medians_of(tmp_path: Any) -> None:
    data = _ceiling(tmp_path)
    data["ceilings"]["rounds"] = {"storage_write_GiBps": [1.8, 2.0, 2.5], "memcpy_GiBps_per_rank": [8.0] * 3}
    assert implausible(Result.model_validate(data)) is None
    data["ceilings"]["rounds"]["storage_write_GiBps"] = [1.0, 1.1, 1.2]  # their median is not the figure
    assert "ceilings.rounds.storage_write_GiBps" in (implausible(Result.model_validate(data)) or "")
    data["ceilings"]["rounds"] = {"shape": [2.0]}  # no rate of the ceiling's
    assert "ceilings.rounds.shape" in (implausible(Result.model_validate(data)) or "")


def test_a_probe_streams_at_most_its_shard(tmp_path: Any) -> None:
    """A time-bounded probe may stop short of the shard; never past it."""
    from studyctl.definition.planning.ceilings import probe_bytes

    shard = probe_bytes(make_point())[0]
    assert implausible(Result.model_validate(_ceiling(tmp_path / "short", shard // 2))) is None
    assert "checkpoints.0.bytes" in (implausible(Result.model_validate(_ceiling(tmp_path / "long", shard + 4096)))
                                     or "")


def _rank(i: int, **values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["checkpoints"][0]["ranks"][i].update(values)


def _both(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    return lambda d: [change(d) for change in changes] and None


@pytest.mark.parametrize(("change", "first"), [
    (_rank(1, rank=5), "checkpoints.0.ranks.1.rank = 5, above the point's last rank (1)"),
    (_rank(0, end_s=1e5), "checkpoints.0.ranks.0.end_s = 100000, above checkpoints.0.span_s"),
    (_rank(0, duration_s=0.0), "checkpoints.0.ranks.0.duration_s: rank 0 moved "),
    (_rank(1, duration_s=1e4), "checkpoints.0.ranks.1.duration_s = 10000, above checkpoints.0.span_s"),
    # the rules of the checkpoint's own sums come before any one rank's, and an earlier rank before a later one
    (_both(_rank(1, rank=7), _rank(0, files=9)), "checkpoints.0.ranks: their files add up to "),
    (_both(_rank(1, rank=7), _rank(0, end_s=1e5)), "checkpoints.0.ranks.0.end_s = 100000"),
    (lambda d: d["checkpoints"][0].update(duration_max_s=d["checkpoints"][0]["duration_max_s"] * 2),
     "checkpoints.0.duration_max_s = "),
])
def test_a_ranks_figure_is_named_first_in_rank_order(change: Callable[[dict[str, Any]], None], first: str) -> None:
    """The ranks are checked in one pass for speed; the problem named is still the first in the rules' order."""
    data = result_dict(make_point(), [2.0], [3.0])
    change(data)
    assert (implausible(Result.model_validate(data)) or "").startswith(first)

"""The typed plan row writes the `plan --json` row: one set of keys for every row, groups flattened in place."""

from __future__ import annotations

import pytest

from studyctl.definition.checkpoint.restart_plan import RESTART_KEYS
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.plan import plan_row
from studyctl.definition.planning.plan_row import GROUPS, OWN_KEYS, with_columns
from tests.unit.test_expand import sweep_of


def rows() -> list:  # type: ignore[type-arg]
    sweep = sweep_of(matrix={"zero_stage": [1, 3], "nodes": [1], "ranks_per_node": 3, "pipeline_parallel": [1, 2]},
                     repetitions=1)
    return [plan_row(pp, sweep) for pp in expand(sweep)]


def test_an_impossible_layout_writes_the_same_keys_with_its_sizes_null() -> None:
    planned = rows()
    feasible = [r for r in planned if r.sized is not None]
    infeasible = [r for r in planned if r.sized is None]
    assert feasible and infeasible
    keys = list(feasible[0].json())
    assert all(list(r.json()) == keys for r in feasible)
    for r in infeasible:
        row = r.json()
        assert set(row) == set(keys) and r.exclude_kind == "infeasible"
        assert all(row[k] is None for k in (*GROUPS["sized"], *GROUPS["needs"], *GROUPS["objects"]))
    # the fields are the one source of the keys: the row's own, then each group's, a shared key once
    assert set(keys) == OWN_KEYS | {k for g, ks in GROUPS.items() if g != "restart" for k in ks}
    assert not set(RESTART_KEYS) & set(keys)  # no restart onto another layout: its columns are left out


def test_the_json_row_reads_what_the_attributes_hold() -> None:
    r = next(r for r in rows() if r.sized is not None)
    row = r.json()
    assert r.sized is not None and r.needs is not None
    assert (row["point_id"], row["checkpoint_bytes"], row["interval_s"]) == \
        (r.point_id, r.sized.checkpoint_bytes, r.needs.interval_s)
    assert row["nominal_checkpoint_bytes"] == r.sized.nominal_checkpoint_bytes == r.needs.nominal_checkpoint_bytes


def test_columns_replaced_by_name_must_be_the_rows() -> None:
    r = next(r for r in rows() if r.sized is not None)
    assert r.sized is not None
    own = {k: getattr(r, k) for k in OWN_KEYS}
    sized = with_columns(own, r.sized, {"writes": 7, "estimated_seconds": 1.5})
    assert own["writes"] == 7 and sized.estimated_seconds == 1.5 and sized.checkpoint_bytes == r.sized.checkpoint_bytes
    with pytest.raises(ValueError, match="interval_s"):
        with_columns(own, r.sized, {"interval_s": 1.0})

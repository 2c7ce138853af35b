"""Ceiling points on the local backend, real mpiexec ranks and files: what they measure, what they leave, and
`ceilings: shared` reusing another study's ceiling of the same shape, path and nodes."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from studyctl import api
from studyctl.attempt.plausibility import implausible
from studyctl.definition.planning.ceilings import MIN_ROUNDS, probe_bytes, round_limit
from studyctl.definition.result.result_schema import Result

SWEEP = """\
study: {name}
models: [gpt2-125m]
matrix: {{zero_stage: {zero}, nodes: {nodes}, ranks_per_node: 1}}
filesystems: {{scratch: {{path: {fs}}}}}
checkpoint: {{scale: 0.004, writes: 1, reads: 1, buffer_mib: 4, block_mib: 4}}
ceilings: {ceilings}
calibration: off  # the measure and ceiling points alone
local: {{max_concurrent: 1, timeout_s: 120}}
"""


def run_study(tmp_path: Path, name: str, ceilings: str = "on", nodes: int = 2, zero: str = "[1, 3]"
              ) -> dict[str, Result]:
    """Runs the study; every point's result by role ("measure" points keyed by id)."""
    fs = tmp_path / "fs"
    fs.mkdir(exist_ok=True)
    sweep = tmp_path / f"{name}.yaml"
    sweep.write_text(SWEEP.format(name=name, zero=zero, nodes=nodes, fs=fs, ceilings=ceilings))
    api.submit(sweep, "local", tmp_path / "results")
    status = api.status(name, tmp_path / "results")
    assert set(status.counts) == {"COMPLETED"}, [(p.point_id, p.latest and p.latest.reason) for p in status.points]
    out = {}
    for p in status.points:
        assert p.latest is not None and p.latest.result_path
        r = Result.model_validate_json(Path(p.latest.result_path).read_text())
        assert implausible(r) is None
        out["ceiling" if r.point.role == "ceiling" else r.point_id] = r
    return out


def test_a_ceiling_point_measures_its_shape_and_leaves_no_files(tmp_path: Path) -> None:
    results = run_study(tmp_path, "c")
    assert len(results) == 3  # two measure points, one shape
    r = results["ceiling"]
    c = r.ceilings
    # the cell's cost caps the rounds (1 write and 1 read a repetition: three), the ramp round is not recorded
    assert c is not None and c.reused_from is None and MIN_ROUNDS <= c.repeats <= round_limit(r.point) == MIN_ROUNDS
    assert [t.index for t in r.checkpoints] == [*range(c.repeats)] * 2
    assert (c.largest_shard_bytes, c.even_bytes) == probe_bytes(r.point)
    assert c.largest_shard_bytes == max(m.sizes.bytes_per_rank_max for m in results.values() if m.ceilings is None)
    rates = [c.storage_write_GiBps, c.storage_read_GiBps, c.even_write_GiBps, c.even_read_GiBps,
             c.network_p2p_GiBps, c.network_bcast_GiBps, c.memcpy_GiBps_per_rank, c.memcpy_GiBps]
    assert all(rate is not None and rate > 0 for rate in rates), c
    assert r.provenance.simulated_nodes and len(r.provenance.node_names) == 2  # the "network" is shared memory
    assert [t.phase for t in r.checkpoints] == ["write"] * c.repeats + ["read"] * c.repeats
    # every rate is the median of its rounds, all recorded (a storage round writes and reads every probe)
    assert set(c.rounds) == {n for n in type(c).model_fields if n.endswith(("_GiBps", "_per_rank"))}
    assert all(MIN_ROUNDS <= len(v) <= round_limit(r.point) and getattr(c, k) == statistics.median(v)
               for k, v in c.rounds.items())
    assert c.rounds["storage_write_GiBps"] == [t.aggregate_GiBps for t in r.checkpoints if t.phase == "write"]
    assert all(t.bytes == c.largest_shard_bytes * 2 and t.files == 2 for t in r.checkpoints)
    assert not [f for f in (tmp_path / "fs").rglob("*") if f.is_file()]
    collected = api.collect("c", tmp_path / "results")  # a study with a ceiling point collects
    assert collected is not None


def test_one_node_has_no_network_ceiling_and_off_adds_none(tmp_path: Path) -> None:
    c = run_study(tmp_path, "one", nodes=1, zero="[1]")["ceiling"].ceilings
    assert c is not None and c.network_p2p_GiBps is None and c.network_bcast_GiBps is None
    assert c.storage_write_GiBps > 0 and c.memcpy_GiBps > 0
    assert "ceiling" not in run_study(tmp_path, "none", ceilings="off")


def test_shared_reuses_another_studys_ceiling_of_the_same_shape(tmp_path: Path) -> None:
    first = run_study(tmp_path, "first", ceilings="shared")["ceiling"]
    assert first.ceilings is not None and first.ceilings.reused_from is None
    # another study of the same shape (other points: ZeRO 3 alone), the same path and nodes: reused, and named
    second = run_study(tmp_path, "second", ceilings="shared", zero="[3]")["ceiling"]
    assert second.ceilings is not None and second.point_id != first.point_id
    assert second.ceilings.reused_from == f"first/points/{first.point_id}/attempt-1"
    assert second.ceilings.model_dump(exclude={"reused_from"}) == first.ceilings.model_dump(exclude={"reused_from"})
    assert second.checkpoints == first.checkpoints and second.study == "second"
    # `on` measures its own even where a shared one exists; another node count is another shape
    own = run_study(tmp_path, "own", ceilings="on")["ceiling"]
    other = run_study(tmp_path, "other", ceilings="shared", nodes=1, zero="[1]")["ceiling"]
    assert own.ceilings is not None and own.ceilings.reused_from is None
    assert other.ceilings is not None and other.ceilings.reused_from is None


def test_shared_never_reuses_a_tampered_ceiling_and_says_whose(tmp_path: Path) -> None:
    """Another study's ceiling is received data: held to the schema and the plausibility rules before reuse."""
    first = run_study(tmp_path, "first", ceilings="shared")["ceiling"]
    path = tmp_path / "results" / "first" / "points" / first.point_id / "attempt-1" / "result.json"
    data = json.loads(path.read_text())
    data["ceilings"]["storage_write_GiBps"] = 1e300  # schema-valid, physically impossible
    path.write_text(json.dumps(data))
    second = run_study(tmp_path, "second", ceilings="shared", zero="[3]")["ceiling"]
    assert second.ceilings is not None and second.ceilings.reused_from is None  # measured its own
    assert second.ceilings.storage_write_GiBps < 1e6
    log = (tmp_path / "results" / "second" / "points" / second.point_id / "attempt-1" / "stderr.log").read_text()
    line = next(x for x in log.splitlines() if "not reusing" in x)
    assert f"first/points/{first.point_id}/attempt-1" in line and "ceilings.storage_write_GiBps" in line
    tables = api.collect("second", tmp_path / "results")
    assert tables is not None
    ceilings = (tmp_path / "results" / "second" / "tables" / "ceilings.csv").read_text()
    assert "e+300" not in ceilings and "1e300" not in ceilings

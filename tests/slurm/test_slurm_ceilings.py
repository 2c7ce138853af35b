"""A ceiling point on the real cluster: it runs in its shape's job array (srun over two real nodes) and measures
the network between them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from studyctl.definition.result.result_schema import Result
from tests.slurm.test_slurm import cli, cluster_up, diag, not_completed, sweep_file, wait_final

pytestmark = pytest.mark.slurm
__all__ = ["cluster_up"]  # its autouse check runs here too


def test_a_two_node_ceiling_measures_the_network_between_real_nodes(tmp_path: Path) -> None:
    sweep = sweep_file(tmp_path, "ceil", """\
matrix: {zero_stage: [1, 3], nodes: 2, ranks_per_node: 1}
ceilings: on
slurm: {partition: debug, time_limit_min: 3}
""")
    proc = cli(tmp_path, "sweep", "submit", str(sweep), "--backend", "slurm")
    assert proc.returncode == 0, proc.stderr
    data = wait_final(tmp_path, "ceil")
    assert data["counts"] == {"COMPLETED": 3}, f"{not_completed(data)}{diag(tmp_path, 'ceil')}"
    results = [Result.model_validate_json(Path(p["result_path"]).read_text()) for p in data["points"]]
    (ceiling,) = [r for r in results if r.point.role == "ceiling"]
    c = ceiling.ceilings
    assert c is not None and c.reused_from is None
    prov = ceiling.provenance
    assert not prov.simulated_nodes and len(prov.node_names) == 2 and prov.slurm and prov.slurm.array_job_id
    assert c.network_p2p_GiBps and c.network_p2p_GiBps > 0 and c.network_bcast_GiBps and c.network_bcast_GiBps > 0
    assert min(c.storage_write_GiBps, c.storage_read_GiBps, c.even_write_GiBps, c.even_read_GiBps,
               c.memcpy_GiBps, c.memcpy_GiBps_per_rank) > 0
    # grouped with its shape's points: one job array for the three
    assert len({r.provenance.slurm.array_job_id for r in results if r.provenance.slurm}) == 1
    assert not [f for f in (tmp_path / "fs").rglob("*") if f.is_file()]
    status = json.loads(cli(tmp_path, "sweep", "status", "ceil", "--json").stdout)
    assert len(status["points"]) == 3

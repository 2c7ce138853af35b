"""The main job's studies (the sweeps scripts/quickstart.sh runs), planned: every cell gets what its report
promises, a 95% CI (two or more repetitions), a share of its shape's ceiling (a ceiling point) and, for its
shape, what a fitted projection to full size needs (calibration points far enough from the measured scale, with a
degree of freedom left for the band), checked on the plan instead of the minutes a run takes. (The fit is also
keyed by strategy: calibration copies a shape's largest checkpoint, so a shape's other strategies fall back to
plain scaling; scripts/check_report.py names such cells after a run.)"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from studyctl.analysis.projection.fit import TERMS
from studyctl.definition.planning.calibration import MIN_SPREAD
from studyctl.definition.planning.expand import expand
from studyctl.definition.planning.shapes import shape_of
from studyctl.definition.planning.sweep import load_sweep

REPO = Path(__file__).resolve().parents[2]
MAIN_JOB = REPO / "scripts" / "quickstart.sh"


def main_job_sweeps() -> list[str]:
    """The sweeps quickstart.sh runs with no argument (its `run sweeps/....yaml` lines)."""
    return re.findall(r"^\s*run (sweeps/\S+\.yaml)", MAIN_JOB.read_text(), re.MULTILINE)


def test_the_main_job_runs_sweeps_that_exist() -> None:
    sweeps = main_job_sweeps()
    assert len(sweeps) >= 2 and all((REPO / s).is_file() for s in sweeps), sweeps


@pytest.mark.parametrize("name", main_job_sweeps())
def test_every_cell_of_the_main_job_gets_a_ci_a_ceiling_and_a_fitted_projection(name: str) -> None:
    planned = [pp for pp in expand(load_sweep(REPO / name)) if not pp.excluded]
    by_role: dict[str, list] = defaultdict(list)
    for pp in planned:
        by_role[pp.point.role].append(pp.point)
    measure = by_role.pop("measure")
    cells = Counter(p.model_copy(update={"repetition": 0}).point_id for p in measure)
    assert min(cells.values()) >= 2, f"{name}: a cell with one repetition has no 95% CI"
    shapes = {shape_of(p) for p in measure}
    ceilings = Counter(shape_of(p) for p in by_role.pop("ceiling", []))
    assert set(ceilings) == shapes and set(ceilings.values()) == {1}, f"{name}: one ceiling point per shape"
    calibration = by_role.pop("calibration", [])
    assert not by_role, f"{name}: points of another role: {sorted(by_role)}"
    for shape in shapes:
        measured = [p for p in measure if shape_of(p) == shape]
        top = max(p.checkpoint.scale for p in measured)
        larger = [p for p in calibration if shape_of(p) == shape and p.checkpoint.scale >= MIN_SPREAD * top]
        assert larger, f"{name}: shape {shape.key} has no calibration point to fit its projection from"
        # the fit's fixed and bytes terms (one layout per shape here), and at least one degree of freedom left
        assert len(measured) + len(larger) > len(TERMS) - 1, f"{name}: shape {shape.key}: no band for the fit"

"""`collect` says why cells have no ceiling: a ceiling point that failed or never ran is named with its id and
state (never blamed on the sweep's `ceilings:` setting); the setting is named only when it added no ceiling point."""

from __future__ import annotations

from pathlib import Path

from studyctl.analysis.collect import collect
from studyctl.analysis.status import PointStatus
from studyctl.definition.planning.ceilings import ceiling_of
from tests.resultgen import make_point, write_ceiling, write_result


def study(root: Path, setting: str, ceiling_shapes: tuple[int, ...] = ()) -> tuple[Path, list[PointStatus]]:
    """Cells of 1 and 2 nodes, ceilings measured for `ceiling_shapes`; the ledger's statuses of every point."""
    path = root / f"s-{setting}-{len(ceiling_shapes)}"
    statuses = []
    for nodes in (1, 2):
        point = make_point(zero=1, nodes=nodes, rpn=2, scale=0.1)
        for rep in range(2):
            rep_point = point.model_copy(update={"repetition": rep})
            write_result(path, rep_point, [1.0 * nodes, 1.0 * nodes], [1.5, 1.5])
            statuses.append(PointStatus(rep_point.point_id, "COMPLETED", 1))
        if nodes in ceiling_shapes:
            ceiling = write_ceiling(path, point, 2.0 * nodes, 3.0 * nodes)
            statuses.append(PointStatus(ceiling.point_id, "COMPLETED", 1, role="ceiling"))
        elif setting != "off":
            statuses.append(PointStatus(ceiling_of(point).point_id, "FAILED", 1, role="ceiling",
                                        failure_reason="io_error: No space left on device"))
    (path / "sweep.yaml").write_text(f"filesystems:\n  scratch: {{path: /tmp}}\nceilings: {setting}\n")
    return path, statuses


def hardware(path: Path, statuses: list[PointStatus]) -> list[str]:
    return [line for line in collect(path, statuses).summary_lines() if line.startswith("hardware: ")]


def test_a_failed_ceiling_point_is_named_with_its_state_not_the_setting(tmp_path: Path) -> None:
    path, statuses = study(tmp_path, "on")
    (line,) = hardware(path, statuses)
    failed = [s for s in statuses if s.role == "ceiling"]
    assert line.startswith(f"hardware: no ceilings measured: {len(failed)} ceiling point(s) left none")
    for s in failed:
        assert f"{s.point_id} FAILED (io_error: No space left on device)" in line
    assert "setting" not in line and "`ceilings:" not in line


def test_a_ceiling_point_missing_beside_measured_ones_is_named(tmp_path: Path) -> None:
    path, statuses = study(tmp_path, "auto", ceiling_shapes=(1,))
    lines = hardware(path, statuses)
    (missing,) = [s for s in statuses if s.role == "ceiling" and s.state == "FAILED"]
    assert lines[0] == "hardware: ceilings of 1 resource shape(s) from 1 ceiling point(s)"
    assert lines[1] == ("hardware: 1 ceiling point(s) left no ceiling, so their shapes' cells have no share: "
                        f"{missing.point_id} FAILED (io_error: No space left on device)")


def test_the_setting_is_named_only_when_it_added_no_ceiling_point(tmp_path: Path) -> None:
    path, statuses = study(tmp_path, "off")
    assert hardware(path, statuses) == [
        "hardware: no ceilings measured: the sweep's `ceilings: off` adds no ceiling point: shares and limits need "
        "them"]
    path, statuses = study(tmp_path, "auto")
    ceilings = [s for s in statuses if s.role != "ceiling"]  # auto added none (a study of many shapes)
    (line,) = hardware(path, ceilings)
    assert "the study has no ceiling point (the sweep's `ceilings: auto`, which adds them to a study of at most" \
        in line

"""The kernel's removal of a point's directory, on real files: what it removes, what it leaves, what it refuses.

The place comes from the definition (`Place`, whose `removable` says whether studyctl wrote it); the walk is the
kernel's and never follows a link, so a link planted inside a point's directory, or in its place, never takes the
removal outside.
"""

from __future__ import annotations

from pathlib import Path

from studyctl.definition.checkpoint.places import Place
from studyctl.removal import not_plain, remove_place

POINT = "0123456789ab"


def plant(root: Path, study_dir: str = "s.k") -> Path:
    point = root / study_dir / POINT
    (point / "global_step1").mkdir(parents=True)
    (point / "global_step1" / "model.pt").write_bytes(b"c" * 64)
    (root / study_dir / f".{POINT}.lock").write_text("")
    return point


def test_a_place_goes_with_its_claim_file_and_its_emptied_study_directory(tmp_path: Path) -> None:
    plant(tmp_path)
    assert remove_place(Place(str(tmp_path), "s.k", POINT))
    assert list(tmp_path.iterdir()) == []
    assert not remove_place(Place(str(tmp_path), "s.k", POINT))  # nothing left to remove


def test_another_points_directory_keeps_the_study_directory(tmp_path: Path) -> None:
    plant(tmp_path)
    other = tmp_path / "s.k" / "ba9876543210"
    other.mkdir()
    assert remove_place(Place(str(tmp_path), "s.k", POINT))
    assert sorted(p.name for p in (tmp_path / "s.k").iterdir()) == [other.name]


def test_a_link_inside_is_removed_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    point = plant(tmp_path / "fs")
    (point / "to-victim").symlink_to(victim)
    (point / "global_step1" / "file-link").symlink_to(victim / "keep")
    assert remove_place(Place(str(tmp_path / "fs"), "s.k", POINT))
    assert (victim / "keep").read_text() == "mine"
    assert not (tmp_path / "fs" / "s.k").exists()


def test_a_link_in_the_points_place_or_the_studys_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine")
    fs = tmp_path / "fs"
    (fs / "s.k").mkdir(parents=True)
    (fs / "s.k" / POINT).symlink_to(victim)
    (fs / "t.k").symlink_to(victim)
    (victim / POINT).mkdir()
    assert not remove_place(Place(str(fs), "s.k", POINT))
    assert not remove_place(Place(str(fs), "t.k", POINT))
    assert (victim / "keep").read_text() == "mine" and (victim / POINT).is_dir()


def test_one_nodes_folder_goes_and_the_point_with_its_last(tmp_path: Path) -> None:
    point = tmp_path / "s.k" / POINT
    for node in ("node-0", "node-1"):
        (point / node).mkdir(parents=True)
    tier = Place(str(tmp_path), "s.k", POINT, node_local=True)
    assert remove_place(tier, node_dir="node-0")
    assert [p.name for p in point.iterdir()] == ["node-1"]
    assert remove_place(tier, node_dir="node-1")
    assert list(tmp_path.iterdir()) == []


def test_names_that_are_not_plain_and_places_studyctl_does_not_write_remove_nothing(tmp_path: Path) -> None:
    point = plant(tmp_path)
    refused = [(Place(str(tmp_path), "..", POINT), None), (Place(str(tmp_path), "s.k/..", POINT), None),
               (Place(str(tmp_path), "s.k", "not-an-id"), None), (Place("relative", "s.k", POINT), None),
               (Place(str(tmp_path / "{node}"), "s.k", POINT), None), (Place(str(tmp_path), "s.k", POINT), "..")]
    for place, node_dir in refused:
        assert not remove_place(place, node_dir=node_dir), (place, node_dir)
    assert (point / "global_step1" / "model.pt").exists()
    assert all(not_plain(n) for n in ("", ".", "..", "a/b", "a\0b")) and not not_plain("node-0")

"""`mlperf --out DIR` killed (-9, a real subprocess) at every step of replacing DIR: DIR is the complete old tree
or the complete new one, never missing or half; the next run removes what the killed one left, and only that
(never what a link it finds points to, never a name it did not make)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from studyctl.analysis.report.mlperf import mlperf_for_study
from studyctl.errors import UserError
from tests.unit.test_mlperf_tree import study

# The real `mlperf_for_study`, with a SIGKILL of itself at one named step of the replacement.
KILLED_AT = """\
import os, signal, sys
from pathlib import Path
from studyctl.analysis import linked_tree
from studyctl.analysis.report.mlperf import mlperf_for_study
from studyctl.errors import UserError
root, out, rules, at = sys.argv[1:]
linked_tree.step = lambda name: os.kill(os.getpid(), signal.SIGKILL) if name == at else None
mlperf_for_study(Path(root), "tree", rules, Path(out))
"""
STEPS = ("started", "built", "linked", "swapped")


def snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def legacy(out: Path) -> None:
    """DIR as an earlier version left it: a real directory (a copy of the tree), no link."""
    copy = out.with_name("copy")
    shutil.copytree(out, copy)
    out.unlink()
    copy.rename(out)


@pytest.mark.parametrize("real_dir", [False, True], ids=["link", "real-dir"])
@pytest.mark.parametrize("at", STEPS)
def test_a_kill_at_any_step_leaves_dir_old_or_new_and_the_next_run_cleans(tmp_path: Path, at: str,
                                                                           real_dir: bool) -> None:
    root = study(tmp_path)
    new_out = tmp_path / "new" / "submission"
    mlperf_for_study(root, "tree", "v2.0", new_out)
    new = snapshot(new_out)
    out = tmp_path / "out" / "submission"
    mlperf_for_study(root, "tree", "v3.0", out)
    old = snapshot(out)
    assert old != new
    if real_dir:
        legacy(out)
    killed = subprocess.run([sys.executable, "-c", KILLED_AT, str(root), str(out), "v2.0", at],
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert snapshot(out) == (new if at == "swapped" else old), f"killed at {at}: DIR is one whole tree"
    mlperf_for_study(root, "tree", "v3.0", out)
    assert snapshot(out) == old
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        [".submission.studyctl-lock", os.readlink(out), "submission"]), "no tree, link or copy left over"


def test_the_next_run_removes_only_what_studyctl_made(tmp_path: Path) -> None:
    """Leftovers of an earlier version (`.DIR.<8 hex>.tmp` / `.old`) go; a leftover name that is a link goes
    without its target being touched; names studyctl never makes stay."""
    root = study(tmp_path)
    out = tmp_path / "out" / "submission"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    beside = out.parent
    beside.mkdir()
    (beside / ".submission.0123abcd.old" / "closed").mkdir(parents=True)
    (beside / ".submission.0123abcd.tmp").mkdir()
    (beside / ".submission.0123456789abcdef.tree").symlink_to(victim)
    for name in (".submission.notes", ".other.0123abcd.tmp", ".submission.0123abcd.tree"):
        (beside / name).mkdir()
    mlperf_for_study(root, "tree", "v3.0", out)
    assert sorted(p.name for p in beside.iterdir()) == sorted(
        [".submission.studyctl-lock", os.readlink(out), "submission", ".submission.notes", ".other.0123abcd.tmp",
         ".submission.0123abcd.tree"])
    assert (victim / "keep.txt").read_text() == "mine"


def test_a_link_studyctl_did_not_make_is_refused(tmp_path: Path) -> None:
    root = study(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    out = tmp_path / "submission"
    out.symlink_to(victim)
    with pytest.raises(UserError, match="a link studyctl did not make"):
        mlperf_for_study(root, "tree", "v3.0", out)
    assert out.is_symlink() and list(victim.iterdir()) == []

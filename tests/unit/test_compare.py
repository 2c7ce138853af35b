"""compare on shared settings: study-wide differences become the label; exit codes 0 / 1 / 2 (generated results)."""

from __future__ import annotations

from pathlib import Path

import pytest

from studyctl.analysis.compare import compare
from studyctl.errors import UserError
from studyctl.study.ledger import Ledger
from tests.cli import run_cli
from tests.resultgen import axis_study


def study(results: Path, name: str, **kw) -> Path:
    """A generated study with an (empty) ledger, so the CLI finds it by name."""
    root = results / name
    axis_study(root, kw.pop("axis", "zero"), kw.pop("values", (1, 3)), **kw)
    Ledger(root / "ledger.sqlite").close()
    return root


def test_buffered_against_direct(tmp_path: Path) -> None:
    a = study(tmp_path, "buffered", io_mode="buffered", speed={1: 2.0, 3: 2.0})
    b = study(tmp_path, "direct", io_mode="direct", speed={1: 3.4, 3: 3.4})
    res = compare(a, b, 0.05)
    assert res.differing["io_mode"] == ("buffered", "direct") and "io_mode_used" not in res.differing
    assert res.label == "io_mode buffered → direct"
    assert len(res.matched) == 2 * 2 * 2 and res.unmatched_a == res.unmatched_b == 0  # ZeRO × nodes × phase
    assert res.matched["ratio"].to_numpy() == pytest.approx([1.7] * 8)
    assert not res.any_regressed
    lines = "\n".join(res.summary_lines())
    assert "direct vs buffered (io_mode buffered → direct)" in lines and "ZeRO-1, nodes 2 write" in lines
    assert (b / "compare" / "buffered" / "ratio.png").stat().st_size > 10_000


def test_one_node_against_two_nodes(tmp_path: Path) -> None:
    a = study(tmp_path, "one", nodes=(1,))
    b = study(tmp_path, "two", nodes=(2,))
    res = compare(a, b, 0.05)
    assert res.differing == {"nodes": ("1", "2")}
    assert res.matched["ratio"].to_numpy() == pytest.approx([2.0] * 4, rel=0.05)  # bandwidth ∝ nodes


def test_nothing_comparable_is_exit_2_with_the_reason(tmp_path: Path) -> None:
    a = study(tmp_path, "small", nodes=(1, 2))
    b = study(tmp_path, "large", nodes=(4, 8))
    with pytest.raises(UserError, match=r"no shared values of nodes \(1, 2 vs 4, 8\)") as err:
        compare(a, b, 0.05)
    assert err.value.exit_code == 2


def test_cli_exit_codes(tmp_path: Path) -> None:
    study(tmp_path, "base", speed={1: 2.0, 3: 2.0})
    study(tmp_path, "same", speed={1: 2.0, 3: 2.0})
    study(tmp_path, "slow", speed={1: 1.0, 3: 1.0})
    study(tmp_path, "far", nodes=(16,))
    results = str(tmp_path)
    assert run_cli("compare", "base", "same", "--results", results).returncode == 0
    slow = run_cli("compare", "base", "slow", "--results", results)
    assert slow.returncode == 1 and "REGRESSED" in slow.stdout
    far = run_cli("compare", "base", "far", "--results", results)
    assert far.returncode == 2 and "no shared values of nodes" in far.stderr and "Traceback" not in far.stderr
    (tmp_path / "empty").mkdir()
    Ledger(tmp_path / "empty" / "ledger.sqlite").close()
    empty = run_cli("compare", "base", "empty", "--results", results)
    assert empty.returncode == 2 and "no completed results" in empty.stderr


def test_collect_ratio_cli(tmp_path: Path) -> None:
    root = study(tmp_path, "modes", axis="io_mode", values=("buffered", "direct", "hybrid"),
                 speed={"buffered": 2.0, "direct": 3.4, "hybrid": 3.0})
    res = run_cli("collect", "modes", "--results", str(tmp_path), "--ratio", "io_mode=buffered")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ratio: direct / buffered write: 1.70× [" in res.stdout
    assert "ratio: hybrid / buffered read: 1.50× [" in res.stdout
    assert (root / "tables" / "ratio_io_mode_buffered.csv").is_file()
    assert (root / "plots" / "ratio_io_mode_buffered.png").stat().st_size > 10_000
    assert "direct / buffered write: 1.70×" in (root / "report.html").read_text()
    fresh = study(tmp_path, "fresh", axis="io_mode", values=("buffered", "direct"))
    bad = run_cli("collect", "fresh", "--results", str(tmp_path), "--ratio", "io_mode=fast")
    assert bad.returncode == 2 and "'fast' is not a value of io_mode; values: buffered, direct" in bad.stderr
    assert not (fresh / "report.html").exists() and not list(fresh.glob("tables/*.csv"))  # nothing half-written


def test_one_repetition_is_not_judged_and_exits_0(tmp_path: Path) -> None:
    """Half the bandwidth on one repetition: the ratio is shown, no verdict without a CI on both sides."""
    a = study(tmp_path, "one_a", reps=1, speed={1: 2.0, 3: 2.0})
    b = study(tmp_path, "one_b", reps=1, speed={1: 1.0, 3: 1.0})
    res = compare(a, b, 0.05)
    assert res.matched["ratio"].to_numpy() == pytest.approx([0.5] * 8)
    assert not res.matched["judged"].any() and not res.any_regressed and res.unjudged == 8
    # one side with repetitions is not enough either
    c = study(tmp_path, "three_c", reps=3, speed={1: 1.0, 3: 1.0})
    assert not compare(a, c, 0.05).any_regressed


def test_cli_prints_bracketed_verdicts_verbatim_through_the_real_entry_point(tmp_path: Path) -> None:
    """The console reads no markup: "[n/a: …]" and a CI "[0.49, 0.51]" reach the terminal as written."""
    study(tmp_path, "one_a", reps=1, speed={1: 2.0, 3: 2.0})
    study(tmp_path, "one_b", reps=1, speed={1: 1.0, 3: 1.0})
    res = run_cli("compare", "one_a", "one_b", "--results", str(tmp_path), subprocess_=True)
    assert res.returncode == 0, res.stderr
    assert "ratio 0.500 [n/a: one repetition on a side, no CI] not enough repetitions to judge" in res.stdout
    assert "REGRESSED" not in res.stdout and "8 not judged" in res.stdout
    study(tmp_path, "three_a", speed={1: 2.0, 3: 2.0})
    study(tmp_path, "three_b", speed={1: 1.0, 3: 1.0})
    res = run_cli("compare", "three_a", "three_b", "--results", str(tmp_path), subprocess_=True)
    assert res.returncode == 1 and "ratio 0.500 [0.4" in res.stdout and "REGRESSED (CI below 1)" in res.stdout


def test_help_text_is_shown_verbatim() -> None:
    """Help strings are no markup either: every option's help of every command appears as written."""
    from typer.main import get_command

    from studyctl.cli.app import app

    group = get_command(app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subs = getattr(command, "commands", {name: command})
        for sub, cmd in subs.items():
            args = [name, sub] if sub != name else [name]
            text = " ".join(run_cli(*args, "--help").stdout.split())
            for param in cmd.params:
                if param.help:
                    assert " ".join(param.help.split()) in text, (args, param.help)

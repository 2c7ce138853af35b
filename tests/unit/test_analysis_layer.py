"""analysis/ is a function of result files and statuses handed in: it never imports study/, backends/, api, cli
or the worker; no module of it is over ~400 lines, no function over ~60."""

from __future__ import annotations

import ast
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[2] / "studyctl" / "analysis"
FORBIDDEN = ("studyctl.study", "studyctl.backends", "studyctl.api", "studyctl.cli", "worker")


def modules() -> list[Path]:
    return sorted(ANALYSIS.rglob("*.py"))


def test_analysis_never_imports_above_itself() -> None:
    bad = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            bad += [f"{path.name}: {n}" for n in names if n.startswith(FORBIDDEN)]
    assert not bad


def test_small_modules_and_functions() -> None:
    for path in modules():
        text = path.read_text()
        assert text.count("\n") <= 400, path
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef):
                assert node.end_lineno - node.lineno <= 60, f"{path.name}:{node.name}"

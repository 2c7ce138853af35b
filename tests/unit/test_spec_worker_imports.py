"""spec/ is pure and worker/ stands on spec/ and the kernel only (issue 9's arrows, for these two layers)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the kernel, and the package root for its __version__
KERNEL = {"studyctl", "studyctl.errors", "studyctl.fsutil", "studyctl.units", "studyctl.states"}
IMPURE = {"subprocess", "pandas", "matplotlib", "jinja2", "sqlite3", "submitit", "mpi4py"}


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_spec_imports_only_spec_kernel_and_no_io_libraries() -> None:
    for path in sorted((REPO / "studyctl" / "spec").glob("*.py")):
        for name in imports_of(path):
            assert name.split(".")[0] not in IMPURE, f"{path.name} imports {name}"
            if name.startswith("studyctl"):
                assert name.startswith("studyctl.spec") or name in KERNEL, f"{path.name} imports {name}"


def test_worker_imports_spec_and_kernel_only() -> None:
    for path in sorted((REPO / "worker").glob("*.py")):
        for name in imports_of(path):
            if name.startswith("studyctl"):
                assert name.startswith("studyctl.spec") or name in KERNEL, f"worker/{path.name} imports {name}"

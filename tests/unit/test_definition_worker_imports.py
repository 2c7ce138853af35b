"""definition/ is pure, and worker/ stands on definition/ and the kernel only (the two lowest layers)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_architecture import KERNEL  # the kernel, and the package root for its __version__

REPO = Path(__file__).resolve().parents[2]
PURE_OBJSTORE = {"studyctl.objstore.target", "studyctl.objstore.limits"}
IMPURE = {"subprocess", "pandas", "matplotlib", "jinja2", "sqlite3", "submitit", "mpi4py"}


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_definition_imports_only_definition_kernel_and_no_io_libraries() -> None:
    for path in sorted((REPO / "studyctl" / "definition").rglob("*.py")):
        for name in imports_of(path):
            assert name.split(".")[0] not in IMPURE, f"{path.name} imports {name}"
            if name.startswith("studyctl"):  # the S3 URL grammar and S3's limits (objstore) are pure too
                assert name.startswith("studyctl.definition") or name in {*KERNEL, *PURE_OBJSTORE}, \
                    f"{path.name} imports {name}"


# what creates, changes or removes files and directories: the kernel's to call (studyctl.removal, studyctl.fsutil),
# never the definition's (which reads its inputs, a sweep file, and nothing more)
FILE_CHANGES = {"unlink", "rmdir", "remove", "removedirs", "rmtree", "mkdir", "makedirs", "rename", "replace",
                "write_text", "write_bytes", "touch", "symlink_to", "chmod", "truncate"}


def file_changes(source: ast.Module) -> list[str]:
    """Calls of a file-changing name on os, shutil or a Path (`x.unlink()`, `os.rmdir(...)`); `str.replace` and
    `dataclasses.replace` are told apart from `os.replace` by their receivers."""
    return [f"{node.lineno}: {ast.unparse(node.func)}" for node in ast.walk(source)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in FILE_CHANGES
            and (node.func.attr != "replace" or (isinstance(node.func.value, ast.Name) and node.func.value.id == "os"))]


def test_definition_creates_changes_or_removes_no_file() -> None:
    """Planning is pure: removing a point's directory is the kernel's (studyctl.removal), never the definition's."""
    calls = [f"{p.name}:{c}" for p in sorted((REPO / "studyctl" / "definition").rglob("*.py"))
             for c in file_changes(ast.parse(p.read_text()))]
    assert not calls, calls


def test_the_file_change_check_can_fail() -> None:
    for source in ("os.rmdir(p, dir_fd=fd)", "shutil.rmtree(d)", "Path(p).unlink()", "os.replace(a, b)",
                   "p.write_text('x')"):
        assert file_changes(ast.parse(source)), source
    for source in ("s.replace('a', 'b')", "dataclasses.replace(p, x=1)", "os.path.isabs(p)", "p.read_bytes()"):
        assert not file_changes(ast.parse(source)), source


def test_worker_imports_spec_objstore_and_kernel_only() -> None:
    for path in sorted((REPO / "worker").glob("*.py")):
        for name in imports_of(path):
            if name.startswith("studyctl"):
                assert name.startswith(("studyctl.definition", "studyctl.objstore")) or name in KERNEL, \
                    f"worker/{path.name} imports {name}"


def test_a_rank_loads_no_sweep_schema_yaml_expansion_or_plan() -> None:
    """What every MPI rank imports stays small: the layout and the point, not the study definition's parser."""
    import subprocess
    import sys

    code = ("import sys, worker.__main__, worker.run, worker.strategies, worker.restore\n"
            "print(' '.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                check=True).stdout.split())
    heavy = {"yaml", "pandas", "matplotlib", "jinja2",
             "studyctl.definition.planning.sweep", "studyctl.definition.planning.expand",
             "studyctl.definition.planning.plan", "studyctl.definition.inputs.yamlpos"}
    assert not heavy & loaded, sorted(heavy & loaded)
    assert "studyctl.definition.checkpoint.layout" in loaded  # the check sees what a rank imports


def test_a_posix_sync_points_rank_starts_without_the_s3_client_or_numpy() -> None:
    """Every rank of every point pays its imports before the point starts: the S3 client (boto3) and numpy load
    only in a rank that writes objects or runs training steps."""
    import subprocess
    import sys

    code = ("import sys, worker.__main__, worker.run, worker.strategies, worker.restore, worker.checkpointing\n"
            "print(' '.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                                check=True).stdout.split())
    assert not {"boto3", "botocore", "numpy"} & loaded, sorted({"boto3", "botocore", "numpy"} & loaded)
    assert "worker.ceiling" in loaded  # the check sees what a rank imports

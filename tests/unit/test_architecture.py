"""The import graph runs one way: kernel < definition < {worker, attempt} < backends < {study, analysis} < api < cli.

Every module under studyctl/ and worker/ is parsed (ast: module-level and function-level imports, and those
under TYPE_CHECKING); a module may import only its own layer or lower, analysis never imports study or
backends, worker only the definition and the kernel; there is no import cycle; no module above backends/ compares
a backend name; no module is over 400 lines, and in the core packages no function is over 60.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from studyctl.backends import base

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("studyctl", "worker")
KERNEL = {"studyctl", "studyctl.errors", "studyctl.fsutil", "studyctl.units", "studyctl.states", "studyctl.host"}
# group → the groups it may import (its own included)
ORDER = ["kernel", "definition", "worker", "attempt", "backends", "study", "analysis", "api", "cli"]
ALLOWED = {
    "kernel": {"kernel"},
    "definition": {"kernel", "definition"},
    "worker": {"kernel", "definition", "worker"},
    "attempt": {"kernel", "definition", "attempt"},
    "backends": {"kernel", "definition", "worker", "attempt", "backends"},
    "study": {"kernel", "definition", "worker", "attempt", "backends", "study"},
    "analysis": {"kernel", "definition", "worker", "attempt", "analysis"},
    "api": {"kernel", "definition", "worker", "attempt", "backends", "study", "analysis", "api"},
    "cli": set(ORDER),
}
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


@cache
def tree(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text(), filename=str(modules()[name]))


def group(name: str) -> str:
    if name in KERNEL:
        return "kernel"
    if name == "worker" or name.startswith("worker."):
        return "worker"
    parts = name.split(".")
    if len(parts) >= 2 and parts[1] in ALLOWED and parts[1] not in ("kernel", "worker"):
        return parts[1]
    raise AssertionError(f"{name}: in no layer; add it to KERNEL or a package of ORDER in this test")


def imports(name: str) -> set[str]:
    """Our modules `name` imports, anywhere in its body."""
    ours = modules()
    is_package = modules()[name].name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                target = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names}
            found |= (subs & ours.keys()) or {target}
    return {m for m in found if m in ours}


def test_every_module_is_in_a_layer() -> None:
    assert {group(m) for m in modules()} <= set(ORDER)


def test_imports_run_down_the_layers() -> None:
    upward = [f"{m} ({group(m)}) imports {i} ({group(i)})" for m in modules() for i in sorted(imports(m))
              if group(i) not in ALLOWED[group(m)]]
    assert not upward, "\n".join(upward)


def test_no_import_cycle() -> None:
    graph = {m: imports(m) - {m} for m in modules()}
    done: set[str] = set()
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        if m in stack:
            return [*stack[stack.index(m):], m]
        if m in done:
            return None
        stack.append(m)
        for n in sorted(graph[m]):
            cycle = visit(n)
            if cycle:
                return cycle
        stack.pop()
        done.add(m)
        return None

    for m in sorted(graph):
        cycle = visit(m)
        assert cycle is None, " → ".join(cycle or [])


def _names_compared(node: ast.Compare, names: set[str]) -> set[str]:
    found = set()
    for operand in (node.left, *node.comparators):
        values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
        found |= {v.value for v in values if isinstance(v, ast.Constant) and v.value in names}
    return found


def test_no_backend_name_is_compared_above_backends() -> None:
    names = set(base.names())
    assert {"local", "slurm"} <= names
    seen = [f"{modules()[m].relative_to(REPO)}:{node.lineno}: compares {sorted(hit)}"
            for m in modules() if group(m) != "backends"
            for node in ast.walk(tree(m)) if isinstance(node, ast.Compare)
            and (hit := _names_compared(node, names))]
    assert not seen, "\n".join(seen)


def test_the_name_check_finds_comparisons() -> None:
    """The check above can fail: it sees ==, != and `in` against literals."""
    names = {"local", "slurm"}
    for source in ('b == "local"', '"slurm" != b', 'b in ("local", "pbs")'):
        (stmt,) = ast.parse(source).body
        assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Compare)
        assert _names_compared(stmt.value, names), source


def test_module_sizes() -> None:
    long = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long


def test_function_sizes() -> None:
    long = []
    for m in modules():
        for node in ast.walk(tree(m)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{m}.{node.name}: {lines} lines")
    assert not long, long


def test_only_attempt_paths_names_attempt_directories() -> None:
    """`points/<id>/attempt-<n>` and the files in it are named in attempt/paths.py alone."""
    hand_built = []
    for m in modules():
        if m == "studyctl.attempt.paths":
            continue
        for node in ast.walk(tree(m)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    "attempt-" in node.value or node.value in (
                        "result.json", "error.json", "task.json", "sweep.yaml", "ledger.sqlite")):
                hand_built.append(f"{m}:{node.lineno}: {node.value!r}")
    assert not hand_built, hand_built

"""The import graph runs one way: kernel < objstore < definition < {worker, attempt} < backends < {study, analysis} <
api < cli.

Every module under studyctl/ and worker/ is parsed (ast: module-level and function-level imports, and those
under TYPE_CHECKING); a module may import only its own layer or lower, analysis never imports study,
backends or the worker (the result schema it reads is in definition/), worker only the definition and the
kernel, and the CLI only `studyctl.api` and the kernel (one door into the library); there is no import cycle;
no module above backends/ compares a backend name; no module is over 400 lines, and in the core packages no
function is over 60. Inside definition/, its sub-layers (inputs < checkpoint < planning < result) import down only.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from studyctl.backends import base

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("studyctl", "worker")
KERNEL = {"studyctl", "studyctl.errors", "studyctl.fsutil", "studyctl.removal", "studyctl.units", "studyctl.states",
          "studyctl.host"}
# group → the groups it may import (its own included)
ORDER = ["kernel", "objstore", "definition", "worker", "attempt", "backends", "study", "analysis", "api", "cli"]
ALLOWED = {
    "kernel": {"kernel"},
    "objstore": {"kernel", "objstore"},  # the S3 client layer: ranks and the submit-time checks use it
    "definition": {"kernel", "objstore", "definition"},
    "worker": {"kernel", "objstore", "definition", "worker"},
    "attempt": {"kernel", "objstore", "definition", "attempt"},
    "backends": {"kernel", "objstore", "definition", "worker", "attempt", "backends"},
    "study": {"kernel", "objstore", "definition", "worker", "attempt", "backends", "study"},
    "analysis": {"kernel", "definition", "attempt", "analysis"},  # the result schema is in definition/
    "api": {"kernel", "objstore", "definition", "worker", "attempt", "backends", "study", "analysis", "api"},
    "cli": {"kernel", "api", "cli"},  # one door: the CLI calls studyctl.api and nothing else below it
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


def imports(name: str, source: ast.Module | None = None) -> set[str]:
    """Our modules `name` imports, anywhere in its body (`source`: its text parsed, default the file's)."""
    ours = modules()
    is_package = modules()[name].name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(source or tree(name)):
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


def upward_imports(name: str, source: ast.Module | None = None) -> list[str]:
    return [f"{name} ({group(name)}) imports {i} ({group(i)})" for i in sorted(imports(name, source))
            if group(i) not in ALLOWED[group(name)]]


def test_imports_run_down_the_layers() -> None:
    upward = [line for m in modules() for line in upward_imports(m)]
    assert not upward, "\n".join(upward)


def test_the_layer_check_finds_a_cli_module_reaching_past_the_api() -> None:
    """The one-door rule can fail: a CLI module importing the definition, a study operation or analysis directly
    (at module level, in a function, or for type checking only) is reported; the api and the kernel are not."""
    refused = ["from studyctl.definition.planning.plan import plan_rows", "import studyctl.study.status",
               "from studyctl.analysis import cells", "from studyctl.attempt.records import Update",
               "def f():\n    from studyctl.backends.base import names",
               "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
               "    from studyctl.definition.checkpoint.points import Point"]
    for source in refused:
        assert upward_imports("studyctl.cli.plan", ast.parse(source)), source
    for source in ("from studyctl import api", "from studyctl.api import Plan", "from studyctl.errors import UserError",
                   "from studyctl.units import format_bytes", "from studyctl.cli.common import out"):
        assert not upward_imports("studyctl.cli.plan", ast.parse(source)), source


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


# The worker's storage seam: which target a point writes (files or objects) is asked in worker/storage/ alone.
STORAGE_SEAM = ("worker.storage", "worker.objects")


def target_questions(name: str, source: ast.Module | None = None) -> list[str]:
    """Where a worker module outside the seam reads a task's `object_store` or reaches past `worker.storage`
    (and its protocol, `worker.storage.base`) to an implementation, or to `worker.objects` (the S3 client the
    object implementation wraps)."""
    found = []
    for node in ast.walk(source or tree(name)):
        if isinstance(node, ast.Attribute) and node.attr == "object_store":
            found.append(f"{name}:{node.lineno}: reads .object_store")
    for i in imports(name, source):
        if i == "worker.objects" or (i.startswith("worker.storage.") and i != "worker.storage.base"):
            found.append(f"{name}: imports {i}")
    return found


def test_only_the_storage_seam_asks_which_target_a_point_writes() -> None:
    asking = [line for m in modules() if group(m) == "worker" and not m.startswith(STORAGE_SEAM)
              for line in target_questions(m)]
    assert not asking, asking


def test_the_seam_check_finds_a_branch_on_the_target() -> None:
    refused = ["if task.object_store is None:\n    pass", "from worker.objects import ObjectStore",
               "def f():\n    from worker.storage.posix import PosixStorage"]
    for source in refused:
        assert target_questions("worker.run", ast.parse(source)), source
    assert not target_questions("worker.run", ast.parse("from worker.storage import open_storage"))


# analysis/ in three tiers: the base (its top-level modules that import no topic: cells, stats, values, the caches),
# the topic packages over it with `plots/` (shared drawing), and the assembly that joins them (results, tables,
# figures, compare, collect*, report/). Topics are derived: every sub-package but the shared drawing and the report.
ANALYSIS = "studyctl.analysis"
SHARED_DRAWING = "plots"
REPORT = "report"
NEVER_FROM_A_TOPIC = ("results", "tables", "report", "collect")  # a module named so, or starting so
# The one declared exception, topic → topic it may import: the training table flags a projection reaching past the
# fit's limit (`projection.fit.MAX_REACH`).
TOPIC_EXCEPTIONS = {("training", "projection")}


def analysis_part(name: str) -> str | None:
    """The part of analysis/ a module is in: its sub-package, or its own name at the top level."""
    parts = name.split(".")
    return parts[2] if parts[:2] == ANALYSIS.split(".") and len(parts) > 2 else None


def topics() -> set[str]:
    packages = {p.parent.name for p in (REPO / "studyctl" / "analysis").glob("*/__init__.py")}
    return packages - {SHARED_DRAWING, REPORT}


@cache
def analysis_base() -> frozenset[str]:
    """Top-level analysis modules that reach no topic, no report and no plot, directly or through others."""
    top = {m for m in modules() if analysis_part(m) and m.count(".") == 2 and modules()[m].name != "__init__.py"}
    high = topics() | {SHARED_DRAWING, REPORT}
    reached: dict[str, set[str]] = {}

    def reach(m: str) -> set[str]:
        if m not in reached:
            reached[m] = set()
            for i in imports(m) - {m}:
                reached[m] |= {i} | reach(i)
        return reached[m]

    return frozenset(m for m in top if not {analysis_part(i) for i in reach(m)} & high)


def topic_breaches(name: str, source: ast.Module | None = None) -> list[str]:
    """What a topic or `plots/` module imports beyond its own package, the base and (topics only) `plots/`."""
    own = analysis_part(name)
    may = {own} | ({SHARED_DRAWING} if own != SHARED_DRAWING else set())
    may |= {other for topic, other in TOPIC_EXCEPTIONS if topic == own}
    found = []
    for i in sorted(imports(name, source)):
        part = analysis_part(i)
        if part is None or i == ANALYSIS:
            continue
        if part.startswith(NEVER_FROM_A_TOPIC) or not (part in may or i in analysis_base()):
            found.append(f"{name} ({own}) imports {i}")
    return found


def test_topics_import_only_the_base_and_the_shared_drawing() -> None:
    assert {"mlperf", "dlio", "hardware", "training", "recovery", "projection"} <= topics()
    assert not {f"{ANALYSIS}.{n}" for n in NEVER_FROM_A_TOPIC} & analysis_base()
    breaches = [line for m in modules() if analysis_part(m) in topics() | {SHARED_DRAWING}
                for line in topic_breaches(m)]
    assert not breaches, "\n".join(breaches)


def test_the_topic_check_finds_a_topic_reaching_sideways_or_up() -> None:
    """A topic importing another topic, the assembly (results, tables, report, collect) or, for `plots/`, a topic,
    is reported; the base, `plots/` from a topic, its own package and the declared exception are not."""
    refused = {"studyctl.analysis.recovery.table": ["from studyctl.analysis.training.cells import FIGURES",
                                                    "from studyctl.analysis.results import load_rows",
                                                    "def f():\n    from studyctl.analysis.tables import Tables",
                                                    "from studyctl.analysis.report.markdown import template_env",
                                                    "import studyctl.analysis.collect"],
               "studyctl.analysis.plots.bars": ["from studyctl.analysis.hardware.table import SIMULATED_CEILING"]}
    for name, sources in refused.items():
        for source in sources:
            assert topic_breaches(name, ast.parse(source)), source
    allowed = {"studyctl.analysis.recovery.table": ["from studyctl.analysis.cells import SETTINGS",
                                                    "from studyctl.analysis.plots.style import save",
                                                    "from studyctl.analysis.recovery.rows import LAYOUT"],
               "studyctl.analysis.training.cells": ["from studyctl.analysis.projection.fit import MAX_REACH"]}
    for name, sources in allowed.items():
        for source in sources:
            assert not topic_breaches(name, ast.parse(source)), source


# definition/ in named sub-layers: the words and inputs, the checkpoint and its point, the plan, the result. A module
# imports its own sub-layer and earlier ones only. The sub-layers are derived (every sub-package of definition/), and
# every definition module is in one; their order is declared here.
DEFINITION = "studyctl.definition"
DEFINITION_LAYERS = ("inputs", "checkpoint", "planning", "result")


def definition_part(name: str) -> str | None:
    """The sub-layer of definition/ a module is in (its sub-package), or None outside definition/."""
    parts = name.split(".")
    return parts[2] if parts[:2] == DEFINITION.split(".") and len(parts) > 2 else None


def test_every_definition_module_is_in_a_sub_layer() -> None:
    packages = {p.parent.name for p in (REPO / "studyctl" / "definition").glob("*/__init__.py")}
    assert packages == set(DEFINITION_LAYERS), "declare a new sub-layer's place in DEFINITION_LAYERS"
    loose = [m for m in modules() if definition_part(m) and m.count(".") == 2 and definition_part(m) not in packages]
    assert not loose, f"modules at definition/'s top level, in no sub-layer: {loose}"


def sub_layer_breaches(name: str, source: ast.Module | None = None) -> list[str]:
    """What a definition module imports from a later sub-layer than its own."""
    own = definition_part(name)
    if own is None:
        return []
    rank = DEFINITION_LAYERS.index(own)
    return [f"{name} ({own}) imports {i} ({part})" for i in sorted(imports(name, source))
            if (part := definition_part(i)) and DEFINITION_LAYERS.index(part) > rank]


def test_definition_sub_layers_import_down() -> None:
    breaches = [line for m in modules() for line in sub_layer_breaches(m)]
    assert not breaches, "\n".join(breaches)


def test_the_sub_layer_check_finds_an_import_up() -> None:
    """The sub-layer order can fail: a checkpoint module importing the plan or the result (at module level or in a
    function) is reported; its own sub-layer and the inputs are not."""
    name = "studyctl.definition.checkpoint.points"
    for source in ("from studyctl.definition.planning.sweep import SweepFile",
                   "def f():\n    from studyctl.definition.result.result_schema import Result",
                   "from studyctl.definition.planning import expand"):
        assert sub_layer_breaches(name, ast.parse(source)), source
    for source in ("from studyctl.definition.inputs.catalog import lookup",
                   "from studyctl.definition.checkpoint.layout import Parallelism", "from studyctl.units import GIB"):
        assert not sub_layer_breaches(name, ast.parse(source)), source

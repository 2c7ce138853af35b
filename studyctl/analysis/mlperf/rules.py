"""MLPerf Storage checkpointing rule sets as data: one row per rule, the check that judges it, its parameters and
the section of the rules it comes from. `mlperf.view.judge` runs any set; no edition has code of its own.

Sources (read November 2026; quoted by section in each row):
- v2.0: mlcommons/storage v2.0-branch `Submission_guidelines.md` ("Submission guidelines" below) and
  `checkpointing/README.md` of the same round ("ckpt README").
- v3.0: mlcommons/storage `Rules.md` as it stands after the v3.0 release (its checkpointing sections 4.3-4.7
  and Table 3 are the v3.0 round's, so the published v3.0 tree validates against them; the tag v3.0 itself
  was not in the stored snapshot), and the published tree mlcommons/storage_results_v3.0 for names and shapes.
  Rules.md §4.5 ("Checkpointing Access Via Object API") is empty: the object rules below are those the v3.0
  text states for every storage API (§1.2, §4.3.x) read for objects, each saying so in its row.

Both editions keep the same four CLOSED shapes (Table 2; `catalog.MLPERF_SHAPES`), 10 writes then 10 reads,
the 3x-memory page-cache rule and results off the storage under test. They differ in: which storage APIs
checkpointing measures (v2.0 POSIX only; v3.0 also object storage), which models subset mode may run
(v2.0: the larger models, never 8B; v3.0: 8B only, storage#841), the simulated accelerators whose memory
must hold the checkpoint (v2.0 h100/a100 80 GB; v3.0 CLOSED b200 180 GB, mi355 288 GB), whether an object's
completed PUT counts as the fsync, and v3.0's declared storage-backend settings (§1.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from studyctl.errors import UserError

V2 = "v2.0 Submission guidelines"
V2_README = "v2.0 ckpt README"
V3 = "v3.0 Rules.md"


@dataclass(frozen=True)
class Rule:
    """One rule: its short name (a column of the view), the check judging it and that check's parameters."""

    name: str
    check: str  # a key of mlperf_checks.CHECKS
    source: str  # document and section
    params: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class RuleSet:
    edition: str  # "v2.0", "v3.0"
    rules: tuple[Rule, ...]
    not_judged: tuple[str, ...] = ()  # rules of the edition studyctl cannot judge from its results

    @property
    def number(self) -> str:
        """The edition as MLPerf's `rules_edition` stamp writes it ("3.0")."""
        return self.edition.removeprefix("v")


# The rules both editions state alike, as (name, check, parameters); each edition gives their sources.
COMMON: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("processes", "processes", {}),
    ("layout", "layout", {}),
    ("full size", "full_size", {}),
    ("processes per host", "per_host", {"minimum": 4}),
    ("10 writes, 10 reads", "procedure", {"writes": 10, "reads": 10}),
    ("page cache", "page_cache", {"factor": 3}),
    ("separate filesystems", "filesystems", {}),
)


def _common(sources: dict[str, str]) -> tuple[Rule, ...]:
    """The rules both editions state alike, each with this edition's source (`sources`: rule name → section)."""
    return tuple(Rule(name, check, sources[name], params) for name, check, params in COMMON)


V2_0 = RuleSet("v2.0", (
    *_common({
        "processes": f"{V2_README} 'Models' Table 2 (total processes)",
        "layout": f"{V2_README} 'Models' Table 2 (TP×PP×DP, ZeRO)",
        "full size": f"{V2_README} 'Models' Table 2 (model configurations)",
        "processes per host": f"{V2} Table: --ppn 'minimal 4' (its text: 'more than 4 GPUs')",
        "10 writes, 10 reads": f"{V2_README} 'Checkpoint write and (read) recovery'",
        "page cache": f"{V2_README} 'Clearing Caches'",
        "separate filesystems": f"{V2} checkpoint folder vs results directory"}),
    Rule("fsync", "fsync", f"{V2} 'fsync'", {"object_put_is_stable": False}),
    Rule("subset mode", "subset", f"{V2_README} 'subset' (8 processes on one host; 8B does not support it)",
         {"models": ("llama3-70b", "llama3-405b", "llama3-1t"), "processes": 8, "hosts": 1}),
    Rule("storage API", "storage_api", f"{V2} 'Object storage in a future version'; future work: object stores "
         "in CLOSED", {"apis": ("posix",)}),
    Rule("accelerator memory", "accelerator_memory", f"{V2} CLOSED: aggregate GPU memory ≥ checkpoint size",
         {"accelerators": {"h100": 80, "a100": 80}}),
), not_judged=("the mlpstorage tool runs the benchmark (studyctl is not mlpstorage)",))

V3_0 = RuleSet("v3.0", (
    *_common({
        "processes": f"{V3} §4.3.3, §4.6.1 checkpointClosedMpiProcesses, Table 2",
        "layout": f"{V3} §4.3.3 checkpointModelConfigurationReq, Table 2",
        "full size": f"{V3} §4.3.3 checkpointModelConfigurationReq, Table 2",
        "processes per host": f"{V3} §4.6.2 and Table 3 (--ppn 'minimal 4'; §4.6.2 says 'more than 4')",
        "10 writes, 10 reads": f"{V3} Table 3 --num-checkpoints-write/read (10, or 0 in the two-invocation "
                               "workflow), §4.7.1",
        "page cache": f"{V3} §4.3.1 checkpointDataSizeRatio, §4.7.1",
        "separate filesystems": f"{V3} §4.4.1-4.4.2 checkpointPathArgs / checkpointFilesystemCheck"}),
    Rule("fsync", "fsync", f"{V3} §4.3.2 checkpointFsyncVerification (an object exists only once its PUT "
         "completed: stable on completion)", {"object_put_is_stable": True}),
    Rule("subset mode", "subset", f"{V3} §4.3.5 checkpointSubsetRunValidation, §4.6.1, Table 2 (storage#841)",
         {"models": ("llama3-8b",), "processes": 8, "hosts": 1}),
    Rule("storage API", "storage_api", f"{V3} §2.1.6 storage_library for object runs; results tree: "
         "benchmark_API object", {"apis": ("posix", "object")}),
    Rule("accelerator memory", "accelerator_memory", f"{V3} §4.3.4 checkpointAggregateAcceleratorMemory, Table 3",
         {"accelerators": {"b200": 180, "mi355": 288}}),
    Rule("backend settings declared", "backend_declared", f"{V3} §1.2 storageBackendEnvVarDeclaration"),
), not_judged=("§1 the mlpstorage tool runs the benchmark (studyctl is not mlpstorage)",
               "§4.7.1 a read invocation within 30 s of the write invocation (studyctl reads in the same "
               "invocation, right after the writes)",
               "§4.7.3-4.7.4 remapping time and simultaneous read/write support (system description)"))


RULE_SETS: dict[str, RuleSet] = {s.edition: s for s in (V2_0, V3_0)}
DEFAULT_RULES = "v3.0"


def rule_set(edition: str) -> RuleSet:
    """The named rule set; anything else is a usage error naming the option and the allowed values."""
    if edition not in RULE_SETS:
        raise UserError(f"--rules {edition!r}: expected one of {', '.join(RULE_SETS)}")
    return RULE_SETS[edition]

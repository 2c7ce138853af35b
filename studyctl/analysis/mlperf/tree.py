"""A v3.0-shaped results tree per model (`studyctl mlperf STUDY --out DIR`): how far a study is from a submission.

Layout (Rules.md §2.1.27, names as in mlcommons/storage_results_v3.0; one leaf per model, from the point the
view judged nearest CLOSED):

    DIR/
      .studyctl-mlperf-tree                       marks a tree studyctl wrote (only such a DIR is replaced)
      closed/<submitter>/
        systems/<system>.yaml                     system description: null with a note where studyctl cannot know
        results/<system>/checkpointing/<model>/   <system> = <study>-<filesystem> of the model's chosen point
          studyctl_verdicts.json                  studyctl's own: each rule's verdict, why and source; the point
                                                  chosen; the blank description fields; what a submission has
                                                  that studyctl cannot make
          <YYYYMMDD_HHmmss>/                      one invocation (studyctl writes, then reads, in one)
            summary.json                          MLPerf's metric names, GB = 10^9 B (`mlperf.summary`)
            <rank>_per_epoch_stats.json           per rank: save_ckptN / load_ckptN duration and throughput
            checkpointing_<YYYYMMDD_HHmmss>_metadata.json
            provenance.json                       rules edition, tool, storage library ("unknown" where unknown)

`<submitter>` is a placeholder (studyctl does not know the organisation); a system is one filesystem of the
study (a submission's system name groups the results of one storage configuration, Rules.md §2.1.8-2.1.9).
DIR is a link to the tree, swapped atomically (`linked_tree`): a reader, or a kill -9 at any instant, finds the
old tree or the new one, and a later run removes what a killed one left. An existing DIR is replaced only when
empty or marked as studyctl's (a link, only when studyctl made it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studyctl.analysis.linked_tree import current_tree, replaced
from studyctl.analysis.mlperf.rules import RuleSet
from studyctl.analysis.mlperf.summary import metadata_json, provenance_json, rank_stats, run_datetime, summary_json
from studyctl.analysis.mlperf.sysdesc import blanks, system_description, to_yaml
from studyctl.analysis.mlperf.view import ModelVerdict, PointVerdict, Where
from studyctl.definition.result.result_schema import Result
from studyctl.errors import UserError
from studyctl.fsutil import atomic_write_json, atomic_write_text

MARKER = ".studyctl-mlperf-tree"
SUBMITTER = "SUBMITTER"
NOT_MADE = ("dlio_config/ (config.yaml, hydra.yaml, overrides.yaml): DLIO's, and studyctl is not DLIO",
            "dlio.log and checkpointing_run.stdout.log / .stderr.log: mlpstorage's logs",
            ".mlps-code-image and the code-images/ pool: mlpstorage captures its source tree",
            "systems/<system>.pdf: the site's document",
            "submission.yaml: written by mlpstorage reports reportgen")


def safe_name(text: str) -> str:
    """A POSIX file name for a submitter or system: other characters become '-' (Rules.md §2.1.1)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", text).strip(".") or "-"


@dataclass(frozen=True)
class TreePaths:
    """Every path of the tree, named once."""

    root: Path

    @property
    def org(self) -> Path:
        return self.root / "closed" / SUBMITTER

    def description(self, system: str) -> Path:
        return self.org / "systems" / f"{system}.yaml"

    def workload(self, system: str, model: str) -> Path:
        return self.org / "results" / system / "checkpointing" / safe_name(model)

    def verdicts(self, system: str, model: str) -> Path:
        return self.workload(system, model) / "studyctl_verdicts.json"

    def leaf(self, system: str, model: str, stamp: str) -> Path:
        return self.workload(system, model) / stamp


def system_name(study: str, r: Result) -> str:
    return safe_name(f"{study}-{r.point.filesystem}")


def verdicts_json(v: ModelVerdict, best: PointVerdict, rules: RuleSet, study: str, description: Any
                  ) -> dict[str, Any]:
    return {
        "rules_edition": rules.number, "study": study, "model": v.model, "status": v.status,
        "summary": f"{v.model}: {v.summary()}", "point_id": best.point_id, "point": best.label,
        "checks": [{"rule": c.rule, "verdict": c.verdict, "why": c.why, "source": c.source} for c in best.checks],
        "points": [{"point_id": p.point_id, "status": p.status,
                    "failed": [c.rule for c in p.checks if c.verdict == "fail"],
                    "unknown": [c.rule for c in p.checks if c.verdict == "unknown"]} for p in v.points],
        "not_judged": list(rules.not_judged),
        "system_description_blank": blanks(description),
        "not_made_by_studyctl": list(NOT_MADE),
    }


def _write_model(paths: TreePaths, v: ModelVerdict, rules: RuleSet, where: Where, study: str) -> None:
    """One model's leaf and verdicts, and the description of its system."""
    best = v.best
    r = best.result
    assert r is not None, "judged points carry their result"
    api, stamp, system = where.api(r), run_datetime(r), system_name(study, r)
    leaf = paths.leaf(system, v.model, stamp)
    leaf.mkdir(parents=True)
    atomic_write_json(leaf / "summary.json", summary_json(r, api))
    for rank, stats in rank_stats(r).items():
        atomic_write_json(leaf / f"{rank}_per_epoch_stats.json", stats)
    atomic_write_json(leaf / f"checkpointing_{stamp}_metadata.json", metadata_json(r, api))
    atomic_write_json(leaf / "provenance.json", provenance_json(r, rules.number, api))
    description = system_description(r, api, where.spec(r), system)
    atomic_write_json(paths.verdicts(system, v.model), verdicts_json(v, best, rules, study, description))
    paths.description(system).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(paths.description(system), "\n".join(to_yaml(description)) + "\n")


def _check_out(out: Path) -> None:
    if out.is_symlink():
        tree = current_tree(out)
        if tree is None or not (tree / MARKER).is_file():
            raise UserError(f"--out {out}: a link studyctl did not make; name a new or empty directory")
        return
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise UserError(f"--out {out}: exists and is not a tree studyctl wrote (no {MARKER}); name a new or empty "
                        "directory")


def write_tree(out: Path, study: str, verdicts: list[ModelVerdict], rules: RuleSet, where: Where) -> Path:
    """Build the tree beside `out`, then make `out` it; returns `out`."""
    _check_out(out)
    with replaced(out) as build:
        atomic_write_text(build / MARKER, f"written by studyctl mlperf --rules {rules.edition}\n")
        for v in verdicts:
            if v.points:
                _write_model(TreePaths(build), v, rules, where, study)
    return out

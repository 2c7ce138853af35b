"""The MLPerf Storage view: how far a study is from MLPerf checkpointing's CLOSED rules, and its figures in
MLPerf's units. One engine judges any rule set (`mlperf.rules.RULE_SETS`, data); the checks are in
`mlperf.checks`.

Pure: functions of result records and the facts handed in (`mlperf.checks.Where`). Figures: GB = 10^9 B; a
checkpoint's duration is the maximum over processes; its throughput the minimum over processes of
(checkpoint size / that process's duration), which is checkpoint size / duration.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import mean

from studyctl.analysis.labels import told_texts
from studyctl.analysis.mlperf.checks import CHECKS, Verdict, Where, mlperf_name
from studyctl.analysis.mlperf.rules import RuleSet
from studyctl.definition.result.result_schema import Result
from studyctl.units import GB

__all__ = ["Figures", "ModelVerdict", "PointVerdict", "RuleCheck", "Where", "figures", "judge", "mlperf_name",
           "mlperf_view"]


@dataclass(frozen=True)
class RuleCheck:
    rule: str
    verdict: Verdict
    why: str
    source: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


@dataclass(frozen=True)
class Figures:
    """One point's MLPerf figures: means over its checkpoints (None when the phase did not run)."""

    checkpoint_GB: float
    write_duration_s: float | None
    write_throughput_GBps: float | None
    read_duration_s: float | None
    read_throughput_GBps: float | None


@dataclass(frozen=True)
class PointVerdict:
    point_id: str
    label: str
    checks: list[RuleCheck]
    figures: Figures
    result: Result | None = field(default=None, repr=False, compare=False)

    def count(self, verdict: Verdict) -> int:
        return sum(1 for c in self.checks if c.verdict == verdict)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def status(self) -> Verdict:
        """pass: every rule met; unknown: none failed but some cannot be told; else fail."""
        return "fail" if self.count("fail") else ("unknown" if self.count("unknown") else "pass")


@dataclass
class ModelVerdict:
    model: str
    edition: str = ""
    points: list[PointVerdict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return any(p.passed for p in self.points)

    @property
    def status(self) -> Verdict:
        return self.best.status if self.points else "fail"

    @property
    def best(self) -> PointVerdict:
        """The point nearest a submission: fewest failed rules, then fewest unknown."""
        return min(self.points, key=lambda p: (p.count("fail"), p.count("unknown")))

    def _rules(self, verdicts: tuple[Verdict, ...]) -> list[str]:
        rules = [c.rule for c in self.points[0].checks] if self.points else []
        return [r for r in rules if all(c.verdict in verdicts for p in self.points for c in p.checks if c.rule == r)]

    def unmet(self) -> list[str]:
        """Rules every point failed."""
        return self._rules(("fail",))

    def unknown(self) -> list[str]:
        """Rules no point met, where some point's verdict is unknown."""
        return [r for r in self._rules(("fail", "unknown")) if r not in self.unmet()]

    def headline(self) -> str:
        said = {"pass": "meets CLOSED", "unknown": "meets CLOSED as far as studyctl can tell",
                "fail": "does not meet CLOSED"}[self.status]
        return f"{said} {self.edition}".rstrip()

    def reasons(self) -> str:
        """What stands between the study and CLOSED: " (no point met: ...; unknown: ...)", or ""."""
        why = [f"no point met: {', '.join(self.unmet())}"] if self.unmet() else []
        why += [f"unknown: {', '.join(self.unknown())}"] if self.unknown() else []
        return f" ({'; '.join(why)})" if why else ""

    def summary(self) -> str:
        """One line: the verdict and what stands between the study and CLOSED."""
        return self.headline() + self.reasons()


def figures(r: Result) -> Figures:
    def phase(name: str) -> tuple[float | None, float | None]:
        done = [c for c in r.checkpoints if c.phase == name and c.duration_max_s > 0]
        if not done:
            return None, None
        return (mean(c.duration_max_s for c in done), mean(c.bytes / GB / c.duration_max_s for c in done))

    write, read = phase("write"), phase("read")
    return Figures(r.sizes.written_checkpoint_bytes / GB, *write, *read)


def judge(r: Result, rules: RuleSet, where: Where, told: str = "") -> PointVerdict:
    """Every rule of the set, in its order, judged for one result; its label names the point's shape, then `told`:
    the settings that tell it from its model's other points (`labels.told_texts`)."""
    p = r.point
    checks = []
    for rule in rules.rules:
        verdict, why = CHECKS[rule.check](r, where, **rule.params)
        checks.append(RuleCheck(rule.name, verdict, why, rule.source))
    label = (f"{p.nodes}×{p.ranks_per_node} TP{p.tensor_parallel}×PP{p.pipeline_parallel} ZeRO-{p.zero_stage} "
             f"{p.filesystem} {p.io_mode} rep {p.repetition}")
    return PointVerdict(r.point_id, f"{label}, {told}" if told else label, checks, figures(r), r)


SHOWN = ("model", "nodes", "ranks_per_node", "tensor_parallel", "pipeline_parallel", "zero_stage", "filesystem",
         "io_mode")  # what a model's table names of every point (`judge`'s label)


def mlperf_view(results: Iterable[Result], rules: RuleSet, where: Where) -> list[ModelVerdict]:
    """Per model (order of first appearance), every point judged against every rule of the set."""
    grouped: dict[str, list[Result]] = {}
    for r in results:
        grouped.setdefault(r.point.model.name, []).append(r)
    views = []
    for name, mine in grouped.items():
        told = told_texts([r.point for r in mine], SHOWN)
        views.append(ModelVerdict(name, rules.edition, [judge(r, rules, where, t) for r, t in zip(mine, told,
                                                                                                   strict=True)]))
    return views

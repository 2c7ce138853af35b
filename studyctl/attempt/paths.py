"""Every file name of a study directory, in one place (the way submitit's `JobPaths` owns a job's).

    results/<study>/
        sweep.yaml  ledger.sqlite  .lock        the sweep as submitted, every attempt, the runner's lock
        ledger.sqlite-journal                   SQLite's rollback journal (kept between transactions)
        cleanup/<point_id>.<n>                  attempts whose checkpoint data may still be on disk somewhere
        slurm/                                  submitit's folder (scripts, logs, manifests)
        points/<point_id>/attempt-<n>/          task.json, result.json | error.json, stdout.log, stderr.log
        tables/  plots/  report.html  report.md what `collect` writes (tables/problems.json, tables/.cache/)
        mlperf.html  mlperf.md                  what `mlperf` writes
        compare/<other study>/                  what `compare` writes (comparison.csv/.txt, ratio.png)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# Attempt numbers run from 1; nine digits are more attempts than any study makes, and keep every number an
# SQLite integer: a directory `attempt-99999999999999999999` (or `attempt-007`, `attempt--1`) is not an attempt.
ATTEMPT_DIGITS = 9
MAX_ATTEMPT = 10**ATTEMPT_DIGITS - 1
ATTEMPT_DIR = re.compile(rf"attempt-([1-9]\d{{0,{ATTEMPT_DIGITS - 1}}})")


@dataclass(frozen=True)
class AttemptPaths:
    """The files of one attempt of one point."""

    dir: Path

    @property
    def task(self) -> Path:
        return self.dir / "task.json"

    @property
    def result(self) -> Path:
        return self.dir / "result.json"

    @property
    def error(self) -> Path:
        return self.dir / "error.json"

    @property
    def stdout(self) -> Path:
        return self.dir / "stdout.log"

    @property
    def stderr(self) -> Path:
        return self.dir / "stderr.log"


def attempt_dir_name(attempt: int) -> str:
    """3 → `attempt-3`: the directory's name, spelled here alone (`attempt_number` reads it back)."""
    return f"attempt-{attempt}"


def attempt_number(dir_name: str) -> int | None:
    """`attempt-3` → 3; anything else (`attempt-0`, `attempt-03`, a number over MAX_ATTEMPT) → None."""
    m = ATTEMPT_DIR.fullmatch(dir_name)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class StudyPaths:
    """The files of one study directory."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.sqlite"

    @property
    def ledger_side_files(self) -> tuple[Path, ...]:
        """SQLite's files beside the ledger (its journal; the WAL and WAL index of older versions): part of it."""
        return tuple(self.ledger.with_name(self.ledger.name + suffix) for suffix in ("-journal", "-wal", "-shm"))

    @property
    def sweep_copy(self) -> Path:
        return self.root / "sweep.yaml"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def slurm(self) -> Path:
        return self.root / "slurm"

    @property
    def points(self) -> Path:
        return self.root / "points"

    def point(self, point_id: str) -> Path:
        return self.points / point_id

    def attempt(self, point_id: str, attempt: int) -> AttemptPaths:
        return AttemptPaths(self.point(point_id) / attempt_dir_name(attempt))

    def attempts_on_disk(self, point_id: str) -> list[int]:
        """Attempt numbers with a directory of `point_id` (evidence: never reused for another attempt)."""
        # a plain string path: this runs for every point on every command (pathlib would double its cost)
        return sorted(n for n in map(attempt_number, self._dirs(os.path.join(self.root, "points", point_id)))
                      if n is not None)

    def point_ids_on_disk(self) -> list[str]:
        return sorted(self._dirs(self.points))

    def contains(self, path: str | Path) -> bool:
        """Whether `path`, every symlink resolved, lies inside the study directory (itself resolved)."""
        root = os.path.realpath(self.root)
        real = os.path.realpath(path)
        return real == root or real.startswith(root.rstrip("/") + "/")

    def _dirs(self, parent: str | Path) -> list[str]:
        """The directories in `parent`, by the tree's one symlink rule: a symlink counts only where it resolves
        inside the study, so nothing outside the study is ever counted or read as part of it."""
        try:
            entries = list(os.scandir(parent))
        except OSError:
            return []
        found = []
        for e in entries:
            try:
                if e.is_dir() and (not e.is_symlink() or self.contains(e.path)):
                    found.append(e.name)
            except OSError:
                continue
        return found

    @property
    def cleanup(self) -> Path:
        """One empty file per attempt that may have left checkpoint data: made before the attempt can write,
        removed once its data is gone (so a later command finishes what an earlier one could not)."""
        return self.root / "cleanup"

    def cleanup_marker(self, point_id: str, attempt: int) -> Path:
        return self.cleanup / f"{point_id}.{attempt}"

    def pending_cleanups(self) -> list[tuple[str, int]]:
        """(point_id, attempt) of every cleanup marker."""
        try:
            names = [e.name for e in os.scandir(self.cleanup) if e.is_file(follow_symlinks=False)]
        except OSError:
            return []
        found = []
        for name in names:
            point_id, _, number = name.rpartition(".")
            if point_id and number.isdigit():
                found.append((point_id, int(number)))
        return sorted(found)

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def tables_cache(self) -> Path:
        return self.tables / ".cache"

    @property
    def results_cache(self) -> Path:
        """Parsed result files (plain JSON, `analysis.result_cache`): never code."""
        return self.tables_cache / "results.json"

    @property
    def outputs_manifest(self) -> Path:
        """What the last collect wrote and from which inputs: an unchanged study is not redone."""
        return self.tables_cache / "outputs.json"

    @property
    def problems(self) -> Path:
        return self.tables / "problems.json"

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    @property
    def mlperf_html(self) -> Path:
        return self.root / "mlperf.html"

    @property
    def mlperf_md(self) -> Path:
        return self.root / "mlperf.md"

    @property
    def compare(self) -> Path:
        return self.root / "compare"

    def compared_with(self, other: str) -> Path:
        """This study against `other` (a study name): its comparison files."""
        return self.compare / other

    @property
    def collect_dirs(self) -> tuple[Path, ...]:
        """The directories `collect` writes into: each a real directory inside the study (fsutil.owned_dir)."""
        return self.tables, self.tables_cache, self.plots

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"

    def is_study(self) -> bool:
        """A ledger, or (the ledger deleted) the sweep copy a submit leaves: the ledger is rebuilt from disk."""
        return self.ledger.is_file() or self.sweep_copy.is_file()

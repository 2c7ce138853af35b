"""What the repository cites, a reader can resolve from the repository: code, templates, sweeps and the README
name features, never an issue number (nothing here resolves one), and a rule taken from a notes file is either
quoted where it is used or cited from `docs/`, never from notes that live outside the repository.

The file set is every tracked text file (`git ls-files`), less `benchmarks/RESULTS.md`: a dated log of
measurements, which may name the work it measured as history.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HISTORY = {"benchmarks/RESULTS.md"}
SELF = Path(__file__).resolve().relative_to(REPO).as_posix()  # its examples are citations on purpose
ISSUE = re.compile(r"\bissues?[\s#:-]*\d+", re.IGNORECASE)
OUTSIDE_NOTES = re.compile(r"\bshared[ /]notes\b|(?<![\w/.-])notes/[\w.-]+\.md\b", re.IGNORECASE)


def tracked_texts() -> dict[str, str]:
    """Every tracked file that is text (no NUL byte), by its path in the repository."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    texts = {}
    for name in filter(None, listed.decode().split("\0")):
        path = REPO / name
        if name in HISTORY or not path.is_file():  # a tracked file deleted in the work tree is not cited
            continue
        data = path.read_bytes()
        if b"\0" not in data:
            texts[name] = data.decode("utf-8", errors="replace")
    return texts


def citations(pattern: re.Pattern[str], texts: dict[str, str]) -> list[str]:
    """`path:line: text` of every line the pattern finds."""
    return [f"{name}:{number}: {line.strip()}" for name, text in sorted(texts.items())
            for number, line in enumerate(text.splitlines(), 1) if pattern.search(line)]


@pytest.mark.parametrize("line", ["(issue 18)", "Issue 17: accelerator step", "after issues 18/20", "issue #21",
                                  "every issue-17 branch"])
def test_an_issue_number_is_found(line: str) -> None:
    assert citations(ISSUE, {"x.py": f"a\n{line}\n"}) == [f"x.py:2: {line}"]


@pytest.mark.parametrize("line", ["the cases the issue names", "issues the end fsync", "tissue 3"])
def test_words_without_an_issue_number_pass(line: str) -> None:
    assert citations(ISSUE, {"x.py": line}) == []


@pytest.mark.parametrize("line", ["(shared notes io-limits.md)", "# shared/notes/checkpoint-model.md: sizes",
                                  "(notes/io-limits.md)", "see ../shared/notes/training-cost.md"])
def test_a_notes_file_outside_the_repository_is_found(line: str) -> None:
    assert citations(OUTSIDE_NOTES, {"x.py": line}) == [f"x.py:1: {line}"]


@pytest.mark.parametrize("line", ["(docs/io-limits.md)", "a note says why", "Rules.md notes it"])
def test_a_citation_inside_the_repository_passes(line: str) -> None:
    assert citations(OUTSIDE_NOTES, {"x.py": line}) == []


def repository_citations(pattern: re.Pattern[str]) -> str:
    """Every citation the pattern finds in the tracked files but this one, a line each."""
    return "\n".join(line for line in citations(pattern, tracked_texts()) if not line.startswith(f"{SELF}:"))


def test_the_file_set_holds_code_templates_sweeps_and_readme() -> None:
    texts = tracked_texts()
    assert {"README.md", "studyctl/api.py", "worker/run.py", SELF} <= texts.keys()
    assert any(name.startswith("templates/") for name in texts) and any(name.startswith("sweeps/") for name in texts)
    assert not HISTORY & texts.keys() and not any(name.endswith(".png") for name in texts)


def test_no_tracked_file_cites_an_issue_number() -> None:
    """Nothing in the repository resolves an issue number: a docstring names the feature it belongs to."""
    assert repository_citations(ISSUE) == ""


def test_no_tracked_file_cites_notes_outside_the_repository() -> None:
    """A rule from a notes file is quoted where it is used, or its part of the notes is in docs/ with its source."""
    assert repository_citations(OUTSIDE_NOTES) == ""

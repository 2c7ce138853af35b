"""The one reader of result.json and error.json: schema, identity, plausibility and name bounds, one reason.

collect, compare and the MLPerf view take a result only through `read_result`; the ledger's outcome of an
attempt (`attempt.outcome`) opens the same files under the same rules (`attempt.tree`). A result that is not
usable is a one-line reason naming the field, never an exception.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from studyctl.attempt.plausibility import bounded_validator, implausible
from studyctl.attempt.tree import read_regular
from studyctl.definition.inputs import names
from studyctl.definition.result.result_schema import Result, WorkerError

_SHOWN = 60  # characters of a hostile value quoted in a reason


def describe_validation(exc: ValidationError) -> str:
    """The first schema error as one line: where, what, and how many more."""
    errors = exc.errors(include_url=False)
    err = errors[0]
    if err["type"] == "json_invalid":
        return f"not valid JSON (truncated or corrupt): {err['msg']}"
    where = ".".join(str(x) for x in err["loc"]) or "(top level)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"does not match the result schema: {where}: {err['msg']}{more}"


def name_problem(field: str, value: object) -> str | None:
    """A name from a result file (it becomes a table key, a plot file name) follows the sweep files' rule."""
    return names.name_problem({field: value})


def _identity_problem(r: Result, point_id: str, attempt: int) -> str | None:
    if r.point_id != point_id:
        return f"holds point {r.point_id}, not {point_id}"
    if r.point.point_id != point_id:
        return f"its point configuration hashes to {r.point.point_id}, not {point_id}"
    if r.attempt != attempt:
        return f"holds attempt {r.attempt}, not {attempt}"
    return names.name_problem({"model": r.point.model.name, "filesystem": r.point.filesystem,
                               "filesystem record's": r.filesystem.name, "study": r.study})


def read_result(path: Path, point_id: str, attempt: int) -> tuple[Result | None, str | None]:
    """(the result, None) when `path` holds a usable result of this attempt, else (None, a one-line reason).

    The caller has checked the file with `tree.file_status` (a regular file inside the study)."""
    try:
        text = read_regular(path)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror}"
    if not text.strip():
        return None, "empty file"
    out_of_bounds: ValidationError | None = None
    try:  # the schema and every number's bound at once: a file it refuses is read again, for the reason
        result = bounded_validator().validate_json(text)
    except ValidationError as exc:
        out_of_bounds = exc
        try:
            result = Result.model_validate_json(text)
        except ValidationError as schema_exc:
            return None, describe_validation(schema_exc)
    problem = _identity_problem(result, point_id, attempt)
    if problem:
        return None, problem
    problem = implausible(result, within_bounds=out_of_bounds is None)
    if out_of_bounds is not None and not problem:  # the walk takes the same bounds: it names what was refused
        problem = describe_validation(out_of_bounds).replace("does not match the result schema: ", "")
    if problem:
        return None, f"implausible figures: {problem}"
    return result, None


def read_error(path: Path) -> tuple[str, str]:
    """(failure class, reason) from a worker error record; tolerant, since it only explains a failure."""
    try:
        err = WorkerError.model_validate_json(read_regular(path))
        return err.failure_class, err.reason
    except (OSError, ValidationError) as exc:
        return "unknown", f"error.json unreadable or invalid ({type(exc).__name__})"

"""Errors a user can fix: the CLI prints them as one line, with no traceback."""

from __future__ import annotations

import errno


class UserError(Exception):
    """Bad input or environment; `exit_code` 2 for usage errors, 1 for failures."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class StorageError(UserError):
    """The results directory cannot be written (full, read-only, quota): one line, exit 1. What the workers
    wrote is kept; the next command rebuilds the ledger's view from the result files."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 1)


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def os_error_line(exc: OSError) -> UserError:
    """An OSError as the one line a user needs: the file, what the system said, and for a full disk what to do."""
    where = f"{exc.filename}: " if exc.filename else ""
    line = f"{where}{exc.strerror or exc}"
    if exc.errno in NO_SPACE:
        return StorageError(f"{line}: the filesystem is full; results already written are kept; free space, then "
                            "'studyctl sweep status STUDY' brings the ledger up to date from them")
    return StorageError(line) if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else UserError(line, 1)


class Interrupted(KeyboardInterrupt):
    """A stop request (Ctrl-C, SIGTERM, SIGHUP, `sweep cancel`): what runs is stopped and recorded CANCELLED."""

    def __init__(self, reason: str = "interrupted by the user (Ctrl-C)", exit_code: int = 130) -> None:
        super().__init__(reason)
        self.reason = reason
        self.exit_code = exit_code

"""Errors a user can fix: the CLI prints them as one line, with no traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or environment; `exit_code` 2 for usage errors, 1 for failures."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

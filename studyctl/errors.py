"""Errors a user can fix: the CLI prints them as one line, with no traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or environment; `exit_code` 2 for usage errors, 1 for failures."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Interrupted(KeyboardInterrupt):
    """A stop request (Ctrl-C, SIGTERM, SIGHUP, `sweep cancel`): what runs is stopped and recorded CANCELLED."""

    def __init__(self, reason: str = "interrupted by the user (Ctrl-C)", exit_code: int = 130) -> None:
        super().__init__(reason)
        self.reason = reason
        self.exit_code = exit_code

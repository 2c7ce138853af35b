"""Every failure of the object store as one exception with a one-line reason: the target and the cause."""

from __future__ import annotations

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from studyctl.objstore.target import S3Target

BAD_CREDENTIALS = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"}
THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"}


class ObjectStoreError(OSError):
    """A request the store refused or could not answer; `reason` is one line naming the target and the cause;
    `code` the store's error code (`NoSuchBucket`, `403`, ...) when it gave one."""

    def __init__(self, reason: str, code: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code

    def __str__(self) -> str:
        return self.reason


def cause(error: BaseException, what: str = "") -> str:
    """The cause of a client failure in plain words (no credentials, no stack), e.g. `bad credentials (...)`."""
    if isinstance(error, ClientError):
        return _client_cause(error, what)
    if isinstance(error, NoCredentialsError):
        return "no credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE)"
    if isinstance(error, EndpointConnectionError):
        return f"endpoint unreachable (connection refused or no route{': ' + what if what else ''})"
    if isinstance(error, (ConnectionClosedError, ResponseStreamingError)):
        return f"server stopped mid-request ({what or 'a request'} cut off)"
    if isinstance(error, ReadTimeoutError):
        return f"server stopped answering ({what or 'a request'} timed out)"
    return f"{type(error).__name__}: {_first_line(str(error))}"  # any other BotoCoreError or OSError


def _client_cause(error: ClientError, what: str) -> str:
    info = error.response.get("Error", {})
    code = str(info.get("Code", ""))
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in BAD_CREDENTIALS:
        return f"bad credentials ({code})"
    if code in ("NoSuchBucket",) or (code == "404" and what == "HEAD bucket"):
        return "no such bucket"
    if code in ("AccessDenied", "AllAccessDisabled") or (code == "403" and what == "HEAD bucket"):
        return "access denied (or bad credentials)" if code == "403" else "access denied"
    if code in THROTTLED or status in (429, 503):
        return f"throttled ({code or status})"
    message = _first_line(str(info.get("Message", ""))) or "no message"
    return f"{what + ': ' if what else ''}{code or status} ({message})"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else ""


def failure(target: S3Target, error: BaseException, what: str = "",
            tried: tuple[int, float] | None = None) -> ObjectStoreError:
    """`error` of a request about `target` as an ObjectStoreError (one line: target and cause, and with `tried`
    (attempts, seconds) what was tried: `..., 5 attempts over 12.3 s`)."""
    if isinstance(error, ObjectStoreError):
        return error
    code = str(error.response.get("Error", {}).get("Code", "")) or None if isinstance(error, ClientError) else None
    attempts = f", {tried[0]} attempt{'s' * (tried[0] != 1)} over {tried[1]:.1f} s" if tried else ""
    return ObjectStoreError(f"{target.describe()}: {cause(error, what)}{attempts}", code)

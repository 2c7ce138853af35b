"""Where objects go: a bucket, a key prefix and the endpoint that serves them (never credentials)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from studyctl.objstore.limits import MIN_PART_BYTES

__all__ = ["ADDRESSING", "DEFAULT_REGION", "MIN_PART_BYTES", "S3Target"]
ADDRESSING = ("path", "virtual")
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
DEFAULT_REGION = "us-east-1"


def masked(url: str) -> str:
    """`url` with whatever sits between its scheme and its last `@` shown as `…`: a user name or password in
    it (with `/`, `:`, `@` or %-escapes, or empty) is never repeated; a URL without `@` is returned as is."""
    if "@" not in url:
        return url
    scheme = SCHEME.match(url)
    return f"{scheme.group(0) if scheme else ''}…@{url.rpartition('@')[2]}"


@dataclass(frozen=True)
class S3Target:
    """One S3 location. `endpoint` None is the SDK's own (AWS); credentials come only from the standard chain."""

    bucket: str
    prefix: str = ""
    endpoint: str | None = None
    region: str = DEFAULT_REGION
    addressing: str = "path"

    def __post_init__(self) -> None:
        if not self.bucket or "/" in self.bucket:
            raise ValueError(f"bucket {self.bucket!r}: a bucket name, without slashes")
        if self.addressing not in ADDRESSING:
            raise ValueError(f"addressing {self.addressing!r}: one of {', '.join(ADDRESSING)}")
        object.__setattr__(self, "prefix", self.prefix.strip("/"))

    @classmethod
    def from_url(cls, url: str, endpoint: str | None = None, region: str = DEFAULT_REGION,
                 addressing: str = "path") -> S3Target:
        """`s3://BUCKET[/PREFIX]` → a target; ValueError with the reason for anything else."""
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
            raise ValueError(f"{url!r}: not s3://BUCKET[/PREFIX]")
        return cls(parts.netloc, parts.path, endpoint, region, addressing)

    def key(self, relative: str) -> str:
        """The object key of `relative` below the prefix: one slash between them, none doubled or dropped."""
        rest = "/".join(p for p in relative.split("/") if p)
        return f"{self.prefix}/{rest}" if self.prefix and rest else self.prefix or rest

    def below(self, relative: str) -> S3Target:
        """The same bucket and endpoint with `relative` added to the prefix."""
        return S3Target(self.bucket, self.key(relative), self.endpoint, self.region, self.addressing)

    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def describe(self) -> str:
        """`s3://bucket/prefix at ENDPOINT` for messages (never credentials)."""
        return f"{self.url()} at {masked(self.endpoint) if self.endpoint else f'AWS ({self.region})'}"

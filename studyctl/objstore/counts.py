"""Requests one rank made in one phase, by kind: what the store was asked, beside the bytes it moved."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class RequestCounts:
    """Logical requests by kind, each counted once however many attempts it took.

    put: single-request PutObject, plus the CreateMultipartUpload and CompleteMultipartUpload of each multipart
    object (so a 40 MiB object at 16 MiB parts is put=2, part=3; a 16 MiB one is put=1, part=0); an aborted
    upload's AbortMultipartUpload counts as a delete. part: UploadPart. get: GetObject (one per ranged read).
    head: HeadObject/HeadBucket. list: ListObjectsV2 and ListMultipartUploads pages. delete: DeleteObject,
    DeleteObjects batches and AbortMultipartUpload.
    retries: attempts beyond the first, of any kind. throttled: responses 503 SlowDown or 429, retried or not.
    first_byte_s: of the phase's first GET, seconds from sending it to its first body byte.
    """

    put: int = 0
    part: int = 0
    get: int = 0
    head: int = 0
    list: int = 0
    delete: int = 0
    retries: int = 0
    throttled: int = 0
    first_byte_s: float | None = None

    def add(self, other: RequestCounts) -> None:
        """Sums `other` into this one (a phase over several calls); the phase's first byte stays the first seen."""
        for f in fields(self):
            if f.name == "first_byte_s":
                continue
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        if self.first_byte_s is None:
            self.first_byte_s = other.first_byte_s

    def requests(self) -> int:
        """Every logical request of the phase (retries not included)."""
        return self.put + self.part + self.get + self.head + self.list + self.delete

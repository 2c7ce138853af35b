"""S3's limits on one object (AWS's documented quotas, which S3-compatible stores keep): their one statement, for
plan's refusals (`studyctl.definition.checkpoint.objects`), the client's part size and the worker's check before a
PUT."""

from __future__ import annotations

from studyctl.units import GIB, MIB, TIB

MIN_PART_BYTES = 5 * MIB  # every part of a multipart upload but the last: the least part size
MAX_PART_BYTES = 5 * GIB
MAX_PARTS = 10_000  # parts of one multipart upload
MAX_OBJECT_BYTES = 5 * TIB
MAX_KEY_BYTES = 1_024  # an object key, in UTF-8

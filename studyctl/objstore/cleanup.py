"""What a point leaves in the store, removed: objects under a prefix (paginated LIST, batched DeleteObjects)
and incomplete multipart uploads (ListMultipartUploads, one abort each)."""

from __future__ import annotations

from studyctl.objstore.calls import CountedCalls
from studyctl.objstore.counts import RequestCounts
from studyctl.objstore.errors import ObjectStoreError

BATCH = 1000  # DeleteObjects takes at most 1000 keys


def _dir(prefix: str) -> str:
    """`a/b` → `a/b/`: a prefix names a folder, so `ckpt/run1` never matches `ckpt/run10`."""
    return prefix.rstrip("/") + "/" if prefix.strip("/") else ""


def delete_prefix(calls: CountedCalls, prefix: str, counts: RequestCounts) -> int:
    bucket, deleted, token = calls.target.bucket, 0, None
    while True:
        params = {"Bucket": bucket, "Prefix": _dir(prefix), "MaxKeys": BATCH}
        page = calls.call(counts, "list", "list_objects_v2", f"LIST {prefix}",
                          **({**params, "ContinuationToken": token} if token else params))
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            answer = calls.call(counts, "delete", "delete_objects", f"DELETE under {prefix}", Bucket=bucket,
                                Delete={"Objects": keys, "Quiet": True})
            errors = answer.get("Errors", [])
            if errors:
                first = errors[0]
                raise ObjectStoreError(f"{calls.target.describe()}: DELETE {first.get('Key')}: "
                                       f"{first.get('Code')} ({len(errors)} keys not deleted)")
            deleted += len(keys)
        if not page.get("IsTruncated"):
            return deleted
        token = page["NextContinuationToken"]


def listing(calls: CountedCalls, prefix: str, counts: RequestCounts) -> list[tuple[str, int]]:
    """(key, size) of every object under `prefix`, paginated LIST (ListObjectsV2 answers in key order)."""
    found: list[tuple[str, int]] = []
    token = None
    while True:
        params = {"Bucket": calls.target.bucket, "Prefix": _dir(prefix), "MaxKeys": BATCH}
        page = calls.call(counts, "list", "list_objects_v2", f"LIST {prefix}",
                          **({**params, "ContinuationToken": token} if token else params))
        found += [(o["Key"], int(o["Size"])) for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return found
        token = page["NextContinuationToken"]


def abort_uploads(calls: CountedCalls, prefix: str, counts: RequestCounts) -> int:
    bucket, aborted = calls.target.bucket, 0
    markers: dict[str, str] = {}
    while True:
        page = calls.call(counts, "list", "list_multipart_uploads", f"LIST uploads under {prefix}",
                          Bucket=bucket, Prefix=_dir(prefix), **markers)
        for upload in page.get("Uploads", []):
            calls.call(counts, "delete", "abort_multipart_upload", f"abort {upload['Key']}", Bucket=bucket,
                       Key=upload["Key"], UploadId=upload["UploadId"])
            aborted += 1
        if not page.get("IsTruncated"):
            return aborted
        markers = {"KeyMarker": page.get("NextKeyMarker", ""), "UploadIdMarker": page.get("NextUploadIdMarker", "")}

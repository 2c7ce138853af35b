"""An ended attempt's objects on an object store, removed by the next command that sees it ended.

Every request has a deadline (`objstore.calls.CLEANUP`: a store that stops answering costs a command seconds,
not minutes), and a store that could not be cleaned is not asked again by this process for `HOLD_OFF_S`: the
attempts' clean-up markers stay, and a later command tries again. A store the user did not supply
(`objstore.trust`) is never contacted at all.
"""

from __future__ import annotations

import threading
import time

from studyctl.definition.checkpoint.objects import place_target
from studyctl.definition.checkpoint.places import Place
from studyctl.objstore import trust
from studyctl.objstore.calls import CLEANUP
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.errors import ObjectStoreError
from studyctl.objstore.target import MIN_PART_BYTES, S3Target

HOLD_OFF_S = 60.0  # a store that failed is left alone this long (one command's clean-up passes are seconds apart)

Store = tuple[str | None, str]  # (endpoint, bucket)
_failed: dict[Store, tuple[float, str]] = {}  # store → (when, why), in this process
_lock = threading.Lock()


def remove_object_place(place: Place) -> str | None:
    """Abort the point's incomplete multipart uploads, then delete its objects: its key prefix only (the study's
    own `<study>.<key>/<point_id>/`, derived, never read from a file). None once done; else one line saying why
    not (the store is not the user's, or did not answer): the cleanup marker stays for a later command."""
    try:
        target = place_target(place)
    except ValueError as error:
        return f"{place.root}: {error}"
    store: Store = (target.endpoint, target.bucket)
    with _lock:
        held = _failed.get(store)
    if held is not None and time.monotonic() - held[0] < HOLD_OFF_S:
        return held[1]
    why = trust.refusal(target) or _remove(target)
    with _lock:
        if why is None:
            _failed.pop(store, None)
        else:
            _failed[store] = (time.monotonic(), why)
    return why


def _remove(target: S3Target) -> str | None:
    try:
        client = ObjectClient(target, 1, MIN_PART_BYTES, policy=CLEANUP)
    except (ObjectStoreError, ValueError) as error:
        return str(error)
    try:
        client.abort_uploads(target.prefix)
        client.delete_prefix(target.prefix)
        return None
    except ObjectStoreError as error:
        return error.reason
    finally:
        client.close()

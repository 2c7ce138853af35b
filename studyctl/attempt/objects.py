"""An ended attempt's objects on an object store, removed by the next command that sees it ended."""

from __future__ import annotations

from studyctl.definition.objects import place_target
from studyctl.definition.places import Place
from studyctl.objstore.client import ObjectClient
from studyctl.objstore.errors import ObjectStoreError
from studyctl.objstore.target import MIN_PART_BYTES


def remove_object_place(place: Place) -> bool:
    """Abort the point's incomplete multipart uploads, then delete its objects: its key prefix only (the study's
    own `<study>.<key>/<point_id>/`, derived, never read from a file). False when the store could not be asked
    (the cleanup marker stays, and the next command tries again)."""
    try:
        client = ObjectClient(place_target(place), 1, MIN_PART_BYTES)
    except (ObjectStoreError, ValueError):
        return False
    try:
        client.abort_uploads(client.target.prefix)
        client.delete_prefix(client.target.prefix)
        return True
    except ObjectStoreError:
        return False
    finally:
        client.close()

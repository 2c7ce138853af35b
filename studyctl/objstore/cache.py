"""The server's cache, for cold reads: dropped where the server is ours and can do it, and what was done said.

The project's SeaweedFS (`weed mini`) keeps no data cache of its own by default: its S3 gateway's chunk cache
(-s3.cacheCapacityMB) is 0 unless set, the filer's too, and its volume files are read through the kernel page
cache, which `drop_server_cache` drops where it may (root, /proc/sys/vm/drop_caches). Any other endpoint's
cache belongs to its operator: nothing is done and that is what is recorded.
"""

from __future__ import annotations

import os
from pathlib import Path

from studyctl.objstore.target import S3Target

LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")
DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def is_local(target: S3Target) -> bool:
    """The endpoint is on this host (the project's own server, or one like it)."""
    if not target.endpoint:
        return False
    host = target.endpoint.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
    return host in LOCAL_HOSTS


def drop_server_cache(target: S3Target) -> str:
    """Empties what can be emptied of the server's cache before a cold read; returns one line saying what was
    done (recorded with the read)."""
    if not is_local(target):
        return f"remote endpoint ({target.describe()}): server cache is the server's, not dropped"
    try:
        os.sync()
        DROP_CACHES.write_text("1\n")
    except OSError as error:
        return f"local server: no data cache of its own; page cache not dropped ({error.strerror or error})"
    return "local server: no data cache of its own; page cache of its volume files dropped (drop_caches=1)"

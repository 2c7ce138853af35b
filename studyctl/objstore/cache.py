"""The server's cache, for cold reads: emptied where the server is the project's own, and what was done said.

The project's SeaweedFS (scripts/s3-local-server.sh) holds no object data in a cache of its own: its S3
gateway's chunk cache is off (-s3.cacheCapacityMB=0), the filer keeps metadata only. Its volume files are read
through the kernel's page cache, and those pages are what `drop_server_cache` evicts (fsync, then
posix_fadvise DONTNEED on each volume file: no root needed, nothing else on the machine is touched). Any other
endpoint's cache belongs to its operator: nothing is done and that is what is recorded.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from studyctl.objstore.target import S3Target

DEFAULT_DIR = "/tmp/studyctl-s3"  # scripts/s3-local-server.sh's default for STUDYCTL_S3_DIR


def server_dir() -> Path:
    return Path(os.environ.get("STUDYCTL_S3_DIR", DEFAULT_DIR))


def read_env(directory: Path) -> dict[str, str]:
    """The variables the server script's env file exports (`export NAME=value ...`)."""
    words = shlex.split((directory / "env").read_text())
    return dict(w.split("=", 1) for w in words if "=" in w)


def local_server(target: S3Target, directory: Path | None = None) -> Path | None:
    """The data directory of the project's server when `target` is served by it, else None."""
    directory = directory or server_dir()
    try:
        endpoint = read_env(directory).get("STUDYCTL_S3_ENDPOINT")
    except OSError:
        return None
    same = target.endpoint is not None and endpoint is not None and target.endpoint.rstrip("/") == endpoint
    return directory / "data" if same and (directory / "data").is_dir() else None


def _evict(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages are not evicted: write them first
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def drop_server_cache(target: S3Target, directory: Path | None = None) -> str:
    """Empties what can be emptied of the server's cache before a cold read; one line saying what was done
    (to record with the read)."""
    data = local_server(target, directory)
    if data is None:
        return f"{target.describe()}: not the project's local server; its cache is the server's, not dropped"
    files = nbytes = 0
    for path in (p for p in data.rglob("*") if p.is_file() and not p.is_symlink()):
        try:
            nbytes += _evict(path)
            files += 1
        except OSError:
            continue  # a volume file the server just removed or rotated
    return (f"seaweedfs local ({data}): no data cache of its own (S3 chunk cache off); page cache of its "
            f"{files} files ({nbytes / 2**30:.2f} GiB) evicted (fadvise DONTNEED)")

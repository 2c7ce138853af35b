"""A small real filesystem for disk-full tests: a tmpfs mounted (as root) under the test's own directory."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def small_tmpfs(under: Path, size: str, readonly: bool = False, name: str = "tmpfs") -> Iterator[Path]:
    """`readonly`: a filesystem that exists and has room, but refuses every write (EROFS), root's too."""
    mnt = under / name
    mnt.mkdir()
    options = f"size={size}" + (",ro" if readonly else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)

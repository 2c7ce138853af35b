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


@contextmanager
def small_ext4(under: Path, size_mib: int, block_size: int = 1024) -> Iterator[Path]:
    """A real ext4 in a loop-mounted image file (as root), with no blocks reserved for root: what a small quota'd
    partition looks like (mkfs.ext4 picks 1 KiB blocks below 512 MiB). Unmounted and removed afterwards."""
    image, mnt = under / "ext4.img", under / "ext4"
    with image.open("wb") as fh:
        fh.truncate(size_mib << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-b", str(block_size), str(image)], check=True)
    mnt.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
        image.unlink(missing_ok=True)

"""What this host has, as its kernel says: cores, memory, free space, and the mount under a path.

The one place these are read, so `plan`, the local backend's refusals and the worker judge a point by the
same figures (memory is judged by what can be had now without swapping, not by the physical total).
"""

from __future__ import annotations

import os
from pathlib import Path


def cores() -> int:
    """Cores this process may run on (its affinity: a cgroup or taskset may allow fewer than the machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def total_memory() -> int | None:
    """Physical memory; None when the system will not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def available_memory() -> int | None:
    """MemAvailable (what can be had without swapping), else free physical pages; None when neither is known."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def free_and_total(path: str) -> tuple[int, int]:
    """Bytes free to unprivileged users and the filesystem's size at `path` (total 0: it reports no capacity,
    as ramfs and some FUSE filesystems do). Raises OSError when `path` cannot be examined."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def free_space(path: str) -> tuple[int | None, str]:
    """Free bytes (for unprivileged users) at `path`, and where they were read or why they were not.

    Never at a parent of a path that does not exist here: that is another filesystem (the root disk, often)."""
    if not os.path.isdir(path):
        return None, f"{path} does not exist here"
    try:
        free, total = free_and_total(path)
    except OSError as exc:
        return None, f"statvfs at {path}: {exc.strerror or exc}"
    if total == 0:  # ramfs, some FUSE: no capacity reported
        return None, f"statvfs at {path} gave no capacity"
    return free, path


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mount_of(path: str) -> dict[str, str]:
    """The /proc/self/mountinfo entry with the longest mount point that contains `path`: mount_point, fstype,
    source, mount_options ("unknown" where mountinfo cannot be read)."""
    real = os.path.realpath(path)
    best: dict[str, str] = {"mount_point": "/", "fstype": "unknown", "source": "unknown", "mount_options": ""}
    best_len = -1
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 2:
            continue
        point = _unescape(fields[4])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best_len:
            best_len = len(point)
            options = fields[5] + ("," + tail[2] if len(tail) > 2 else "")
            best = {"mount_point": point, "fstype": tail[0], "source": _unescape(tail[1]), "mount_options": options}
    return best


REPORTING = Path("/sys/module/page_reporting/parameters")
BALLOONS = Path("/sys/bus/virtio/drivers/virtio_balloon")
BALLOON_REPORTING_BIT = 5  # VIRTIO_BALLOON_F_REPORTING: the device takes the free pages the kernel reports
DAMON = Path("/sys/kernel/mm/damon/admin/kdamonds")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def memory_return() -> str | None:
    """How this host hands idle memory back to a hypervisor, as its kernel says; None where it shows none. A call
    that takes fresh memory (a page cache being filled, a snapshot's copy, a restore's tensors) costs several times
    more on memory the hypervisor took back (`benchmarks/page_reuse.py`), so its figures vary with this: free page
    reporting to a virtio balloon (blocks of 2^order pages; `min_free_ms` where the kernel has it) and DAMON
    schemes that page out memory idle a while."""
    parts = []
    order = _read(REPORTING / "page_reporting_order")
    reporting = any(len(f) > BALLOON_REPORTING_BIT and f[BALLOON_REPORTING_BIT] == "1"
                    for f in (_read(d / "features") or "" for d in BALLOONS.glob("virtio*")))
    if order is not None and order.isdigit() and reporting:  # compiled into most kernels; active with a balloon
        held = _read(REPORTING / "min_free_ms")
        parts.append(f"free page reporting of {(4 << int(order)) // 1024} MiB blocks"
                     + (f" (min_free_ms {held})" if held is not None else ""))
    for scheme in sorted(DAMON.glob("*/contexts/*/schemes/*")) if DAMON.is_dir() else []:
        age, aggr_us = _read(scheme / "access_pattern/age/min"), _read(
            scheme.parents[1] / "monitoring_attrs/intervals/aggr_us")
        if _read(scheme.parents[3] / "state") == "on" and age and aggr_us and age.isdigit() and aggr_us.isdigit():
            parts.append(f"DAMON {_read(scheme / 'action')} of memory idle {int(age) * int(aggr_us) / 1e6:g} s")
    return "; ".join(parts) or None

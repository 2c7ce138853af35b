"""How much of a restore's files sits in the page cache right before the read: the evidence that a read is cold
(0 pages resident) or may be served from memory.

Each file is mapped read-only (libc mmap, through ctypes: Python's mmap module gives no address for a read-only
mapping) and mincore(2) asks, page by page, whether the page cache holds it; at most SAMPLE_PAGES pages per rank
are asked, spread evenly over each file, so the sample costs a few mmap calls and a few thousand mincore calls
off the clock however large the checkpoint. Nothing is read: mapping a file and asking mincore faults no page in.

Linux reveals a file's page-cache state only to a process that owns the file or could open it for writing; to
others mincore reports every page resident. The checkpoint's own files are the worker's; a file it does not own
and cannot write is not sampled (the whole sample is then None: unknown, not "resident").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable
from functools import lru_cache

SAMPLE_PAGES = 4096  # per rank and restore, spread over its files
MIN_PAGES_PER_FILE = 8  # however many files a rank reads, each is asked at least this often (or all its pages)
PAGE = mmap.PAGESIZE
_MAP_FAILED = ctypes.c_void_p(-1).value

Sample = tuple[int, int]  # (pages resident, pages sampled)


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    return libc


def sample_pages(total: int, wanted: int) -> list[int]:
    """`wanted` page indices spread evenly over `total` pages (all of them when there are no more)."""
    if wanted >= total:
        return list(range(total))
    return [i * total // wanted for i in range(wanted)]


def file_sample(path: str, wanted: int) -> Sample | None:
    """(resident, sampled) of `wanted` pages spread over one file; None when this process may not learn it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() and not os.access(path, os.W_OK):
            return None
        pages = -(-st.st_size // PAGE)
        if not pages:
            return 0, 0
        libc = _libc()
        length = pages * PAGE
        addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap for the residency sample: {os.strerror(err)}", path)
        try:
            vec = ctypes.create_string_buffer(1)
            resident = 0
            picked = sample_pages(pages, wanted)
            for i in picked:
                if libc.mincore(ctypes.c_void_p(addr + i * PAGE), PAGE, vec) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"mincore: {os.strerror(err)}", path)
                resident += vec.raw[0] & 1
            return resident, len(picked)
        finally:
            libc.munmap(ctypes.c_void_p(addr), length)
    finally:
        os.close(fd)


def resident(paths: Iterable[str]) -> Sample | None:
    """One rank's sample over the files it is about to read (each once): pages resident of pages sampled; None
    when any file cannot be sampled (not this process's to ask, or gone)."""
    unique = list(dict.fromkeys(paths))
    per_file = max(MIN_PAGES_PER_FILE, SAMPLE_PAGES // max(len(unique), 1))
    got, asked = 0, 0
    for path in unique:
        try:
            one = file_sample(path, per_file)
        except OSError:
            return None
        if one is None:
            return None
        got, asked = got + one[0], asked + one[1]
    return got, asked


def total(samples: Iterable[Sample | None]) -> Sample | None:
    """Every rank's sample summed; None where any rank's is unknown (an object store's, a file not its own)."""
    got = asked = 0
    for s in samples:
        if s is None:
            return None
        got, asked = got + s[0], asked + s[1]
    return got, asked

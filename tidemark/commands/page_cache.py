"""Dropping a file's pages from the OS page cache, checked with ``mincore``, so that a
benchmark's cold read comes from the disk and not from the copy it has just written."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import numpy as np

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte))
_libc.mincore.restype = ctypes.c_int


def drop_cached_pages(path: Path) -> float:
    """Flush ``path`` to disk (only clean pages can be dropped), drop its pages with
    ``posix_fadvise(DONTNEED)``, and return the fraction still resident."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return resident_fraction(fd)
    finally:
        os.close(fd)


def resident_fraction(fd: int) -> float:
    """Fraction of the open file's pages in the page cache, by ``mincore`` on a mapping
    of it (mapping a file reads none of its pages; 0.0 for an empty file)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0.0
    pages = -(-size // mmap.PAGESIZE)
    vector = (ctypes.c_ubyte * pages)()
    # ACCESS_COPY maps the file privately and writably, which ctypes needs for an address.
    with mmap.mmap(fd, size, access=mmap.ACCESS_COPY) as mapped:
        anchor = ctypes.c_char.from_buffer(mapped)
        address = ctypes.addressof(anchor)
        del anchor  # the mapping cannot close while ctypes holds it
        if _libc.mincore(address, size, vector) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"mincore: {os.strerror(errno)}")
    return float((np.ctypeslib.as_array(vector) & 1).mean())

"""The process's memory: its resident size, and giving freed heap memory back to the system.

A model server that answers requests of varying size (prompts of 20 to 3,000 characters, KV
caches that grow with them) frees most of what each request allocated, but glibc keeps freed
chunks in its arenas and raises its mmap threshold after each large free, so the resident size
climbs request after request although nothing is held. ``malloc_trim(0)`` after each request
returns those pages: over 1,000 distinct instructions the language scorer grew 16.6% without it
and 0.3% with it, for 1.13x the time per instruction (``saycan bench memory``,
docs/results/memory.md).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

__all__ = ["release_freed_memory", "rss_mb", "trimmed"]


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None on a C library without it (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Give the heap's free pages back to the system; False where the C library cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def trimmed(handler):
    """``handler`` (a request callback) followed by :func:`release_freed_memory`, however it
    ends: what one request allocated does not stay resident after its answer."""
    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        finally:
            release_freed_memory()
    return wrapper


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size of a process in MiB (Linux /proc; NaN where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return math.nan

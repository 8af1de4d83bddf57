"""The process's memory: its resident size, and giving freed heap memory back to the system.

A model server that answers requests of varying size (prompts of 20 to 3,000 characters, KV
caches that grow with them) frees most of what each request allocated, but glibc keeps freed
chunks in its arenas and raises its mmap threshold after each large free, so the resident size
climbs request after request although nothing is held. ``malloc_trim(0)`` returns those pages.
Over 1,000 distinct instructions the language scorer grew 16.6% to 46% without it. A trim after
every request kept growth to 0.3% at 1.13x the time per instruction. A trim when RSS had grown
32 MB (:class:`HeapTrimmer`, what the nodes do) gave -1.5% at 1.07x (``saycan bench memory``,
docs/results/memory.md).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import os

__all__ = ["HeapTrimmer", "cpu_seconds", "release_freed_memory", "rss_mb", "trim_if_grown", "trimmed"]


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


class HeapTrimmer:
    """Trims only when the resident size has grown ``margin_mb`` since the last trim (or the
    first call): RSS stays within the margin of its level, and the requests in between do not
    pay for the trim and for faulting the returned pages in again."""

    def __init__(self, margin_mb: float = 32.0):
        self.margin_mb = margin_mb
        self.level: float | None = None      # RSS after the latest trim

    def __call__(self) -> bool:
        """Trim if RSS has grown; True when it trimmed."""
        rss = rss_mb()
        if math.isnan(rss):                  # no /proc: trim every time, as a plain trim would
            return release_freed_memory()
        if self.level is not None and rss - self.level < self.margin_mb:
            return False
        trimmed_now = release_freed_memory()
        self.level = rss_mb()
        return trimmed_now


#: The process's trimmer: one heap, however many services share it.
trim_if_grown = HeapTrimmer()


def trimmed(handler):
    """``handler`` (a request callback) followed by :data:`trim_if_grown`, however it ends: what
    requests allocated and freed does not pile up resident."""
    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        finally:
            trim_if_grown()
    return wrapper


def cpu_seconds(pid: int | str = "self") -> float:
    """User plus system CPU time of a process in seconds (Linux /proc; NaN where it cannot be
    read)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()    # the name may hold spaces
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return math.nan


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

"""Resident memory: the trim the nodes do after each request, and ``saycan bench memory``'s parts
(its full run, two model processes over 1,000 instructions, is the benchmark, not a test)."""
from __future__ import annotations

import math
import sys
import time

import pytest

from saycan_ros.core import memory
from saycan_ros.core.tasks import check_instruction
from saycan_ros.evaluation.bench_memory import (format_memory_result, memory_instructions,
                                                run_memory_bench)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc")
def test_freed_heap_memory_stays_resident_until_it_is_given_back():
    memory.release_freed_memory()            # what earlier tests freed does not blur the count
    before = memory.rss_mb()
    assert before > 10
    # ~200 MB of small heap blocks (below the mmap threshold), one in 64 kept: the freed ones
    # are holes in the heap that free() alone does not return
    blocks = [bytes(1000) + bytes([i % 256]) for i in range(200_000)]
    kept = blocks[::64]
    del blocks
    freed = memory.rss_mb()
    assert freed > before + 150
    assert memory.release_freed_memory() is True
    assert memory.rss_mb() < freed - 150
    assert len(kept) == 3125
    assert memory.rss_mb(pid=2 ** 31) != memory.rss_mb(pid=2 ** 31)   # NaN: no such process


def test_a_trimmed_handler_releases_however_it_ends(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "trim_if_grown", lambda: calls.append(1) or True)

    @memory.trimmed
    def handler(request, response):
        if request == "bad":
            raise ValueError("bad request")
        return response

    assert handler("ok", "answer") == "answer" and calls == [1]
    with pytest.raises(ValueError):
        handler("bad", None)
    assert calls == [1, 1] and handler.__name__ == "handler"


def test_the_heap_is_trimmed_only_when_rss_grew_by_the_margin(monkeypatch):
    rss, trims = [500.0], []
    monkeypatch.setattr(memory, "rss_mb", lambda pid="self": rss[0])

    def release():
        trims.append(rss[0])
        rss[0] -= 5.0                      # what the trim gave back
        return True

    monkeypatch.setattr(memory, "release_freed_memory", release)
    trimmer = memory.HeapTrimmer(margin_mb=32)
    assert trimmer() is True and trimmer.level == 495.0       # the first call sets the level
    for now, expected in [(505.0, False), (526.0, False), (528.0, True), (523.0, False)]:
        rss[0] = now
        assert trimmer() is expected, now
    assert trims == [500.0, 528.0] and trimmer.level == 523.0
    monkeypatch.setattr(memory, "rss_mb", lambda pid="self": float("nan"))
    assert trimmer() is True                  # no /proc: every time


def test_the_bench_instructions_are_distinct_valid_seeded_and_mixed():
    texts = memory_instructions(60, seed=4)
    assert len(texts) == len(set(texts)) == 60
    assert texts == memory_instructions(60, seed=4) != memory_instructions(60, seed=5)
    assert all(check_instruction(t) == t for t in texts)
    assert max(len(t) for t in texts) > 500                 # some fuzzed ones are long
    assert sum(t.isascii() and len(t) < 200 for t in texts) >= 40   # most are phrased


def test_the_bench_refuses_what_it_cannot_measure_and_formats_its_result(capsys):
    from saycan_ros.cli.main import main
    with pytest.raises(ValueError, match="more than the 20"):
        run_memory_bench(20)
    assert main(["bench", "memory", "--instructions", "20"]) == 2     # one line, no traceback
    assert capsys.readouterr().err.startswith("saycan bench memory: ")
    with pytest.raises(ValueError, match="unknown policies"):
        run_memory_bench(100, policies=("none", "jemalloc"))
    line = format_memory_result({
        "n": 1000, "arms": {
            "none": {"marks": [(20, 980.0), (1000, 1400.0)], "growth": 0.4286,
                     "s_per_instruction": 0.5},
            "trim": {"marks": [(20, 950.0), (1000, 955.0)], "growth": 0.0053,
                     "s_per_instruction": 0.51}},
        "time_ratios": {"trim": 1.02}})
    assert "memory none: 1000 instructions, RSS 980 -> 1400 MB (growth +42.9%)" in line
    assert "memory trim: 1000 instructions, RSS 950 -> 955 MB (growth +0.5%)" in line
    assert line.endswith("memory: trim/none time 1.02x")


def test_cpu_seconds_counts_this_process_work():
    before = memory.cpu_seconds()
    end = time.process_time() + 0.2
    while time.process_time() < end:       # burn 0.2 s of CPU
        pass
    assert memory.cpu_seconds() - before >= 0.15
    assert math.isnan(memory.cpu_seconds(pid=2 ** 31))

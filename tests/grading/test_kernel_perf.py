"""helpers.grading.kernel_perf: the speed check times both kernels in interleaved rounds and reports the spread."""

from __future__ import annotations

import time

import pytest

from helpers.grading import kernel_perf


def test_the_ratio_is_reference_time_over_yours_from_interleaved_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")  # numba timings fall back to the CPU clock
    calls: list[str] = []

    def slow() -> None:
        calls.append("you")
        time.sleep(0.004)

    def fast() -> None:
        calls.append("ref")

    ratio, needed, detail = kernel_perf.perf_ratio(slow, fast, 0.8, "copy")
    assert ratio < 0.5 and needed == 0.8
    assert f"medians of {kernel_perf.ROUNDS} interleaved rounds" in detail and detail.startswith("copy: yours ")
    switches = sum(a != b for a, b in zip(calls, calls[1:]))
    assert switches == 2 * kernel_perf.ROUNDS - 1  # ref, you, ref, you ...: one block of each per round
    faster, _, _ = kernel_perf.perf_ratio(fast, slow, 0.8, "copy")
    assert faster > 2

"""The histogram timings come in interleaved rounds: every round times each histogram in turn, the rates are
medians over the rounds with their spread, and a speed-up is paired round by round (planted timings, no GPU)."""

from __future__ import annotations

import pytest

from helpers import bench
from helpers.errors import InputError
from helpers.kernels import histogram


def test_timed_rounds_times_every_histogram_in_every_round_in_turn():
    order: list[str] = []
    planted = {"global": 8e-3, "shared": 2e-4, "torch_histc": 1.5e-3}

    def timer(name):
        return lambda: (order.append(name), planted[name])[1]

    got = bench.timed_rounds({k: timer(k) for k in planted}, rounds=5)
    assert order == ["global", "shared", "torch_histc"] * 5  # interleaved, not one histogram after the other
    assert got == {k: [v] * 5 for k, v in planted.items()}
    with pytest.raises(InputError, match="at least 2"):
        bench.timed_rounds({"a": lambda: 1.0}, rounds=1)


def test_rates_are_medians_with_the_rounds_spread_and_speedups_pair_the_rounds():
    n = 1 << 20
    # round 3 was slow for both kernels: paired, its ratio is still 40; only round 5 (shared slower) widens the spread
    timed = histogram.Timed(n, {"global": (8e-3, 8e-3, 16e-3, 8e-3, 8e-3),
                                "shared": (2e-4, 2e-4, 4e-4, 2e-4, 2.5e-4)})
    rate, s = timed.gvals("shared")
    assert rate == pytest.approx(n / 2e-4 / 1e9) and s.lo < rate <= s.hi and "5 interleaved rounds" in s.method
    ratio, sp = timed.speedup("shared", "global")
    assert ratio == pytest.approx(40.0) and sp is not None and sp.lo == pytest.approx(35.2) and sp.hi == \
        pytest.approx(40.0)
    with pytest.raises(InputError, match="took 0 s"):
        histogram.Timed(n, {"g": (0.0, 0.0)}).gvals("g")


def test_measure_checks_its_rounds_before_asking_for_a_gpu():
    with pytest.raises(InputError, match="rounds"):
        histogram.measure({"g": histogram.hist_global}, rounds=1)

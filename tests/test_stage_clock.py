"""The stage clock: a long measurement says which of its stages held the time (chapters 9 and 12)."""

from helpers import stage_clock
from helpers.stage_clock import StageClock


def test_the_stage_clock_says_where_a_measurement_spent_its_time(monkeypatch):
    now = iter([0.0, 2.0, 2.0, 8.0, 8.0, 10.0])  # start a, (a ends) start b, (b ends) start a again, line
    monkeypatch.setattr(stage_clock.time, "perf_counter", lambda: next(now))
    clock = StageClock()
    clock.start("tuning")
    clock.start("building")
    clock.start("tuning")  # a stage started again adds up
    assert clock.line("Measuring") == "Measuring took 10 s: tuning 4 s (40 %), building 6 s (60 %)"
    assert clock.line("Measuring") == "Measuring took 10 s: tuning 4 s (40 %), building 6 s (60 %)"  # stops once
    assert StageClock().line("Measuring") == "Measuring: no stage ran"


def test_stop_returns_the_seconds_of_the_stage_it_ended(monkeypatch):
    now = iter([1.0, 3.5])
    monkeypatch.setattr(stage_clock.time, "perf_counter", lambda: next(now))
    clock = StageClock()
    assert clock.stop() == 0.0  # nothing running
    clock.start("gemv")
    assert clock.stop() == 2.5 and clock.seconds == {"gemv": 2.5}

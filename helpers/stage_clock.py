"""Where a long measurement's wall time went: the seconds of each stage, in the order the stages ran.

    clock = StageClock()
    clock.start("tuning")          # ends the stage before it
    ...
    clock.start("interleaved rounds")
    ...
    print(clock.line("Measuring the engine on this GPU"))
    # 'Measuring the engine on this GPU took <total> s: tuning <s> s (<share> %), interleaved rounds <s> s (...)'

A measurement that takes minutes should say which of its parts (tuning, compiling, timing) holds the minutes, so a
run that has to get shorter knows where to cut. The clock is wall time (perf_counter), not GPU time: it includes
compiling and waiting, which is the point.

Serves: core — used by chapters 9, 12.
"""

from __future__ import annotations

import time


class StageClock:
    """Wall seconds of a measurement's stages, in the order they ran: `start(name)` ends the stage before it, and
    `line()` says where the time went (tuning, compiling and timing each have their share)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._current: tuple[str, float] | None = None

    def start(self, name: str) -> None:
        """Begin stage `name` (ending the one that runs)."""
        self.stop()
        self._current = (name, time.perf_counter())

    def stop(self) -> float:
        """End the running stage, if any (a stage started twice adds up); its seconds this time (0 if none ran)."""
        if self._current is None:
            return 0.0
        name, t0 = self._current
        took = time.perf_counter() - t0
        self.seconds[name] = self.seconds.get(name, 0.0) + took
        self._current = None
        return took

    def line(self, what: str) -> str:
        """'<what> took <total> s: <stage> <seconds> s (<share> %), ...' (stages in the order they ran)."""
        self.stop()
        total = sum(self.seconds.values())
        if not self.seconds:
            return f"{what}: no stage ran"
        return f"{what} took {total:.0f} s: " + ", ".join(
            f"{k} {v:.0f} s ({100 * v / max(total, 1e-9):.0f} %)" for k, v in self.seconds.items())

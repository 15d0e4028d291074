"""Ctrl-C, SIGTERM, SIGHUP and SIGQUIT of a grade batch: the first one stops it cleanly.

While ``stoppable()`` is active, SIGINT, SIGTERM, SIGHUP (the terminal closed, an ssh session dropped) or
SIGQUIT (Ctrl-\\) stops new submissions from starting and kills the
running workers' process groups at once (instructors.batch.jobs.stop_all); the batch then saves
what was graded, removes its scratch folders and raises ``Interrupted``, whose message is the one
line the command prints. A second signal does nothing more: the first has already done all of it.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from helpers.errors import WorkbookError
from instructors.batch import jobs

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # each would end it, scratch left behind


class Interrupted(WorkbookError):
    """A batch stopped by a signal, after `done` of `total` submissions."""

    def __init__(self, done: int, total: int, signum: int):
        self.done, self.total, self.signum = done, total, signum
        super().__init__(f"stopped after {done} of {total}; run the same command again to resume")

    def exit_status(self) -> int:
        """The shell's convention for a command ended by a signal: 128 + its number."""
        return 128 + self.signum


class Stop:
    """What the handler saw: the first signal's number (0 while none came)."""

    def __init__(self) -> None:
        self.signum = 0

    def handle(self, signum: int, frame: object) -> None:
        """The signal handler: remember the first signal and stop every worker."""
        if not self.signum:
            self.signum = signum
        jobs.stop_all()

    def check(self, done: int, total: int) -> None:
        """Raise Interrupted when a signal came."""
        if self.signum or jobs.STOP.is_set():
            raise Interrupted(done, total, self.signum or signal.SIGINT)


@contextlib.contextmanager
def stoppable() -> Iterator[Stop]:
    """Handle SIGINT, SIGTERM, SIGHUP and SIGQUIT as a clean stop while the block runs (main thread only), then restore."""
    stop = Stop()
    jobs.STOP.clear()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    before = {s: signal.signal(s, stop.handle) for s in SIGNALS}
    try:
        yield stop
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)

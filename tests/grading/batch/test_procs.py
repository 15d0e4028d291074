"""instructors.batch.procs: leftovers are killed, but never a process that a kept one starts meanwhile
(the race that killed a live worker's compiler probe, "Canary probe child process exited with code -9")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from instructors.batch import procs


def test_a_kept_process_keeps_a_child_it_starts_while_the_clean_up_runs(monkeypatch):
    me, kept, stray, late = os.getpid(), 1001, 1002, 1003
    trees = iter([{me: [kept, stray]}, {me: [kept], kept: [late]}, {me: [kept], kept: [late]}])
    monkeypatch.setattr(procs, "_children", lambda: next(trees))
    killed: list[int] = []
    monkeypatch.setattr(procs.os, "kill", lambda pid, sig: killed.append(pid))
    monkeypatch.setattr(procs, "reap", lambda pids: None)
    procs.kill_descendants(keep={kept}, rounds=2)
    assert killed == [stray]  # the old rule (a keep set read once) killed `late` in the second round


def test_leftovers_are_killed_and_kept_trees_spared():
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"
    kept = subprocess.Popen([sys.executable, "-c", code])
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    grandchild = None
    try:
        for _ in range(200):  # until its own child has started
            if procs.descendants(kept.pid):
                break
            time.sleep(0.05)
        grandchild = procs.descendants(kept.pid)[0]
        mine = set(procs.descendants()) - {kept.pid, stray.pid, grandchild}  # this test process's other children
        assert procs.kill_descendants(keep={kept.pid} | mine) == 1
        stray.wait(5)  # reaped by kill_descendants already: Popen then reads status 0
        assert not os.path.exists(f"/proc/{stray.pid}") and kept.poll() is None and os.path.exists(f"/proc/{grandchild}")
    finally:
        for p in (kept, stray):
            p.kill()
            p.wait()
        if grandchild is not None:
            try:
                os.kill(grandchild, signal.SIGKILL)
            except OSError:
                pass

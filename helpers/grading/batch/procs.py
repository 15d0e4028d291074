"""Process hygiene for grading: adopt every process a submission leaves behind, then end them all.

A worker marks itself a "child subreaper" (Linux), so that a process a student's kernel starts and
orphans (even after setsid) is re-parented to the worker instead of to init; at the end the worker
kills all its descendants. The batch does the same for workers that died.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux only); True when it worked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid for every visible process (from /proc)."""
    out = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
            out[int(p.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return out


def descendants(pid: int | None = None) -> list[int]:
    """Every descendant of `pid` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    parents = _parents()
    kids: dict[int, list[int]] = {}
    for child, parent in parents.items():
        kids.setdefault(parent, []).append(child)
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def kill_descendants(pid: int | None = None, keep: set[int] | None = None, rounds: int = 6) -> int:
    """SIGKILL every descendant of `pid` except `keep` (repeatedly, for ones forked meanwhile); return how many."""
    keep = keep or set()
    killed = 0
    for _ in range(rounds):
        found = [d for d in descendants(pid) if d not in keep]
        if not found:
            break
        for d in found:
            try:
                os.kill(d, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.05)
        reap(found)
    return killed


def reap(pids: list[int]) -> None:
    """Collect the exit status of those of `pids` that are our children and have ended (no zombies)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            pass

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


def _children() -> dict[int, list[int]]:
    """parent pid -> its children, for every visible process."""
    kids: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        kids.setdefault(parent, []).append(child)
    return kids


def _tree(pid: int, kids: dict[int, list[int]]) -> list[int]:
    """Every descendant of `pid` in a parent -> children map."""
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def descendants(pid: int | None = None) -> list[int]:
    """Every descendant of `pid` (default: this process)."""
    return _tree(os.getpid() if pid is None else pid, _children())


def kill_descendants(pid: int | None = None, keep: set[int] | None = None, rounds: int = 6) -> int:
    """SIGKILL every descendant of `pid` except the processes in `keep` and all of theirs (repeatedly, for ones
    forked meanwhile); return how many. The kept trees are read anew each round, so a process that a kept one
    starts while this runs (a live worker's kernel, its compiler's probe) is never taken for a leftover."""
    keep = keep or set()
    root = os.getpid() if pid is None else pid
    killed = 0
    for _ in range(rounds):
        kids = _children()
        spared = set(keep).union(*(_tree(k, kids) for k in keep))
        found = [d for d in _tree(root, kids) if d not in spared]
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

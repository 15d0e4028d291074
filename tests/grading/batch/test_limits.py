"""Resource limits per submission: an allocation bomb, a fork bomb, a CPU hog, a huge file and a full /tmp each
stop at their limit, the submission keeps the points its other cells earned, its feedback names the limit, and
a submission graded at the same time as the bombs notices nothing. The limits here are small (2 GiB of address space, 64
processes), so the test is fast and safe on a 2-core, 24 GiB machine; the fork bomb runs only where the
process count can be limited (a pids cgroup, or a non-root user)."""

from __future__ import annotations

import dataclasses

import pytest
from tests.support.grading import ADD, LAB, MUL, student_nb, write_exercises, write_nb, write_solution

from instructors.batch import limits, sandbox
from instructors.batch.grade import grade

ALLOC = "import numpy as np\nkeep = []\nwhile True:\n    keep.append(np.ones(2**24))"  # 128 MiB a step
BIG_FILE = "open('big.bin', 'wb').write(b'x' * (24 * 2**20))"
FULL_TMP = "open('/tmp/t.bin', 'wb').write(b'x' * (12 * 2**20))"
FORK_BOMB = "import subprocess, time\nsubprocess.Popen(['sh', '-c', 'b() { b | b & }; b'])\ntime.sleep(30)"
CPU_HOG = "while True:\n    pass"
# 20 s of CPU: the kernel's start and an allocation bomb's page faults stay under it (at 8 s, on a VM reclaiming memory in
# the background, the bomb hit the CPU limit before its 2 GiB). The CPU hog is graded in a batch of its own under
# HOG_LIMITS, whose 6 s its kernel's start (about 1 s of CPU) stays under and the hog reaches without burning 20 s of a
# busy machine's CPU. The cells get 60 s of wall time: on two busy cores a hog may have only 1/3 of one.
SMALL = limits.Resources(memory_bytes=2 * limits.GIB, cpu_seconds=20, file_bytes=16 * limits.MIB, processes=64,
                         tmp_bytes=8 * limits.MIB)
HOG_LIMITS = dataclasses.replace(SMALL, cpu_seconds=6)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Grade the bombs and an honest submission together, two at a time, under SMALL limits; the CPU hog under
    HOG_LIMITS."""
    root = tmp_path_factory.mktemp("limits")
    write_solution(root / "solutions")
    keys = write_exercises(root / "keys")
    tmp = (FULL_TMP,) if sandbox.bwrap_works() else ()  # without bubblewrap, /tmp is the machine's own
    # the file and /tmp cells run before the bomb: after it, its list still holds all but the last step's
    # headroom of the 2 GiB, and a 24 MiB write would meet the memory limit first on some runs
    cases = {"honest": (ADD, MUL), "alloc": (ADD, BIG_FILE, *tmp, ALLOC, MUL)}
    if limits.processes_enforced():
        cases["fork"] = (ADD, FORK_BOMB, MUL)
    for name, cells in cases.items():
        write_nb(root / "subs" / f"{LAB}__{name}.ipynb", student_nb(*cells))
    write_nb(root / "hog" / f"{LAB}__cpu.ipynb", student_nb(ADD, CPU_HOG, MUL))
    graded = {}
    for subs, res, jobs in ((root / "subs", SMALL, 2), (root / "hog", HOG_LIMITS, 1)):
        result = grade([subs], root / f"out-{subs.name}", solutions_dir=root / "solutions", exercises=keys,
                       cell_timeout=60, total_timeout=120, jobs=jobs, quiet=True, resources=res, time_factor=2)
        graded.update({g.submission.student: g for g in result})
    return graded


def _notes(g) -> str:
    return "\n".join(g.result.notes)


@pytest.mark.slow
def test_allocation_bomb_file_and_tmp_limits(graded: dict) -> None:
    g = graded["alloc"]
    assert g.points() == (5, 5), g.result
    bomb = 5 if sandbox.bwrap_works() else 4  # code cells: set-up, ADD, BIG_FILE, [FULL_TMP], ALLOC, MUL
    assert "code cell 3 hit the sandbox's file size (16 MiB) limit" in _notes(g)
    if sandbox.bwrap_works():
        assert "code cell 4 hit the sandbox's /tmp size (8 MiB) limit (OSError)" in _notes(g)
    assert f"code cell {bomb} hit the sandbox's memory (2 GiB) limit (MemoryError)" in _notes(g)


@pytest.mark.slow
def test_cpu_hog_stopped_by_its_cpu_limit(graded: dict) -> None:
    g = graded["cpu"]
    assert g.points() == (5, 5), g.result
    assert "code cell 3 went over the sandbox's CPU time (6 s) limit and stopped the kernel" in _notes(g)


@pytest.mark.slow
def test_fork_bomb_contained(graded: dict) -> None:
    if "fork" not in graded:
        pytest.skip("the process count cannot be limited here (root without a pids cgroup): the fork bomb would "
                    "reach the machine")
    g = graded["fork"]
    assert g.points() == (5, 5), g.result
    assert "code cell 3 went over the sandbox's process count (64) limit and stopped the kernel" in _notes(g)


@pytest.mark.slow
def test_others_notice_nothing(graded: dict) -> None:
    g = graded["honest"]
    assert g.points() == (5, 5) and not g.result.notes and not g.result.cell_errors, g.result


def test_limit_values_are_validated() -> None:
    from helpers.errors import InputError

    with pytest.raises(InputError, match="at least 0.25 GiB"):
        limits.validate(limits.Resources(memory_bytes=1000))
    with pytest.raises(InputError, match="whole number"):
        limits.validate(limits.Resources(processes=-1))
    assert limits.explain("OSError", "[Errno 28] No space left on device") == "/tmp size"
    assert limits.explain("ValueError", "bad") == ""


def test_root_sets_no_process_rlimit(monkeypatch: pytest.MonkeyPatch) -> None:
    """As root the process count is the pids group's: a process rlimit would, under bubblewrap's user namespace,
    count every process root has on the machine (other submissions' too), and is not enforced outside it."""
    res = limits.Resources(processes=64)
    monkeypatch.setattr(limits.os, "geteuid", lambda: 0)
    assert limits.launcher(res, [])[-1].endswith(",0")
    monkeypatch.setattr(limits.os, "geteuid", lambda: 1000)
    assert limits.launcher(res, [])[-1].endswith(",64")


THREADS = ("import threading\nb = threading.Barrier(121, timeout=20)\n"
           "ts = [threading.Thread(target=lambda: (bytearray(4096), b.wait()), daemon=True) for _ in range(120)]\n"
           "[t.start() for t in ts]\nb.wait()\n[t.join() for t in ts]\nprint('ok')")


def test_a_kernels_threads_fit_its_memory_limit_whatever_the_core_count(tmp_path) -> None:
    """glibc's malloc arenas (up to 8 per core, 64 MiB of address space each) are fixed in the kernel's environment;
    with the 128 that 16 cores allow, 120 threads under a 2 GiB address-space limit fail to start."""
    import subprocess
    import sys

    res = limits.Resources(memory_bytes=2 * limits.GIB)
    box = sandbox.Sandbox("plain", tmp_path, tmp_path, tmp_path, res)
    cmd = limits.launcher(res, []) + [sys.executable, "-c", THREADS]
    env = box.env()
    assert env["MALLOC_ARENA_MAX"] == "2"
    assert subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60).stdout.strip() == "ok"
    many_cores = dict(env, MALLOC_ARENA_MAX="128")  # what 16 cores allow without the setting
    done = subprocess.run(cmd, env=many_cores, capture_output=True, text=True, timeout=60)
    assert "can't start new thread" in done.stderr or "MemoryError" in done.stderr, done

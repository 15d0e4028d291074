"""Kernels are judged as kernels: a kernel's source compiles for a GPU target (compute capability 9.0) in the
checker's helper before it is replayed; whole-array numpy, Python objects and calls to plain Python are
refused with the reason; the simulator trace flags whole-slice accesses when the compile step is missing;
the course's own kernels are refused in the students' and graded copies of the package."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import numba
from numba import cuda

from helpers.grading import kernel_compile, kernel_source, traced
from helpers.grading.compare import BadAnswer

needs_compiler = pytest.mark.skipif(not kernel_compile.available(), reason="numba-cuda is not installed")
SPEC = {"the settings": 3}  # a Python object a kernel must not read


@cuda.jit
def add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@cuda.jit
def add_strided(a, b, c):
    """Another style: a grid-stride loop and a device function."""
    i = cuda.grid(1)
    while i < c.size:
        c[i] = plus(a[i], b[i])
        i += cuda.gridsize(1)


@cuda.jit(device=True)
def plus(x, y):
    return x + y


@cuda.jit
def add_numpy(a, b, c):
    c[:] = a[:] + b[:]


@cuda.jit
def add_dict(a, b, c):
    i = cuda.grid(1)
    seen = {}
    seen[i] = a[i]
    c[i] = seen[i]


@cuda.jit
def add_open(a, b, c):
    i = cuda.grid(1)
    c[i] = len(open("answers.txt").read())


def python_helper(v):
    return v + 1


@cuda.jit
def add_python_call(a, b, c):
    i = cuda.grid(1)
    c[i] = python_helper(a[i])


@cuda.jit
def add_settings(a, b, c):
    c[0] = SPEC["the settings"]


@cuda.jit
def add_forever(a, b, c):
    i = cuda.grid(1)
    while i >= 0:
        i = (i + 1) % 7


@cuda.jit
def add_huge_local(a, b, c):
    scratch = cuda.local.array(1 << 30, numba.float64)
    scratch[0] = a[1]  # 1.0: written to c only where the allocation succeeded
    c[0] = scratch[0]


def _launch(kernel):
    x = np.arange(64, dtype=np.float32)
    return traced.run_traced(kernel, math.ceil(x.size / 32), 32, (x, x, np.zeros_like(x)), 2)


@pytest.mark.parametrize("kernel", [add, add_strided])
def test_correct_kernels_compile_and_replay(kernel):
    out, trace = traced.unpack(_launch(kernel))
    assert np.array_equal(out, 2 * np.arange(64, dtype=np.float32))
    assert trace.accesses and not trace.bulk


@needs_compiler
@pytest.mark.parametrize("kernel, says", [(add_numpy, "add_numpy does not compile for a GPU"),
                                          (add_dict, "add_dict does not compile for a GPU.*setitem"),
                                          (add_open, "add_open does not compile for a GPU.*'open'")])
def test_non_kernels_fail_to_compile_with_the_reason(kernel, says):
    with pytest.raises(AssertionError, match=says) as err:
        traced.unpack(_launch(kernel))
    assert "compute capability 9.0" in str(err.value) and "single elements" in str(err.value)
    assert "driver" not in str(err.value)  # a typing error, told apart from numba's driver-init failure


@pytest.mark.parametrize("kernel, says", [(add_python_call, "python_helper, a Python function"),
                                          (add_settings, "SPEC, a Python dict")])
def test_python_objects_and_calls_are_refused_where_the_kernel_is_sent(kernel, says):
    with pytest.raises(BadAnswer, match=says):
        _launch(kernel)


@pytest.mark.skipif(not kernel_compile.address_space_capped(), reason="no address-space cap with a CUDA driver")
def test_a_kernel_that_never_ends_or_allocates_too_much_fails_alone(monkeypatch):
    traced.unpack(_launch(add))  # the helper is up
    monkeypatch.setattr(kernel_compile, "REPLAY_TIMEOUT_S", 3.0)
    with pytest.raises(AssertionError, match="ran longer than 3 s in the simulator"):
        traced.unpack(_launch(add_forever))
    out, _ = traced.unpack(_launch(add_huge_local))  # 8 GiB of local memory: its threads stop at the allocation
    assert not out.any()  # (the helper's address space is capped), nothing is written, and the helper lives on
    out, _ = traced.unpack(_launch(add))
    assert np.array_equal(out, 2 * np.arange(64, dtype=np.float32))


def test_a_compile_is_cached_per_source_and_argument_types(monkeypatch):
    traced.unpack(_launch(add))
    monkeypatch.setattr(kernel_compile, "_ask", lambda *a, **k: pytest.fail("compiled twice"))
    kernel_compile.compile_check(_launch(add)["kernel"], (np.zeros(4, np.float32),) * 3)


def test_without_the_compiler_the_check_says_so_once_and_the_trace_flags_slices(monkeypatch, capsys):
    monkeypatch.setattr(kernel_compile, "available", lambda: False)
    monkeypatch.setattr(kernel_compile, "_COMPILED", {})
    monkeypatch.setattr(kernel_compile, "_NOTED", [])
    monkeypatch.setattr(kernel_compile, "_HELPER", [])
    with pytest.raises(AssertionError, match=r"line \d+ of your kernel reads src\[:\] at once, not one element"):
        traced.unpack(_launch(add_numpy), ("src", "other", "dst"))
    out, _ = traced.unpack(_launch(add))
    assert np.array_equal(out, 2 * np.arange(64, dtype=np.float32))
    note = capsys.readouterr().err.strip().splitlines()
    assert len(note) == 1 and "GPU compile check is not available" in note[0]


def test_a_worker_that_requires_vetting_replays_no_kernel_that_did_not_compile(monkeypatch):
    monkeypatch.setattr(kernel_compile, "available", lambda: False)  # as without numba-cuda's compiler
    monkeypatch.setattr(kernel_compile, "_NOTED", ["said"])
    monkeypatch.setattr(kernel_compile, "_STRICT", [])
    monkeypatch.setattr(kernel_compile, "_VETTED", set())
    kernel_compile.require_vetting()
    monkeypatch.setattr(kernel_compile, "_ask", lambda *a, **k: pytest.fail("an unvetted kernel was replayed"))
    with pytest.raises(AssertionError, match="could not be compiled for a GPU on the grading machine"):
        traced.unpack(_launch(add))


def test_course_kernels_are_refused_in_a_copy_without_answer_keys(monkeypatch):
    from helpers.kernels import gemm

    assert kernel_source.course_kernels_allowed()  # this checkout holds the answer keys: its tests use them
    monkeypatch.setattr(kernel_source, "course_kernels_allowed", lambda: False)
    for bound in (gemm.gemm_naive, gemm.tiled(8), cuda.jit(gemm.gemm_naive.py_func)):
        with pytest.raises(BadAnswer, match="one of the course's own kernels"):
            kernel_source.describe(bound)


def test_the_graded_package_copy_refuses_a_bound_reference_kernel(tmp_path):
    from instructors.batch import release

    course = release.student_package(tmp_path / "course")
    code = ("import helpers\nfrom helpers.grading.check import CheckFailed, check\n"
            "from helpers.kernels import histogram\n"
            "try:\n    check('lab12.global_atomics', histogram.hist_global, plot=False, perf=False)\n"
            "except CheckFailed as err:\n    print(err)\n")
    # the grader's checkout later on the path, as an install of the instructors' package puts it: its answer keys
    # are not this copy's, so the copy still refuses course kernels
    path = os.pathsep.join([str(course), str(release.ROOT)])
    env = dict(os.environ, PYTHONPATH=path, NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert "one of the course's own kernels" in out.stdout, out.stdout + out.stderr


def test_the_helper_caps_its_address_space_only_without_a_cuda_driver():
    helper = kernel_compile._Helper()
    try:
        limits = open(f"/proc/{helper.proc.pid}/limits", encoding="utf-8").read()
    finally:
        helper.close()
    line = next(ln for ln in limits.splitlines() if ln.startswith("Max address space"))
    capped = str(kernel_compile.MEMORY_LIMIT) in line.split()
    assert capped == kernel_compile.address_space_capped(), line


@needs_compiler
def test_the_helper_runs_a_device_functions_python_only_once_it_compiled(monkeypatch):
    from helpers.kernels import gemm

    for cache in ("_VETTED", "_COMPILED"):  # another test in this worker may have compiled dp4a already
        monkeypatch.setattr(kernel_compile, cache, type(getattr(kernel_compile, cache))())

    data = kernel_source.describe(gemm.dp4a)
    ref = "helpers.labs.lab11_gemm_kernels.kit:run_dp4a"
    words = (np.array([0x01020304, -1], np.int64), np.array([0x05060708, 0x7F7F7F7F], np.int64), np.array([3, 0]))
    with pytest.raises(AssertionError, match="was not compiled for a GPU before it was run"):
        kernel_compile.run_in_helper(ref, data, words, {})
    assert kernel_compile.compile_check(data, (np.int32(0),) * 3, device=True)
    got = kernel_compile.run_in_helper(ref, data, words, {})
    expected = gemm.dp4a_reference(*words)
    np.testing.assert_array_equal(got["values"][0], expected)
    np.testing.assert_array_equal(got["values"][1], expected)
    with pytest.raises(AssertionError, match="your function raised"):
        kernel_compile.run_in_helper(ref, data, (np.ones((2, 2), np.int64),) * 3, {})  # rows, not words


STUDENT = '''
import math, sys, threading, time
import numpy as np
import helpers
from numba import cuda
from helpers.grading import kernel_compile, traced

kernel_compile.REPLAY_TIMEOUT_S = 600.0


@cuda.jit
def spin(a, b, c):
    i = cuda.grid(1)
    while i >= 0:
        i = (i + 1) % 7


x = np.arange(64, dtype=np.float32)
launch = traced.run_traced(spin, 2, 32, (x, x, np.zeros_like(x)), 2)
threading.Thread(target=traced.unpack, args=(launch,), daemon=True).start()
while not kernel_compile._HELPER:
    time.sleep(0.1)
print(kernel_compile._HELPER[0].proc.pid, flush=True)
time.sleep(600)
'''


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_helper_dies_with_the_students_process_in_the_middle_of_a_kernel_that_never_ends(tmp_path):
    script = tmp_path / "student.py"
    script.write_text(STUDENT, encoding="utf-8")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    helper = 0
    try:
        import select
        import time
        assert select.select([proc.stdout], [], [], 240)[0], "the check did not start its helper"
        helper = int(proc.stdout.readline())
        time.sleep(4)  # the helper is compiling, then replaying the kernel that never ends
        assert _running(helper)
        proc.kill()  # the student's process ends (a kernel restart, a closed notebook)
        proc.wait()
        end = time.monotonic() + 10
        while _running(helper) and time.monotonic() < end:
            time.sleep(0.2)
        assert not _running(helper), "the compile helper outlived the process that started it"
    finally:
        proc.kill()
        if helper and _running(helper):
            os.kill(helper, 9)

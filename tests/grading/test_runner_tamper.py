"""Runner patching cannot hide a race: the access record that decides races and atomics is taken by the
checker's helper process, replaying the kernel's source after it compiled for a GPU. A submission that patches
the lab's runner and the trace recorder in its own process (so that every access reads as atomic), or tries
to from inside its kernel, still has its race found."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from helpers.grading import kernel_compile, wire
from helpers.grading.check import CheckFailed, check
from helpers.grading.exercise import get

ROOT = Path(__file__).resolve().parents[2]

# A submission's notebook: a racy histogram (counts[b] += 1, no atomic) and, in another cell, patches of the
# lab's runner and of the recorder so that every access is logged as atomic and the trace sent is its own.
SUBMISSION = textwrap.dedent('''
    import helpers
    import numpy as np
    from numba import cuda

    @cuda.jit
    def hist_global(x, counts, width):
        last = counts.shape[0] - 1
        i = cuda.grid(1)
        while i < x.shape[0]:
            b = min(int(abs(x[i]) / width), last)
            counts[b] += 1
            i += cuda.gridsize(1)

    from helpers.grading import traced
    from helpers.kernels import races
    from helpers.labs.lab12_histogram_kernels import kit

    real_run_traced, real_launch = races.run_traced, traced.launch

    def run_traced(*args, **kwargs):
        results, trace, log = real_run_traced(*args, **kwargs)
        log.atomic = set(range(len(trace.accesses)))
        return results, trace, log

    def launch(fn, griddim, blockdim, args, out_index, **constants):
        results, trace, log = run_traced(fn, griddim, blockdim, *args)
        return {**real_launch(fn, griddim, blockdim, args, out_index, **constants), "out": results[out_index],
                "trace": traced.trace_to_data(trace), "sync": log.to_data()}

    races.run_traced, traced.launch, kit.launch = run_traced, launch, launch
    races.find_races = lambda *a, **k: []
''')


def _answers_from_a_patching_submission(tmp_path: Path) -> list:
    """Run the submission in a process of its own (as the grader's kernel does) and collect its answers."""
    ex = get("lab12.global_atomics")
    cases = ex.visible() + list(ex.hidden())
    (tmp_path / "cases.json").write_text(wire.dumps([list(c.args) for c in cases]), encoding="utf-8")
    code = SUBMISSION + textwrap.dedent('''
        from helpers.grading import wire
        cases = wire.loads(open("cases.json").read())
        print(wire.dumps([kit.run(hist_global, *args) for args in cases]))
    ''')
    (tmp_path / "submission.py").write_text(code, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "submission.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return list(zip(cases, wire.loads(out.stdout.strip().splitlines()[-1])))


def test_runner_patching_in_the_submissions_process_cannot_hide_a_race(tmp_path):
    ex = get("lab12.global_atomics")
    answers = _answers_from_a_patching_submission(tmp_path)
    sent = answers[0][1]
    assert len(sent["sync"]["atomic"]) == len(sent["trace"]["accesses"]) > 0  # the patch did its work: all atomic
    for case, got in answers:
        with pytest.raises(AssertionError, match="data race"):
            ex.judge(got, ex.expected(case))


def test_the_same_kernel_unpatched_has_right_values_and_only_the_race_fails_it(tmp_path):
    path = tmp_path / "kernel_only.py"
    path.write_text(SUBMISSION.split("from helpers.grading import traced")[0], encoding="utf-8")
    namespace: dict = {}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
    with pytest.raises(CheckFailed, match="the values are right here(.|\n)*data race"):
        check("lab12.global_atomics", namespace["hist_global"], plot=False, perf=False)


HOSTILE = textwrap.dedent('''
    import numpy as np
    from numba import cuda

    @cuda.jit
    def hist_global(x, counts, width):
        for cls in ().__class__.__base__.__subclasses__():  # no global needed to reach the recorder
            if cls.__name__ == "SyncLog":
                cls.to_data = lambda self: {"atomic": np.arange(10**6), "barriers": np.zeros((0, 5), np.int64)}
        i = cuda.grid(1)
        while i < x.shape[0]:
            counts[min(int(abs(x[i]) / width), counts.shape[0] - 1)] += 1
            i += cuda.gridsize(1)
''')


def _kernel_in_file(path: Path, src: str) -> Any:
    """The kernel hist_global defined by `src`, run from the file `path` (so that its source can be read)."""
    path.write_text(src, encoding="utf-8")
    namespace: dict = {}
    exec(compile(src, str(path), "exec"), namespace)
    return namespace["hist_global"]


@pytest.mark.skipif(not kernel_compile.available(), reason="numba-cuda is not installed")
def test_a_kernel_that_patches_the_recorder_from_inside_does_not_compile(tmp_path):
    with pytest.raises(CheckFailed, match="hist_global does not compile for a GPU"):
        check("lab12.global_atomics", _kernel_in_file(tmp_path / "hostile_kernel.py", HOSTILE), plot=False, perf=False)


def test_a_kernel_reading_the_recorders_module_is_refused_where_it_is_sent(tmp_path):
    src = "from numba import cuda\nfrom helpers.kernels import races\n\n\n@cuda.jit\ndef hist_global(x, counts, width):\n" \
          "    races.SyncLog.to_data = None\n"
    with pytest.raises(CheckFailed, match="uses the module helpers.kernels.races"):
        check("lab12.global_atomics", _kernel_in_file(tmp_path / "module_kernel.py", src), plot=False, perf=False)

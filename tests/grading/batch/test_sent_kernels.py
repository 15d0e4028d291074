"""The batch grader launches a kernel lab's kernel itself: the kernel sent (and each device function it calls)
must be defined in the submitted notebook, whatever its layout; the course's own kernel, sent by a patched
describe, is refused with one line; the launch is built from the grader's inputs, never the submission's; a
device function's values are recomputed in the compile helper, so forged ones do not pass; the lab's untouched stub
kernel is "not done yet"."""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

from helpers.grading import kernel_compile
from helpers.grading.compare import BadAnswer
from helpers.grading.exercise import get
from helpers.grading.kernel_source import RunsPython, SentKernel, describe, description
from helpers.kernels import gemm
from instructors.batch import sandbox, sent_kernels
from instructors.batch.grade import grade
from instructors.batch.runner import TestCase
from instructors.batch.sent_kernels import NOT_IN_NOTEBOOK, Notebook, check_in_notebook, describes_kernel

needs_compiler = pytest.mark.skipif(not kernel_compile.available(), reason="numba-cuda is not installed")
needs_bwrap = pytest.mark.skipif(not sandbox.bwrap_works(), reason="needs bubblewrap: the submissions here patch the "
                                 "course's code in their kernel")
ROOT = Path(__file__).resolve().parents[3]


@cuda.jit(device=True)
def twice(v):
    return 2 * v


@cuda.jit
def scale(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = twice(x[i])


# The same two functions as a student's cells hold them: other decorators, comments, blank lines, a magic.
CELLS = ['%%time\n@cuda.jit(device=True)\ndef twice(v):\n    # double it\n    return 2 * v\n',
         'import numpy as np\n!echo hi\n\n@cuda.jit(fastmath=False)\ndef scale(x, out):\n    i = cuda.grid(1)\n\n'
         '    if i < out.size:  # bounds\n        out[i] = twice(x[i])\n']


def test_a_kernel_and_its_device_function_defined_in_the_notebook_are_accepted():
    check_in_notebook(describe(scale), sent_kernels.notebook_functions(CELLS))


def test_the_course_kernel_sent_by_a_patched_describe_is_refused_in_one_line():
    defs = sent_kernels.notebook_functions(CELLS + [inspect.getsource(gemm.gemm_naive.py_func).replace(
        "gemm_naive", "my_gemm")])  # the same body under the student's own name is not the kernel sent
    with pytest.raises(BadAnswer, match=f"^{NOT_IN_NOTEBOOK}: gemm_naive ") as err:
        check_in_notebook(describe(gemm.gemm_naive), defs)
    assert "\n" not in str(err.value)


def test_a_device_function_not_in_the_notebook_is_refused():
    with pytest.raises(BadAnswer, match=f"{NOT_IN_NOTEBOOK}: twice "):
        check_in_notebook(describe(scale), sent_kernels.notebook_functions(CELLS[1:]))


def test_a_changed_body_or_malformed_data_is_refused():
    edited = CELLS[:1] + [CELLS[1].replace("twice(x[i])", "twice(x[i]) + 1")]
    with pytest.raises(BadAnswer, match=NOT_IN_NOTEBOOK):
        check_in_notebook(describe(scale), sent_kernels.notebook_functions(edited))
    hidden = describe(scale)  # a device function slipped into a tuple global is checked too
    hidden["globals"]["T"] = ["tuple", [["number", 1], ["device", describe(gemm.dp4a)]]]
    for bad in (None, {"name": "scale"}, {"name": "scale", "source": "def scale(:", "globals": {}}, hidden):
        with pytest.raises(BadAnswer, match=NOT_IN_NOTEBOOK):
            check_in_notebook(bad, sent_kernels.notebook_functions(CELLS))


TILED = textwrap.dedent('''
    @cuda.jit
    def tiled(a, out):
        i = cuda.grid(1)
        if i < TILE:
            out[i] = a[i]
''')


def _tiled(namespace: dict, tmp_path) -> object:
    """The kernel `tiled` (reads the global TILE) defined from a file, in `namespace`."""
    path = tmp_path / "tiled_kernel.py"
    path.write_text(TILED, encoding="utf-8")
    exec(compile(TILED, str(path), "exec"), namespace)
    return namespace["tiled"]


def test_a_runners_constants_fill_in_the_names_a_submission_leaves_undefined(tmp_path):
    kern = _tiled({"cuda": cuda}, tmp_path)  # TILE is not defined in the notebook
    sent = description(kern)
    assert sent["globals"]["TILE"] == ["undefined"]
    assert describe(SentKernel(sent), TILE=8)["globals"]["TILE"] == ["number", 8]
    assert describe(Notebook([TILED]).stand_in(sent), TILE=8)["globals"]["TILE"] == ["number", 8]
    with pytest.raises(BadAnswer, match="reads the name TILE, which is not defined"):
        describe(SentKernel(sent))
    defined = description(_tiled({"cuda": cuda, "TILE": 32}, tmp_path))
    assert describe(SentKernel(defined), TILE=8) == describe(_tiled({"cuda": cuda, "TILE": 32}, tmp_path), TILE=8)


def test_a_sent_kernel_has_no_python_in_the_worker():
    with pytest.raises(RunsPython):
        SentKernel(describe(twice)).py_func  # noqa: B018 - the property raises


@pytest.mark.parametrize("exercise", ["lab02.copy", "lab02.transpose", "lab03.branch_free", "lab03.block_sum",
                                      "lab11.naive", "lab11.tiled", "lab11.dp4a", "lab11.int8",
                                      "lab12.global_atomics", "lab12.shared_bins", "lab13.unpack",
                                      "lab13.warp_sum", "lab13.gemv"])
def test_every_kernel_exercise_is_launched_by_the_worker(exercise):
    assert describes_kernel(get(exercise).run)


@pytest.mark.parametrize("exercise", ["lab00.quantize", "lab04.per_channel_scale", "lab09.fix_deployment"])
def test_other_exercises_keep_their_runner(exercise):
    assert not describes_kernel(get(exercise).run)


@cuda.jit
def copy_plus_one(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = src[i] + 1.0


def test_the_launch_is_built_from_the_graders_inputs():
    ex = get("lab02.copy")
    case = ex.visible()[0]
    stand = Notebook([inspect.getsource(copy_plus_one.py_func)]).stand_in(description(copy_plus_one))
    got = Notebook.launch("lab02.copy", stand, TestCase(case.label, case.args, case.kwargs, None))
    np.testing.assert_array_equal(got["args"][0], case.args[0])
    assert got["kernel"]["name"] == "copy_plus_one"
    with pytest.raises(AssertionError):
        ex.judge(got, ex.expected(case))


@cuda.jit(device=True)
def unpack_wrong(b):
    return b & 15, b >> 4


@needs_compiler
def test_forged_device_function_values_do_not_pass():
    ex = get("lab13.unpack")
    case = ex.visible()[0]
    expected = ex.expected(case)
    cell = inspect.getsource(unpack_wrong.py_func)
    stand = Notebook([cell]).stand_in(description(unpack_wrong))
    forged = {"kernel": description(unpack_wrong), "int": expected, "uint8": expected}  # what a patched runner sends
    ex.judge(forged, expected)  # the student's own values alone would pass
    tc = TestCase(case.label, case.args, case.kwargs, expected)
    with pytest.raises(AssertionError, match="elements differ"):  # the helper's run of the wrong function
        Notebook.judge_device("lab13.unpack", "helpers.labs.lab13_weight_only_gemv.kit:run_unpack", stand, forged,
                              tc, lambda e, got, exp: get(e).judge(got, exp))


# --- end to end: lab 2's copy exercise graded by the batch grader, beside two submissions that patch its checks ---

LAB02 = "lab02_coalescing_and_transpose"
HONEST = '''@cuda.jit
def copy_kernel(src, dst):
    # a grid-stride loop, unlike the official solution
    start = cuda.grid(1)
    for i in range(start, src.size, cuda.gridsize(1)):
        dst[i] = src[i]
'''
# A wrong kernel, and a describe() that sends the course's own copy kernel instead (course kernels allowed).
SENDS_REFERENCE = '''@cuda.jit
def copy_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = 0.0

from helpers.grading import kernel_source, traced
from helpers.kernels.copy import copy_simple

_real = kernel_source.describe
kernel_source.course_kernels_allowed = lambda *a, **k: True
kernel_source.describe = traced.describe = lambda fn, *a, **k: _real(copy_simple, *a, **k)
'''
# A kernel that negates, and a runner that launches it on -x, so that its output is x.
PATCHES_INPUTS = '''@cuda.jit
def copy_kernel(src, dst):
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = -src[i]

from helpers.labs.lab02_coalescing_and_transpose import kit

_real_run = kit.run_copy
kit.run_copy = lambda fn, x: _real_run(fn, -x)
'''
SUBMISSIONS = {"honest": HONEST, "sends_reference": SENDS_REFERENCE, "patches_inputs": PATCHES_INPUTS,
               "stub": None}  # None: the generated lab's answer cell, untouched


def _copy_only(answer: str | None = None, folder: str = "solutions") -> dict:
    """Lab 2's solution (or generated lab) cut to its set-up cell and the copy exercise (its answer cell replaced by
    `answer`)."""
    nb = json.loads((ROOT / folder / f"{LAB02}.ipynb").read_text(encoding="utf-8"))
    gid = lambda c: c["metadata"].get("nbgrader", {}).get("grade_id")  # noqa: E731
    setup = next(c for c in nb["cells"] if c["cell_type"] == "code" and "helpers.start" in "".join(c["source"]))
    code = next(c for c in nb["cells"] if gid(c) == "lab02-copy_code")
    test = next(c for c in nb["cells"] if gid(c) == "lab02-copy")
    if answer is not None:
        code = dict(code, source=answer)
    return dict(nb, cells=[setup, code, test])


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Each submission's Graded row, all in one batch (calibrated on the cut solution)."""
    root = tmp_path_factory.mktemp("sent")
    (root / "solutions").mkdir()
    (root / "solutions" / f"{LAB02}.ipynb").write_text(json.dumps(_copy_only()), encoding="utf-8")
    subs = root / "subs"
    subs.mkdir()
    for name, answer in SUBMISSIONS.items():
        nb = _copy_only(answer) if answer is not None else _copy_only(folder="labs")
        (subs / f"{LAB02}__{name}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    result = grade([subs], root / "out", solutions_dir=root / "solutions", jobs=2, quiet=True)
    return {g.submission.student: g for g in result}


def _outcome(graded: dict, student: str) -> tuple[float, str]:
    """(points, message) of the copy test."""
    g = graded[student]
    assert not g.result.not_graded, g.result.not_graded
    (o,) = g.result.outcomes
    return o.points, o.message


@needs_bwrap
@pytest.mark.slow
def test_an_honest_kernel_scores_full_marks(graded):
    assert _outcome(graded, "honest") == (3.0, "passed")


@needs_bwrap
@pytest.mark.slow
def test_a_describe_that_sends_the_course_kernel_is_rejected_in_one_line(graded):
    points, message = _outcome(graded, "sends_reference")
    assert points == 0 and message.startswith(f"{NOT_IN_NOTEBOOK}: copy_simple "), message
    assert "\n" not in message and "Traceback" not in message


@needs_bwrap
@pytest.mark.slow
def test_a_runner_that_patches_the_inputs_cannot_pass_a_wrong_kernel(graded):
    points, message = _outcome(graded, "patches_inputs")
    assert points == 0 and "yours -" in message, message


@needs_bwrap
@pytest.mark.slow
def test_the_untouched_kernel_stub_is_not_done_yet(graded):
    assert _outcome(graded, "stub") == (0.0, "NotImplementedError: not done yet (the stub was not replaced)")

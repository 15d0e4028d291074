"""The kernel labs' tests, graded in the worker: the submission's kernel process sends only the description of the
student's kernel (``kernel_source.description``); the worker accepts it only when every function in it (the
kernel and the device functions it calls) is defined in a code cell of the submitted notebook, then runs the
lab's own runner here, on the grader's inputs, with that description standing in for the kernel. So neither the
kernel judged nor its inputs and launch come from the submission's process.

A runner that calls a device function from Python (lab 11's dp4a, lab 13's unpack) is run again in the compile
helper on the grader's inputs, once the description compiled for a GPU; the student's own answer is judged first,
which is where it compiles.

Serves: instructors (batch grading of labs 02, 03, 11, 12 and 13).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable
from typing import Any

from helpers.grading import kernel_compile, traced, wire
from helpers.grading.compare import BadAnswer
from helpers.grading.exercise import Case, get
from helpers.grading.kernel_source import SentKernel, describe

DESCRIPTION = "helpers.grading.kernel_source:description"  # what the kernel process is asked for
NOT_IN_NOTEBOOK = "the kernel sent for compilation is not in your notebook"
CANNOT_VET = ("the batch grader needs numba-cuda to grade a kernel lab (`make setup` installs it): it replays "
              "kernels outside the submission's sandbox, so only kernels that compiled for a GPU first")
_DESCRIBERS = (describe, traced.launch, traced.run_traced)
_MAGIC = re.compile(r"^(\s*)[%!].*$", re.MULTILINE)


def can_vet() -> bool:
    """True when kernels can be compiled for a GPU here (numba-cuda), which the worker needs before it replays one."""
    return kernel_compile.available()


def require_vetting() -> None:
    """In this worker, replay or run only kernels that compiled for a GPU first."""
    kernel_compile.require_vetting()


def describes_kernel(run: Callable | None) -> bool:
    """True when an exercise's runner sends a kernel's description (calls describe, launch or run_traced)."""
    code = getattr(run, "__code__", None)
    if code is None:
        return False
    found = [getattr(run, "__globals__", {}).get(n) for n in code.co_names]
    return any(f is d for f in found for d in _DESCRIBERS)


def _key(fn: ast.FunctionDef) -> str:
    """A def's shape, whatever its decorators, layout and comments: ast.dump without the decorators."""
    bare = copy.copy(fn)
    bare.decorator_list = []
    return ast.dump(bare)


def _cell_tree(source: str) -> ast.AST | None:
    """A code cell's syntax tree, IPython's % and ! lines read as `pass` (a %%cell magic's body as Python)."""
    for text in (source, _MAGIC.sub(r"\1pass", source)):
        try:
            return ast.parse(text)
        except SyntaxError:
            continue
    return None


def notebook_functions(cells: list[str]) -> set[str]:
    """The shapes of every function defined in the notebook's code cells (at any depth)."""
    out = set()
    for source in cells:
        tree = _cell_tree(source)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.FunctionDef):
                out.add(_key(node))
    return out


def _sent_key(data: dict) -> tuple[str, str | None]:
    """(name, shape) of a description's function; shape None when its source is not one def of that name."""
    name = str(data.get("name", "?")) if isinstance(data, dict) else "?"
    try:
        tree = ast.parse(str(data["source"]))
    except (SyntaxError, KeyError, TypeError, ValueError):
        return name, None
    fn = tree.body[0] if len(tree.body) == 1 else None
    return name, _key(fn) if isinstance(fn, ast.FunctionDef) and fn.name == name else None


def check_in_notebook(data: Any, defs: set[str]) -> None:
    """BadAnswer (one line) unless the described function and every device function it reads are in the notebook."""
    if not isinstance(data, dict) or not isinstance(data.get("globals"), dict):
        raise BadAnswer(f"{NOT_IN_NOTEBOOK}: no kernel description came back from your kernel.")
    name, key = _sent_key(data)
    if key not in defs:
        raise BadAnswer(f"{NOT_IN_NOTEBOOK}: {name} (its source matches no function defined in your code cells). "
                        "Define the kernel with def in a code cell of this notebook and pass it to the test.")
    for spec in data["globals"].values():
        _devices_in_notebook(spec, defs)


def _devices_in_notebook(spec: Any, defs: set[str]) -> None:
    """Check every device function a global's spec holds, however deep (a tuple's too)."""
    if isinstance(spec, list) and spec[:1] == ["device"] and len(spec) == 2:
        check_in_notebook(spec[1], defs)
    elif isinstance(spec, list):
        for item in spec:
            _devices_in_notebook(item, defs)


class Notebook:
    """The submitted notebook's functions, and the kernel tests run against them in the worker."""

    def __init__(self, cells: list[str]) -> None:
        self.defs = notebook_functions(cells)

    def stand_in(self, data: Any) -> SentKernel:
        """The student's kernel for the grader's runs, from its description (BadAnswer when it is refused)."""
        check_in_notebook(data, self.defs)
        return SentKernel(data)  # names it leaves undefined are the runner's constants, or refused at the launch

    @staticmethod
    def launch(exercise: str, stand: SentKernel, case: Any) -> Any:
        """The exercise's runner on the grader's own inputs (raises RunsPython when it needs the Python function)."""
        args, kwargs = wire.roundtrip((tuple(case.args), dict(case.kwargs)))
        ex = get(exercise)
        return wire.roundtrip(ex.answer(stand, Case(case.label, tuple(args), dict(kwargs))))

    @staticmethod
    def judge_device(exercise: str, run_ref: str, stand: SentKernel, got: Any, case: Any,
                     judge: Callable[[str, Any, Any], None]) -> None:
        """A device function's answer: the student's, with the vetted description (it compiles here), then the
        runner's again in the compile helper on the grader's inputs."""
        data = describe(stand)
        judge(exercise, dict(got, kernel=data) if isinstance(got, dict) else got, case.expected)
        args, kwargs = wire.roundtrip((tuple(case.args), dict(case.kwargs)))
        answer = kernel_compile.run_in_helper(run_ref, data, tuple(args), dict(kwargs))
        judge(exercise, wire.roundtrip(answer), case.expected)

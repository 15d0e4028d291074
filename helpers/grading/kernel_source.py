"""A numba kernel as plain data: its source and the globals it reads, so that the grader can compile it for a
GPU and replay it in a process of its own, away from the live objects of the student's notebook.

``describe(kernel)`` runs where the kernel was written. It keeps what a GPU kernel may read: numbers
(and tuples of them), the modules numpy, math, numba and numba.cuda (and names taken from them), and
device functions (described in turn); anything else, a course kernel, or source that cannot be read is
refused with a one-line reason. ``rebuild(data, target)`` makes the function again, in the grader's
helper: "gpu" with device functions for numba's CUDA compiler, "sim" with device functions as Python.

Under the batch grader the kernel process only answers ``description(fn)``; the grader vets that data and
wraps it in a ``SentKernel``, which ``describe`` returns as it is (its constants replaced), so the lab's own
runner builds the launch in the grader's process, on the grader's inputs.

Serves: core of the kernel labs' checks (labs 02, 03, 11, 12, 13).
"""

from __future__ import annotations

import ast
import builtins
import dis
import importlib
import inspect
import linecache
import textwrap
import types
from pathlib import Path
from typing import Any

import numpy as np

from helpers.errors import InputError
from helpers.grading.compare import BadAnswer
from helpers.grading.exercise import answer_keys_present
from helpers.kernels import pytwin

COURSE = Path(__file__).resolve().parents[1]  # the helpers/ package folder
MODULES = ("numpy", "math", "numba", "numba.cuda")  # what a kernel may read as a module or take names from
_NUMBERS = (bool, int, float)
UNDEFINED = ["undefined"]  # description()'s mark of a name the kernel reads but does not define


def course_kernels_allowed() -> bool:
    """True in the instructors' copy (answer keys present); the students' and graded copies refuse course kernels."""
    return answer_keys_present()


def python_function(kern: Any) -> types.FunctionType:
    """The Python function of a numba @cuda.jit kernel or device function (pytwin's), as a student's BadAnswer."""
    try:
        return pytwin.python_function(kern)
    except InputError as err:
        raise BadAnswer(str(err)) from None


def _is_device(obj: Any) -> bool:
    """True for a numba CUDA device function, compiled or simulated."""
    if type(obj).__name__ == "FakeCUDAKernel":
        return bool(getattr(obj, "_device", False))
    options = getattr(obj, "targetoptions", None)
    return isinstance(getattr(obj, "py_func", None), types.FunctionType) and bool((options or {}).get("device"))


def _is_kernel(obj: Any) -> bool:
    """True for a numba CUDA kernel (not a device function)."""
    return type(obj).__name__ in ("FakeCUDAKernel", "CUDADispatcher") and not _is_device(obj)


def _module_name(mod: types.ModuleType) -> str | None:
    """The allowed name of a module ('numba.cuda' for the simulator's too), or None."""
    name = mod.__name__
    if name.startswith("numba.cuda"):
        return "numba.cuda"
    return name if name in MODULES else None


def _from_module(value: Any) -> list | None:
    """['attr', module, name] when value is a name of an allowed module (np.float32, math.sqrt, numba.int32)."""
    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name, v in vars(mod).items():
            if v is value and not name.startswith("_"):
                return ["attr", modname, name]
    return None


def _value(name: str, value: Any, fn_name: str, seen: set[int]) -> list:
    """One global as plain data, or BadAnswer naming what a GPU kernel cannot read."""
    if isinstance(value, types.ModuleType):
        mod = _module_name(value)
        if mod is None:
            raise BadAnswer(f"{fn_name} uses the module {value.__name__} ({name}): a GPU kernel can use only "
                            f"numba.cuda, numpy scalars and math.")
        return ["module", mod]
    if isinstance(value, _NUMBERS):
        return ["number", value]
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return ["scalar", value.dtype.str, value.item()]
    if isinstance(value, tuple) and all(isinstance(v, (*_NUMBERS, np.generic)) for v in value):
        return ["tuple", [_value(name, v, fn_name, seen) for v in value]]
    if _is_device(value):
        return ["device", describe(value, _seen=seen)]
    if _is_kernel(value):
        raise BadAnswer(f"{fn_name} calls the kernel {name}: a kernel can call device functions "
                        "(@cuda.jit(device=True)), not another kernel.")
    found = _from_module(value)
    if found is not None:
        return found
    what = "a numpy array: pass arrays as kernel arguments" if isinstance(value, np.ndarray) else \
        f"a Python {type(value).__name__}, which a GPU kernel cannot use"
    raise BadAnswer(f"{fn_name} reads the global {name}, {what}. A kernel can read numbers, numba.cuda, "
                    "numpy/math names and device functions.")


def _global_names(code: types.CodeType) -> set[str]:
    """The names a function's code loads as globals or closure variables (nested code included)."""
    names = set(code.co_freevars)
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            names.add(str(ins.argval))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _restore_cell(filename: str) -> bool:
    """Put a notebook cell's lines back into linecache after something cleared it (linecache.clearcache: seen in the
    grader's kernels on the H200, Python 3.12); IPython keeps every cell's code by its execution number."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    number = getattr(getattr(ip, "compile", None), "_filename_map", {}).get(filename)
    parsed = getattr(getattr(ip, "history_manager", None), "input_hist_parsed", [])
    if number is None or not 0 <= number < len(parsed):
        return False
    code = parsed[number]
    linecache.cache[filename] = (len(code), None, [ln + "\n" for ln in code.splitlines()], filename)
    return True


def _source(py: types.FunctionType) -> str:
    """The function's own source text, dedented (BadAnswer when Python cannot find it)."""
    for attempt in range(2):
        try:
            return textwrap.dedent(inspect.getsource(py))
        except (OSError, TypeError):
            if attempt or not _restore_cell(py.__code__.co_filename):
                break
    raise BadAnswer(f"the source of {py.__name__} cannot be read, so it cannot be compiled for a GPU: "
                    "define the kernel with def in a notebook cell or a file.")


def _course_kernel(py: types.FunctionType) -> bool:
    """True when the function's code comes from the course package (a lab's harness in its kit.py excepted)."""
    try:
        path = Path(py.__code__.co_filename).resolve()
    except (OSError, ValueError):
        return False
    harness = path.name == "kit.py" and path.parent.parent == COURSE / "labs"  # runs the student's device function
    return path.is_relative_to(COURSE) and not harness


def describe(kern: Any, _seen: set[int] | None = None, _undefined: bool = False, **constants: Any) -> dict:
    """The kernel (or device function) as plain data, with the globals in `constants` replaced.

    A SentKernel gives its own description; `_undefined` marks the names the kernel reads but does not define
    (for a runner's constants to fill in) instead of refusing them.
    """
    if isinstance(kern, SentKernel):
        return kern.described(**constants)
    py = python_function(kern)
    seen = set() if _seen is None else _seen
    if id(py) in seen:
        raise BadAnswer(f"{py.__name__} calls itself: GPU device functions cannot recurse here.")
    seen.add(id(py))
    if _course_kernel(py) and not course_kernels_allowed():
        raise BadAnswer(f"{py.__name__} is one of the course's own kernels ({py.__module__}), not yours: "
                        "write the kernel yourself in the notebook.")
    closure = dict(zip(py.__code__.co_freevars, (c.cell_contents for c in py.__closure__ or ())))
    env = {**py.__globals__, **closure, **constants}
    names = {}
    for name in sorted(_global_names(py.__code__)):
        if name in env:
            names[name] = _value(name, env[name], py.__name__, seen)
        elif _undefined:
            names[name] = list(UNDEFINED)
        elif not hasattr(builtins, name):
            raise BadAnswer(f"{py.__name__} reads the name {name}, which is not defined.")
    seen.discard(id(py))
    return {"name": py.__name__, "file": py.__code__.co_filename, "line": py.__code__.co_firstlineno,
            "source": _source(py), "globals": names}


def description(kern: Any) -> dict:
    """What the batch grader asks a submission's kernel for: describe(kern), the names it does not define marked."""
    return describe(kern, _undefined=True)


class RunsPython(Exception):
    """A runner asked for a SentKernel's Python function where there is none (the grader's worker)."""


class SentKernel:
    """A kernel known only by its (vetted) description: describe() returns it with its constants replaced.

    Its Python function (`py_func`, for runners that call a device function from Python) exists only where it
    is given: in the compile helper, never in the grader's worker (there it raises RunsPython).
    """

    def __init__(self, data: dict, py: types.FunctionType | None = None) -> None:
        self.data, self._py = data, py

    @property
    def py_func(self) -> types.FunctionType:
        """The rebuilt Python function (compile helper only)."""
        if self._py is None:
            raise RunsPython(str(self.data.get("name")))
        return self._py

    def described(self, **constants: Any) -> dict:
        """The description with `constants` replaced: the globals its code reads, as describe() would give them."""
        try:
            name, sent = str(self.data["name"]), dict(self.data["globals"])
            code = compile(_parse(self.data), "<sent kernel>", "exec")
        except (KeyError, TypeError, ValueError) as err:
            raise BadAnswer(f"the kernel's description is malformed ({type(err).__name__}: {err}).") from None
        fn = next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
        names = {}
        for g in sorted(_global_names(fn)):
            if g in constants:
                names[g] = _value(g, constants[g], name, set())
            elif g in sent and sent[g] != UNDEFINED:
                names[g] = sent[g]
            elif not hasattr(builtins, g):
                raise BadAnswer(f"{name} reads the name {g}, which is not defined.")
        return {**{k: self.data[k] for k in ("name", "file", "line", "source")}, "globals": names}


def _parse(data: dict) -> ast.Module:
    """The kernel's def alone, without decorators, defaults or annotations, at its original line numbers."""
    try:
        tree = ast.parse(str(data["source"]))
    except SyntaxError as err:
        raise BadAnswer(f"the kernel's source does not parse ({err.msg}).") from None
    fn = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(fn, ast.FunctionDef) or fn.name != data["name"]:
        raise BadAnswer("the kernel's source is not one function definition.")
    a = fn.args
    if a.defaults or any(d is not None for d in a.kw_defaults) or fn.returns or any(
            x.annotation is not None for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x):
        raise BadAnswer(f"{fn.name} has default values or annotations: a kernel's parameters are plain names.")
    fn.decorator_list = []
    ast.increment_lineno(tree, int(data["line"]) - 1)  # line 1 of the source is the function's first line
    return tree


def _global(spec: list, target: str) -> Any:
    """One global rebuilt from plain data."""
    kind = spec[0]
    if kind == "number":
        return spec[1]
    if kind == "scalar":
        return np.dtype(str(spec[1])).type(spec[2])
    if kind == "tuple":
        return tuple(_global(s, target) for s in spec[1])
    if kind in ("module", "attr"):
        if spec[1] not in MODULES or (kind == "attr" and str(spec[2]).startswith("_")):
            raise BadAnswer(f"refused the global {spec[1:]!r}.")
        mod = importlib.import_module(spec[1])
        return mod if kind == "module" else getattr(mod, str(spec[2]))
    if kind == "device":
        fn = rebuild(spec[1], target)
        if target == "sim":
            from numba.cuda.simulator.kernel import FakeCUDAKernel

            return FakeCUDAKernel(fn, device=True)
        from numba import cuda

        return cuda.jit(device=True)(fn)
    raise BadAnswer(f"unknown kind of global {kind!r}.")


def rebuild(data: dict, target: str) -> types.FunctionType:
    """The Python function again, from describe()'s data; target 'gpu' (compile) or 'sim' (the simulator)."""
    try:
        tree = _parse(data)
        env: dict[str, Any] = {"__builtins__": builtins, "__name__": "graded_kernel"}
        env.update({name: _global(spec, target) for name, spec in dict(data["globals"]).items()})
        exec(compile(tree, str(data["file"]), "exec"), env)  # noqa: S102 - defines the def only
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise BadAnswer(f"the kernel's description is malformed ({type(err).__name__}: {err}).") from None
    return env[str(data["name"])]

"""The kernels a submission hands in, read from its notebook's code cells without running any of them: for each
``check("labNN.name", fn)`` of a ranked exercise, the description of ``fn`` (its source and the globals it reads,
``helpers.grading.kernel_source``'s format) built from the cells' syntax alone. So the ranking compiles and times
only a kernel's own body, in the grader's process: none of the submission's host code (a patched timer, another
stream, a cache, a CUDA graph, a vendor call) ever runs where the timing happens.

A global is a number (a literal assigned at the top of a cell), a module or name of numpy, math, numba and
numba.cuda (from the cells' imports), or a device function defined in the notebook (described in turn); any
other name is left undefined, for the exercise's constants (TILE, MAX_BINS) to fill in at the launch.

Serves: instructors (ranking of labs 11, 12 and 13).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path

from helpers.errors import InputError
from helpers.grading.kernel_source import MODULES, UNDEFINED
from instructors.batch.sent_kernels import _cell_tree


@dataclass
class Cells:
    """What the code cells define at their top level (the last definition wins, as when run top to bottom)."""

    path: str
    sources: list[str]
    defs: dict[str, tuple[ast.FunctionDef, str, int]] = field(default_factory=dict)  # name: (def, source, cell)
    numbers: dict[str, list] = field(default_factory=dict)
    names: dict[str, list] = field(default_factory=dict)  # imported modules and module names
    checks: dict[str, str] = field(default_factory=dict)  # exercise: function name


def code_cells(path: Path) -> list[str]:
    """The code cells' sources of a notebook (InputError for a file that is not one)."""
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        cells = nb["cells"]
        return ["".join(c["source"]) if isinstance(c["source"], list) else str(c["source"])
                for c in cells if c.get("cell_type") == "code"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"{path} is not a readable notebook ({type(err).__name__}); pass .ipynb files.") from None


def _number(node: ast.expr) -> list | None:
    """['number', v] or ['tuple', [...]] for a literal number or tuple of numbers, else None."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, (bool, int, float)):
        return ["number", value]
    if isinstance(value, tuple) and value and all(isinstance(v, (bool, int, float)) for v in value):
        return ["tuple", [["number", v] for v in value]]
    return None


def _import(node: ast.Import | ast.ImportFrom, names: dict[str, list]) -> None:
    """Record the allowed modules and module names an import binds (others are forgotten: they shadow)."""
    if isinstance(node, ast.Import):
        for a in node.names:
            bound = a.asname or a.name.split(".")[0]
            mod = a.name if a.asname else a.name.split(".")[0]
            names.pop(bound, None)
            if mod in MODULES:
                names[bound] = ["module", mod]
        return
    mod = node.module or ""
    for a in node.names:
        bound = a.asname or a.name
        names.pop(bound, None)
        if f"{mod}.{a.name}" in MODULES:
            names[bound] = ["module", f"{mod}.{a.name}"]
        elif mod in MODULES and not a.name.startswith("_") and a.name != "*":
            names[bound] = ["attr", mod, a.name]


def read_cells(path: Path, sources: list[str] | None = None) -> Cells:
    """Parse every code cell (a cell that does not parse is skipped, as it would fail when run)."""
    cells = Cells(str(path), code_cells(path) if sources is None else sources)
    for i, src in enumerate(cells.sources):
        tree = _cell_tree(src)
        for node in tree.body if isinstance(tree, ast.Module) else ():
            if isinstance(node, ast.FunctionDef):
                cells.defs[node.name] = (node, ast.get_source_segment(src, node) or "", i)
                cells.numbers.pop(node.name, None)
                cells.names.pop(node.name, None)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                _import(node, cells.names)
            elif isinstance(node, ast.Assign):
                value = _number(node.value)
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        cells.defs.pop(t.id, None)
                        cells.names.pop(t.id, None)
                        if value is None:
                            cells.numbers.pop(t.id, None)
                        else:
                            cells.numbers[t.id] = value
            for call in ast.walk(node):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "check"
                        and len(call.args) == 2 and isinstance(call.args[0], ast.Constant)
                        and isinstance(call.args[0].value, str) and isinstance(call.args[1], ast.Name)):
                    cells.checks[call.args[0].value] = call.args[1].id
    return cells


def _is_device(fn: ast.FunctionDef) -> bool:
    """True when the def is decorated @cuda.jit(device=True) (or numba.cuda.jit(device=True))."""
    return any(isinstance(d, ast.Call) and any(k.arg == "device" and isinstance(k.value, ast.Constant)
                                               and k.value.value is True for k in d.keywords)
               for d in fn.decorator_list)


def _loaded_globals(fn: ast.FunctionDef) -> list[str]:
    """The names the function reads that it does not bind itself (parameters, assignments, loop targets)."""
    bound = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    body = [n for stmt in fn.body for n in ast.walk(stmt)]  # the decorators are not the kernel's
    bound |= {n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    return sorted({n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound)


def describe(cells: Cells, name: str, _seen: frozenset[str] = frozenset()) -> dict:
    """The description of the notebook's function `name` (InputError when the notebook defines no such function)."""
    import builtins

    if name not in cells.defs:
        raise InputError(f"{cells.path} defines no function {name} at the top of a code cell.")
    fn, source, _ = cells.defs[name]
    globs: dict[str, list] = {}
    for g in _loaded_globals(fn):
        if g in cells.numbers:
            globs[g] = cells.numbers[g]
        elif g in cells.names:
            globs[g] = cells.names[g]
        elif g in cells.defs and g not in _seen and _is_device(cells.defs[g][0]):
            globs[g] = ["device", describe(cells, g, _seen | {name})]
        elif not hasattr(builtins, g):
            globs[g] = list(UNDEFINED)
    return {"name": name, "file": cells.path, "line": fn.lineno, "source": source, "globals": globs}


def kernels(cells: Cells, exercises: list[str]) -> dict[str, dict | str]:
    """For each exercise: the description of the kernel its check() cell tests, or why there is none."""
    out: dict[str, dict | str] = {}
    for ex in exercises:
        fn = cells.checks.get(ex)
        if fn is None:
            out[ex] = f'no check("{ex}", ...) cell'
        elif fn not in cells.defs:
            out[ex] = f"{fn}, the kernel checked, is not defined by def at the top of a code cell"
        else:
            out[ex] = describe(cells, fn)
    return out


def functions(description: dict) -> list[dict]:
    """The kernel's description and those of every device function it reads, however deep."""
    out = [description]
    for spec in description.get("globals", {}).values():
        if isinstance(spec, list) and spec[:1] == ["device"]:
            out += functions(spec[1])
    return out

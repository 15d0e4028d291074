"""The ranking's static pre-check: known cheat families of kernel competitions (KernelGuard's), found in a
submission's syntax before anything is compiled or timed.

Families: ``timer`` (patched timers or events), ``stream`` (work on another stream), ``cache`` (results cached by
pointer or shape, or a kernel that reads its own output to skip work), ``vendor`` (the reference or a vendor op
called as the kernel: matmul, cuBLAS, torch, cupy, bincount/histc), ``graph`` (CUDA-graph capture and replay).

In the kernel itself (its body and its device functions) a finding **rejects** the kernel: it is not ranked. In
the notebook's other cells it **flags** the submission for the instructor: those cells never run where the
ranking times (``rank_extract`` reads the kernel from the syntax alone), so they cannot change a time, but a
student who wrote them meant to. The timing's own defences (L2 flush, fresh inputs, output poisoned and re-checked
with a secret seed, device-wide synchronisation; ``rank_gpu``) stand behind this check, not on it.

Serves: instructors (ranking of labs 11, 12 and 13).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from instructors.batch.sent_kernels import _cell_tree

FAMILIES = {"timer": "patched timers or events", "stream": "work on another stream",
            "cache": "results cached by pointer or shape", "vendor": "the reference or a vendor op as the kernel",
            "graph": "CUDA-graph replay of captured results"}

# modules whose use is a sign (the first part of a dotted name, or an import)
_MODULES = {
    "timer": ("time", "timeit", "unittest", "mock"),
    "stream": ("threading", "multiprocessing", "concurrent", "asyncio"),
    "cache": ("functools", "weakref", "shelve", "pickle"),
    "vendor": ("torch", "cupy", "cp", "cupyx", "scipy", "jax", "triton", "ctypes", "cffi", "nvmath", "cublas"),
    "graph": (),
}
# functions and attributes whose call is a sign (a bare call, or the last part of a dotted one)
_CALLS = {
    "timer": ("perf_counter", "perf_counter_ns", "monotonic", "process_time", "elapsed_time", "event_elapsed_time",
              "event", "Event", "setattr", "monkeypatch", "patch"),
    "stream": ("stream", "Stream", "external_stream", "default_stream", "per_thread_default_stream",
               "legacy_default_stream", "Thread", "Process", "ThreadPoolExecutor", "ProcessPoolExecutor"),
    "cache": ("lru_cache", "cache", "cached_property", "data_ptr", "device_ctypes_pointer", "id"),
    "vendor": ("matmul", "dot", "einsum", "tensordot", "inner", "bincount", "histc", "histogram", "linear", "_int_mm",
               "mm", "bmm", "addmm", "RawKernel", "RawModule", "load_library", "float_gemm_reference",
               "int8_gemm_reference", "gemm_naive", "tiled", "tiled_int8", "hist_global", "hist_shared",
               "numba_histogram", "gemv_w4", "wo_gemv", "dp4a_gemm_packed"),
    "graph": ("graph", "CUDAGraph", "Graph", "replay", "capture", "begin_capture", "end_capture", "capture_begin",
              "capture_end", "make_graphed_callables", "graph_launch", "graph_upload"),
}
_ATTRS = {"cache": ("__cuda_array_interface__", "device_ctypes_pointer", "ptr")}  # read, not called
# what the official notebooks call legitimately outside their kernels: the course's histogram module
_NOTEBOOK_OK = {"histogram"}


@dataclass(frozen=True)
class Finding:
    """One cheat sign: its family, where it was seen (kernel or notebook cell), what, and whether it rejects."""

    family: str
    where: str
    what: str
    rejects: bool

    def text(self) -> str:
        """'vendor (the reference or a vendor op as the kernel) in kernel gemm_tiled: calls np.dot'."""
        return f"{self.family} ({FAMILIES[self.family]}) in {self.where}: {self.what}"


def _dotted(node: ast.AST) -> str | None:
    """'cuda.event' for an Attribute chain of Names, 'x' for a Name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _families(dotted: str, ok: set[str]) -> list[str]:
    """The families of a dotted name: its first part a known module, or its last part a known call. A bare name
    in `ok` (a function the notebook or the kernel defines itself) is no sign."""
    parts = dotted.split(".")
    if len(parts) == 1 and dotted in ok:
        return []
    found = [f for f, mods in _MODULES.items() if parts[0] in mods]
    if parts[-1] not in _NOTEBOOK_OK or len(parts) == 1 or parts[0] in ("np", "numpy"):
        found += [f for f, calls in _CALLS.items() if parts[-1] in calls and f not in found]
    return found


def _signs(tree: ast.AST, ok: set[str]) -> list[tuple[str, str]]:
    """(family, what) for every known sign in a syntax tree."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            found.append(("vendor", "multiplies matrices with @ (a library matmul)"))
        elif isinstance(node, ast.Import):
            found += [(f, f"imports {a.name}") for a in node.names for f in _families(a.name.split(".")[0], set())]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            found += [(f, f"imports {mod}") for f in _families(mod.split(".")[0], set())]
            if mod.split(".")[0] in ("numpy", "numba", "math"):
                found += [(f, f"imports {a.name} from {mod}") for a in node.names
                          for f in _families(f"{mod}.{a.name}", set())]
        elif isinstance(node, ast.Global):
            found.append(("cache", f"keeps state across calls (global {', '.join(node.names)})"))
        elif isinstance(node, ast.Call):
            launch = node.func
            name = _dotted(launch.value if isinstance(launch, ast.Subscript) else launch)
            found += [(f, f"calls {name}") for f in (_families(name, ok) if name else [])]
            config = launch.slice if isinstance(launch, ast.Subscript) else None
            if isinstance(config, ast.Tuple) and len(config.elts) >= 3:
                found.append(("stream", f"launches {name or 'a kernel'} with a stream in its launch configuration"))
        elif isinstance(node, ast.Attribute) and any(node.attr in a for a in _ATTRS.values()):
            found.append(("cache", f"reads {_dotted(node) or node.attr} (a buffer's address)"))
        elif isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                name = _dotted(d.func if isinstance(d, ast.Call) else d)
                found += [(f, f"decorates {node.name} with {name}") for f in (_families(name, ok) if name else [])]
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                name = _dotted(t)
                if isinstance(t, ast.Attribute) and name:
                    found.append(("timer", f"replaces {name} (patches a library or the grader)"))
    return list(dict.fromkeys(found))


def _reads_output(fn: ast.FunctionDef, out_index: int) -> str | None:
    """What, when a kernel reads an element of its own output in a condition (skipping work on a reused buffer)."""
    params = [a.arg for a in fn.args.args]
    if not 0 <= out_index < len(params):
        return None
    out = params[out_index]
    for node in ast.walk(fn):
        test = node.test if isinstance(node, (ast.If, ast.While, ast.IfExp)) else None
        for sub in ast.walk(test) if test is not None else ():
            if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == out:
                return f"reads its output {out}[...] in a condition (work skipped on a buffer seen before)"
    return None


def kernel_findings(functions: list[dict], out_index: int) -> list[Finding]:
    """Findings in a kernel's description and its device functions' (each one rejects the kernel)."""
    found = []
    for i, data in enumerate(functions):
        where = f"{'kernel' if i == 0 else 'device function'} {data.get('name')}"
        try:
            tree = ast.parse(str(data.get("source", "")))
        except SyntaxError:
            continue  # no cheat sign: it cannot be built either, and is rejected there
        globs = dict(data.get("globals", {}))
        devices = {g for g, spec in globs.items() if isinstance(spec, list) and spec[:1] == ["device"]}
        found += [Finding(f, where, w, True) for f, w in _signs(tree, devices)]
        fn = tree.body[0] if tree.body and isinstance(tree.body[0], ast.FunctionDef) else None
        what = _reads_output(fn, out_index) if fn is not None and i == 0 else None
        if what:
            found.append(Finding("cache", where, what, True))
        for g, spec in globs.items():
            if isinstance(spec, list) and spec[:1] in (["module"], ["attr"]):
                dotted = ".".join(map(str, spec[1:]))
                found += [Finding(f, where, f"reads {g} = {dotted}", True) for f in _families(dotted, set())]
    return found


def notebook_findings(sources: list[str], kernel_names: set[str]) -> list[Finding]:
    """Findings in the notebook's code cells outside the ranked kernels and their device functions (flags); a call
    of a function the notebook defines itself is no sign (what that function does is)."""
    found = []
    trees = [_cell_tree(src) for src in sources]
    defined = {n.name for t in trees if isinstance(t, ast.Module)
               for n in ast.walk(t) if isinstance(n, ast.FunctionDef)}
    for i, tree in enumerate(trees):
        if not isinstance(tree, ast.Module):
            continue
        tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name in kernel_names)]
        found += [Finding(f, f"code cell {i + 1}", w, False) for f, w in _signs(tree, defined)]
    return found


def verdict(findings: list[Finding]) -> str:
    """'clean', 'flagged: ...' or 'rejected: ...' (the families, in FAMILIES order)."""
    rejecting = [f for f in findings if f.rejects]
    chosen = rejecting or findings
    if not chosen:
        return "clean"
    fams = [f for f in FAMILIES if any(x.family == f for x in chosen)]
    return f"{'rejected' if rejecting else 'flagged'}: {', '.join(fams)}"

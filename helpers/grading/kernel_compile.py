"""Judge a kernel as a kernel, away from the student's process: compile it for a real GPU target, then replay it
traced in the simulator, both in a helper process the checker starts (from the kernel's source, never its live
object).

The helper imports numba's real CUDA target (``NUMBA_ENABLE_CUDASIM=0``, numba-cuda with its NVVM wheels), so
``cuda.compile_ptx(..., cc=(9, 0))`` works without a GPU or driver; whole-array numpy, Python objects and calls
into plain Python fail to type there, and the reason is shown. A kernel that compiled can touch no Python
object, so the helper may replay it and keep running for the next one: the access record that decides races
and atomics is taken by the helper's own code, which the submission's cells never reached. Compiles are cached
per source and argument types. Without numba-cuda the check says so once and replays each kernel in a fresh
helper (the trace checks still run; the kernel's Python is then not vetted). For the batch grader the helper also
calls a lab's runner on a kernel known only by its description (``run_in_helper``: a device function's Python,
once that description compiled), so that no code of the submission runs in the grader's worker.

    python -m helpers.grading.kernel_compile      the helper: one JSON request a line on stdin, answers on stdout

Serves: core of the kernel labs' checks (labs 02, 03, 11, 12, 13).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from helpers.grading import wire
from helpers.grading.compare import BadAnswer

CC = (9, 0)  # the GPU target compiled for (H200, the course's GPU)
START_TIMEOUT_S, COMPILE_TIMEOUT_S, REPLAY_TIMEOUT_S = 180.0, 120.0, 120.0
MEMORY_LIMIT = 4 << 30  # the helper's address space without a CUDA driver: huge local or shared arrays fail alone
SIM_VAR = "NUMBA_ENABLE_CUDASIM"
EXPLAIN = ("A kernel computes on single elements: each thread reads and writes elements such as x[i] or "
           "c[row, col]. Whole-array numpy (a @ b, np.bincount, slices), Python objects and calls to plain "
           "Python functions do not run on a GPU.")
_LOCK = threading.Lock()
_COMPILED: dict[str, str] = {}  # hash of (kernel, argument types) -> "ok" or "unavailable"
_VETTED: set[str] = set()  # hashes of the kernels that compiled for a GPU at least once here
_STRICT: list[bool] = []  # set by require_vetting(): no kernel runs here unless it compiled first
_NOTED: list[str] = []


def available() -> bool:
    """True when numba-cuda is installed here (the helper can then compile for a GPU)."""
    return importlib.util.find_spec("numba_cuda") is not None


def arg_kinds(args: tuple) -> list[list]:
    """Each argument's numba type as plain data: ['array', dtype, ndim] (C order) or ['scalar', dtype]."""
    kinds = []
    for a in args:
        if isinstance(a, np.ndarray):
            kinds.append(["array", a.dtype.str, a.ndim])
        elif isinstance(a, (bool, int, float, np.generic)):
            kinds.append(["scalar", np.asarray(a).dtype.str])
        else:
            raise AssertionError(f"cannot pass a {type(a).__name__} to a kernel.")
    return kinds


def address_space_capped() -> bool:
    """True where the helper caps its own address space: on a machine without a CUDA driver (no /dev/nvidiactl).

    A CUDA driver reserves address space in the tens of GiB when it loads, so under the cap every new thread
    fails ("can't start new thread", seen on the H200 with the simulator's one thread per GPU thread).
    """
    return not Path("/dev/nvidiactl").exists()


def _limit_memory() -> None:
    """In the helper, before it starts: cap its address space at MEMORY_LIMIT where `address_space_capped()`.

    Limits the helper inherits stay as they are: under the batch grader those of its kernel (docs/instructors.md,
    "Resource limits"); in a student's own notebook on a GPU machine it has none of its own.
    """
    import resource

    if not address_space_capped():
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(MEMORY_LIMIT, hard)
    if soft == resource.RLIM_INFINITY or soft > cap:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


class _Helper:
    """The helper process: one request a line in, one answer a line out, a deadline for each."""

    def __init__(self) -> None:
        env = dict(os.environ, **{SIM_VAR: "0" if available() else "1", "PYTHONDONTWRITEBYTECODE": "1"})
        self.proc = subprocess.Popen([sys.executable, "-m", "helpers.grading.kernel_compile"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True, preexec_fn=_limit_memory)
        self.started = False

    def ask(self, request: dict, timeout: float) -> dict | None:
        """The answer to one request, or None when the helper died or ran past `timeout` (then it is killed)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        limit = timeout + (0 if self.started else START_TIMEOUT_S)
        try:
            self.proc.stdin.write(wire.dumps(request) + "\n")
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], limit)
            line = self.proc.stdout.readline() if ready else ""
        except (OSError, ValueError):
            line = ""
        except KeyboardInterrupt:  # Ctrl-C during a check: the kernel it runs may never end, so end it too
            self.close()
            raise
        if not line:
            self.close()
            return None
        self.started = True
        return wire.loads(line)

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def close(self) -> None:
        """End the helper (it is this module's own child)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


_HELPER: list[_Helper] = []


def _ask(request: dict, timeout: float, fresh: bool = False) -> dict | None:
    """Send a request to the helper (started when needed; a fresh one when `fresh`, ended after)."""
    with _LOCK:
        if fresh or not _HELPER or not _HELPER[0].alive():
            if _HELPER:
                _HELPER.pop().close()
            _HELPER.append(_Helper())
        answer = _HELPER[0].ask(request, timeout)
        if fresh or answer is None:
            _HELPER.pop().close()
        return answer


def _note_unavailable(why: str) -> None:
    """Say once per process that the compile step is not available, and why."""
    if not _NOTED:
        _NOTED.append(why)
        print(f"note: the GPU compile check is not available here ({why}); kernels are judged on the "
              "simulator trace alone. `make setup` installs numba-cuda.", file=sys.stderr)


def _kernel_hash(kernel: dict) -> str:
    """A kernel description's digest."""
    return hashlib.sha256(wire.dumps(kernel).encode()).hexdigest()


def vetted(kernel: dict) -> bool:
    """True when this exact kernel description compiled for a GPU in this process (so its Python touches no object)."""
    return _kernel_hash(kernel) in _VETTED


def require_vetting() -> None:
    """From now on in this process, refuse to replay or run a kernel that did not compile for a GPU (the batch
    grader's worker, whose helper runs outside the submission's sandbox)."""
    _STRICT.append(True)


def _refuse_unvetted(kernel: dict) -> None:
    """AssertionError when vetting is required and this kernel did not compile for a GPU here."""
    if _STRICT and not vetted(kernel):
        raise AssertionError(f"{kernel.get('name')} could not be compiled for a GPU on the grading machine, so the "
                             "grader does not run it (numba-cuda's compiler is missing there: tell your instructor).")


def compile_check(kernel: dict, args: tuple, device: bool = False) -> bool:
    """Compile the kernel for compute capability 9.0; True when it compiled, False when the step is unavailable.

    Raises AssertionError saying what is not a kernel in it.
    """
    request = {"op": "compile", "kernel": kernel, "kinds": arg_kinds(args), "device": device}
    if not available():
        _note_unavailable("numba-cuda is not installed")
        return False
    key = hashlib.sha256(wire.dumps(request).encode()).hexdigest()
    if key not in _COMPILED:
        answer = _ask(request, COMPILE_TIMEOUT_S)
        status = answer.get("status") if isinstance(answer, dict) else None
        if status == "ok" or status == "unavailable":
            _COMPILED[key] = status
            if status == "ok":
                _VETTED.add(_kernel_hash(kernel))
            if status == "unavailable":
                _note_unavailable(str(answer.get("message", "")))
        elif status in ("rejected", "driver"):
            raise AssertionError(str(answer.get("message")))
        else:
            raise AssertionError(f"{kernel.get('name')} could not be compiled: the compiler ran longer than "
                                 f"{COMPILE_TIMEOUT_S:.0f} s or stopped.")
    return _COMPILED[key] == "ok"


def replay(kernel: dict, griddim: Any, blockdim: Any, args: tuple, out_index: int, lines: bool = False,
           extensions: list[str] | None = None) -> dict:
    """Compile, then run the kernel traced in the helper (inside the named simulator extensions):
    {'out', 'trace', 'sync'} as plain data."""
    vetted = compile_check(kernel, args)
    _refuse_unvetted(kernel)
    request = {"op": "replay", "kernel": kernel, "grid": griddim, "block": blockdim, "args": tuple(args),
               "out_index": int(out_index), "lines": bool(lines), "extensions": [str(e) for e in extensions or ()]}
    answer = _ask(request, REPLAY_TIMEOUT_S, fresh=not vetted)
    if not isinstance(answer, dict):
        raise AssertionError(f"your kernel ran longer than {REPLAY_TIMEOUT_S:.0f} s in the simulator (or stopped "
                             "it): is there a loop that never ends?")
    if answer.get("status") != "ok":
        raise AssertionError(f"your kernel raised {answer.get('message')}")
    return {k: answer[k] for k in ("out", "trace", "sync")}


def run_in_helper(run_ref: str, kernel: dict, args: tuple, kwargs: dict) -> Any:
    """An exercise's runner ('module:name', the course's) called in the helper on a kernel known by its description
    (the grader's worker: a device function's Python runs there, never in the worker). The description must
    have compiled here first (vetted()), unless the compile step is unavailable: then a fresh helper runs it."""
    if available() and not vetted(kernel):
        raise AssertionError(f"{kernel.get('name')} was not compiled for a GPU before it was run, so the grader "
                             "does not run it (a fault of the check, not of your code: tell your instructor).")
    _refuse_unvetted(kernel)
    request = {"op": "run", "run": str(run_ref), "kernel": kernel, "args": tuple(args), "kwargs": dict(kwargs)}
    answer = _ask(request, REPLAY_TIMEOUT_S, fresh=not vetted(kernel))
    if not isinstance(answer, dict):
        raise AssertionError(f"your function ran longer than {REPLAY_TIMEOUT_S:.0f} s (or stopped the checker's "
                             "helper): is there a loop that never ends?")
    if answer.get("status") == "bad":
        raise BadAnswer(str(answer.get("message")))
    if answer.get("status") != "ok":
        raise AssertionError(f"your function raised {answer.get('message')}")
    return answer["answer"]


# --- the helper's side ---

def _summary(err: BaseException, kernel: dict) -> str:
    """What numba's error says, in one or two lines, with the kernel's line where numba names one."""
    text = str(err)
    where = ""
    for file, line in re.findall(r'File "([^"]+)", line (\d+)', text):
        if file == kernel.get("file"):
            src = str(kernel.get("source", "")).splitlines()
            i = int(line) - int(kernel.get("line", 1))
            where = f" at line {line}" + (f" ({src[i].strip()})" if 0 <= i < len(src) else "")
            break
    m = re.search(r"No implementation of function Function\((.+?)\) found for signature:\s*>>> (.+)", text)
    if m:
        reason = f"{m.group(1)} has no GPU version for {m.group(2).strip()}"
    else:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("Failed in")]
        reason = lines[0] if lines else type(err).__name__
    return f"{where}: {reason[:300]}"


def _numba_types(kinds: list) -> tuple:
    """numba types from arg_kinds()' plain data."""
    import numba

    dts = [numba.from_dtype(np.dtype(str(k[1]))) for k in kinds]
    return tuple(numba.types.Array(dt, int(k[2]), "C") if k[0] == "array" else dt for dt, k in zip(dts, kinds))


def _compile(req: dict) -> dict:
    """Compile one kernel for CC; {'status': ok | rejected | driver | unavailable, 'message'}."""
    from numba import cuda

    from helpers.grading.kernel_source import rebuild

    name = req["kernel"].get("name")
    if os.environ.get(SIM_VAR) == "1" or not hasattr(cuda, "compile_ptx"):
        return {"status": "unavailable", "message": "numba-cuda is not installed"}
    from numba.cuda import dispatcher

    class _Target:  # numba asks the current device for its compute capability while typing device calls
        compute_capability = CC

    dispatcher.get_current_device = lambda: _Target()
    try:
        fn = rebuild(req["kernel"], "gpu")
        cuda.compile_ptx(fn, _numba_types(req["kinds"]), device=bool(req.get("device")), cc=CC)
    except BadAnswer as err:
        return {"status": "rejected", "message": f"{name} cannot be compiled: {err}"}
    except Exception as err:  # noqa: BLE001 - numba raises many kinds of errors; each is shown
        kind = type(err).__name__
        if kind in ("NvvmSupportError", "DynamicLibNotFoundError") or isinstance(err, ImportError):
            return {"status": "unavailable", "message": f"{kind}: {str(err)[:200]}"}
        target = f"{name} does not compile for a GPU (numba CUDA, compute capability {CC[0]}.{CC[1]})"
        if kind == "CudaSupportError":
            return {"status": "driver", "message": f"{target}: numba needed a GPU driver to build part of it, "
                                                   f"which plain kernel code never does. {EXPLAIN}"}
        return {"status": "rejected", "message": f"{target}{_summary(err, req['kernel'])}. {EXPLAIN}"}
    return {"status": "ok"}


def _extension(ref: str) -> Any:
    """A course context manager marked with traced.simulator_extension, by its 'module:name'."""
    import importlib

    from helpers.grading.exercise import is_answer_key

    module, _, name = ref.partition(":")
    if not module.startswith("helpers.") or is_answer_key(module):
        raise BadAnswer(f"refused the simulator extension {ref!r}: not the course's.")
    obj = getattr(importlib.import_module(module), name, None)
    if not getattr(obj, "simulator_extension", False):
        raise BadAnswer(f"refused {ref!r}: not marked as a simulator extension.")
    return obj()


def _replay(req: dict) -> dict:
    """Run one kernel traced in the simulator (atomics and barriers logged), inside its simulator extensions."""
    import contextlib
    import traceback

    from numba.cuda.simulator.kernel import FakeCUDAKernel

    from helpers.grading.kernel_source import rebuild
    from helpers.kernels import races, simtrace

    try:
        kern = FakeCUDAKernel(rebuild(req["kernel"], "sim"), device=False)
        with contextlib.ExitStack() as stack:
            for ref in req.get("extensions", []):
                stack.enter_context(_extension(str(ref)))
            results, trace, log = races.run_traced(kern, req["grid"], req["block"], *req["args"],
                                                   lines=req["lines"])
    except Exception as exc:  # noqa: BLE001 - the kernel may raise anything: shown with its own lines
        file = req["kernel"].get("file")
        frames = [f"  line {fr.lineno}: {(fr.line or '').strip()}" for fr in traceback.extract_tb(exc.__traceback__)
                  if fr.filename == file]
        return {"status": "raised", "message": f"{type(exc).__name__}: {str(exc)[:500]}" +
                ("\n" + "\n".join(frames[-3:]) if frames else "")}
    return {"status": "ok", "out": results[int(req["out_index"])], "trace": simtrace.to_data(trace),
            "sync": log.to_data()}


def _run(req: dict) -> dict:
    """Call a course runner on the described kernel, its Python rebuilt here (device functions as Python)."""
    from helpers.grading.exercise import resolve
    from helpers.grading.kernel_source import SentKernel, rebuild

    try:
        run = resolve(str(req["run"]))
        if run is None:
            raise BadAnswer("no runner named.")
        answer = run(SentKernel(req["kernel"], rebuild(req["kernel"], "sim")), *req["args"], **req["kwargs"])
    except BadAnswer as err:
        return {"status": "bad", "message": str(err)}
    except Exception as exc:  # noqa: BLE001 - the function may raise anything: shown as the student's error
        return {"status": "raised", "message": f"{type(exc).__name__}: {str(exc)[:500]}"}
    return {"status": "ok", "answer": answer}


_OPS = {"compile": _compile, "replay": _replay, "run": _run}


def _watch(parent: int) -> None:
    """Exit once the process that started the helper is gone, even mid-kernel (its own session: no signal comes)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def main() -> int:
    """Serve requests until stdin closes or its starter ends; what kernels print goes to stderr, not the answers."""
    threading.Thread(target=_watch, args=(os.getppid(),), daemon=True).start()
    out = os.fdopen(os.dup(1), "w")
    sys.stdout = sys.stderr
    for line in sys.stdin:
        try:
            req = wire.loads(line)
            answer = _OPS.get(str(req.get("op")), _replay)(req)
        except Exception as exc:  # noqa: BLE001 - a malformed request gets an answer, not a dead helper
            answer = {"status": "rejected", "message": f"malformed request ({type(exc).__name__}: {exc})"[:400]}
        out.write(wire.dumps(answer) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ranking's GPU timing, and nothing else: one kernel, compiled from its description (never from a running
notebook: none of the submission's host code runs here), timed at every ranked shape with the defences of
kernel competitions (GPU MODE's KernelBot and pygpubench):

- its own process (``rank`` starts one per kernel), so the timer, the inputs and the seeds live outside the
  submission's reach, and a kernel that breaks its CUDA context breaks nothing else;
- before every timed run: fresh inputs from a seed drawn here from the operating system (``secrets``), the output
  poisoned (NaN or -77), and the L2 cache flushed by a kernel that writes twice its size;
- the device synchronised (every stream) before the start event and after the end event, so work left on
  another stream is waited for before the next run starts;
- every timed run's output checked bit for bit, and once more after the timing on inputs from a new secret seed:
  a wrong answer anywhere rejects the kernel (correctness still decides the grade; this only ranks).

The time of a shape is the median of its runs' CUDA-event times; the wall-clock time of each run (launch to
device-wide synchronisation) is stored beside it.

A later session with a GPU runs the whole ranking on the official solutions and one planted cheat of each family
with one command (``rank_planted``), which writes the leaderboard and each cheat's verdict under DIR:

    python -m instructors.batch.rank_planted --out DIR [--runs 3]

The limits must be the timing card's own: on an H200 (its chapter 2 and 3 rates are stored) the command runs as
it is; on an H100, store that card's rates first (``python -m helpers.tools.report --out R --only '0[23]_*'
--store reference/h100``) and add ``--card h100``. Nothing has been timed with it yet (written without a GPU).

This module's own entry point is what ``rank`` starts: ``python -m instructors.batch.rank_gpu JOB RESULT``.

Serves: instructors (ranking of labs 11, 12 and 13 on a GPU).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numba import cuda  # the helpers package, imported first as this module's parent, chose GPU or simulator

from helpers.bench import L2_BYTES  # the flush below writes twice this
from helpers.grading.speed_of_light import target
from instructors.batch.rank_problems import build, problem, same, secret_seed

RUNS = 5


@cuda.jit
def _flush(buf):  # noqa: ANN001, ANN202 - a numba kernel
    """Add 1 to every word of a buffer twice the L2 cache's size: evicts whatever the cache held."""
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # type: ignore[operator]  # numba's stubs
    if i < buf.size:
        buf[i] += 1


def _launch_once(kern: Any, p: Any, flush: Any, buf: Any) -> tuple[float, float, np.ndarray]:
    """One defended launch: inputs copied, L2 flushed, device synchronised around the events; (event seconds,
    wall seconds, the output)."""
    dargs = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in p.args]
    flush[(buf.size + 255) // 256, 256](buf)
    start, end = cuda.event(), cuda.event()
    cuda.synchronize()
    t0 = time.perf_counter()
    start.record()
    kern[p.grid, p.block](*dargs)
    end.record()
    cuda.synchronize()
    wall = time.perf_counter() - t0
    return start.elapsed_time(end) / 1e3, wall, dargs[p.out].copy_to_host()


def time_kernel(description: dict, exercise: str, runs: int = RUNS, shapes: list | None = None,
                device: str = "gpu", flush_bytes: int = 2 * L2_BYTES) -> dict:
    """{'verdict': 'timed' | 'rejected: ...', 'shapes': {label: {'seconds', 'runs', 'wall'}}} for one kernel.

    `shapes` ((label, dims) pairs; the exercise's ranked shapes by default), `device` ('sim': numba's simulator)
    and `flush_bytes` exist for the CPU tests of this procedure: a simulator's times mean nothing."""
    flush, buf = _flush, cuda.device_array(max(flush_bytes // 4, 1), np.int32)
    out: dict = {"shapes": {}}
    for label, dims in shapes or [(s.label, s.dims) for s in target(exercise).shapes]:
        first = problem(exercise, dims, secret_seed(), device)
        try:
            kern = build(description, first.constants, device)
            _, _, got = _launch_once(kern, first, flush, buf)  # compiles, and is checked like every run
            why = same(got, first)
            events, walls = [], []
            for _ in range(runs if why is None else 0):
                p = problem(exercise, dims, secret_seed(), device)
                ev, wall, got = _launch_once(kern, p, flush, buf)
                why = same(got, p)
                if why:
                    break
                events.append(ev)
                walls.append(wall)
            if why is None:
                p = problem(exercise, dims, secret_seed(), device)
                why = same(_launch_once(kern, p, flush, buf)[2], p)
                why = why and f"after the timing: {why}"
        except Exception as err:  # noqa: BLE001 - a student's kernel may fail in any way; it is then not ranked
            why = f"failed on the GPU ({type(err).__name__}: {str(err)[:200]})"
        if why:
            return {"verdict": f"rejected: {label}: {why}", "shapes": out["shapes"]}
        out["shapes"][label] = {"seconds": statistics.median(events), "runs": events, "wall": walls}
    return {"verdict": "timed", **out}


def main(argv: list[str]) -> int:
    """JOB (a JSON {'exercise', 'description'[, 'runs']}) -> RESULT (time_kernel's JSON, with the device)."""
    from helpers.device import device_label, require_gpu

    job_path, result_path = map(Path, argv)
    require_gpu("Timing the ranked kernels")
    job = json.loads(job_path.read_text(encoding="utf-8"))
    result = time_kernel(job["description"], job["exercise"], int(job.get("runs", RUNS)))
    result["device"] = device_label()
    result_path.write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

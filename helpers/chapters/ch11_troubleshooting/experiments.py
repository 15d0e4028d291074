"""Chapter 11's measurements as Experiments, with their tables declared once (record names as stored before).

    ARCH      on a GPU: the same kernel built three ways and loaded (ch11.arch.*_loads); elsewhere the stored run
    ACCURACY  diagnose, fix, repeat on a CNN made to fail, on any machine (ch11.accuracy.*_pts)
    PERF      two INT8 exports of the CNN on ONNX Runtime's CPU provider, diagnosed (ch11.perf.cpu_*_over_fp32)

Nsight Compute's counts of the chapter 3 kernels are declared beside the command that measures them
(``profiling.NCU_TABLES``; ``python -m helpers.chapters.ch11_troubleshooting.profiling all`` on a machine with ncu).

Serves: chapter 11.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from helpers.chapters.ch11_troubleshooting import accuracy_fix, arch_mismatch, perf_diagnose
from helpers.experiment import Experiment, Rows, Table
from helpers.records import Record

ATTEMPTS = ("wrong_sass", "wrong_sass_plus_ptx", "right_gencode")  # reproduce_and_fix's three builds, in order
BUILDS = Table("ch11.arch.build", keys=("attempt",), value="loads and runs", unit="bool", fields=("build", "message"),
               example={"attempt": "wrong_sass", "loads and runs": 0.0, "build": "wrong SASS only (sm_80)",
                        "message": "CUDADriverError: CUDA_ERROR_NO_BINARY_FOR_GPU"})


def _arch() -> Rows:
    """This GPU, torch's build list, and the kernel built for a wrong architecture, + old PTX, and right."""
    import torch

    from helpers.device import gpu_info
    from helpers.errors import MissingPackageError, skipped

    info = gpu_info()
    print(f"this GPU: {info.name}, compute capability {info.cc:.1f}")
    print("torch was built for:", torch.cuda.get_arch_list(), "-> has code for this GPU:",
          arch_mismatch.torch_build_supports(torch.cuda.get_arch_list(), info.compute_capability))
    try:
        rows = arch_mismatch.reproduce_and_fix()
    except MissingPackageError as exc:
        skipped("building kernels for a chosen architecture", str(exc))
        return {"builds": []}
    return {"builds": [{"attempt": a, "loads and runs": float(r["loads and runs"]), "build": r["build"],
                        "message": r["message"]} for a, r in zip(ATTEMPTS, rows)]}


def _arch_derive(rows: Rows) -> dict[str, Any]:
    by = {r["attempt"]: r["loads and runs"] for r in rows["builds"]}
    names = {"wrong_sass": "ch11.arch.wrong_sass_loads", "right_gencode": "ch11.arch.right_gencode_loads"}
    return {name: by[a] for a, name in names.items() if a in by}


ARCH = Experiment("ch11.arch", _arch, {"builds": BUILDS}, derive=_arch_derive, needs="gpu",
                  others={"ch11.arch.wrong_sass_loads": "bool", "ch11.arch.right_gencode_loads": "bool"})


def _accuracy_derive(rows: Rows) -> dict[str, Any]:
    """The drop before any fix, after the first, and at the end, each with its paired interval."""
    steps = rows["_steps"]
    picked = {"ch11.accuracy.initial_drop_pts": steps[0], "ch11.accuracy.final_drop_pts": steps[-1]}
    if len(steps) > 1:
        picked["ch11.accuracy.after_first_fix_pts"] = steps[1]
    return {name: (s["drop pts"], s["diagnosis"].drop_spread) for name, s in picked.items()}


ACCURACY = Experiment("ch11.accuracy",
                      lambda model, data, target_pts=1.0: {"_steps": accuracy_fix.fix_until_recovered(
                          model, data, target_pts=target_pts)},
                      {}, derive=_accuracy_derive, needs="cpu",
                      others={"ch11.accuracy.initial_drop_pts": "pts", "ch11.accuracy.after_first_fix_pts": "pts",
                              "ch11.accuracy.final_drop_pts": "pts"})


def _perf_legacy(r: Record) -> dict[str, Any] | None:
    parts = r.name.split("_")
    return {"activations": parts[1], "export": None} if r.name.endswith("_over_fp32") and len(parts) == 4 else None


PERF = Table("ch11.perf", keys=("activations",), value="int8 / fp32 speed", unit="ratio", fields=("export",),
             name=lambda row: f"cpu_{row['activations']}_over_fp32", legacy=_perf_legacy)


def _perf(exports: Mapping[str, tuple[str, Path]], fp32_path: Path, make_input: Callable[[int], np.ndarray],
          repeats: int = 10) -> Rows:
    """``perf_diagnose.diagnose`` of each export ({activations: (label, path)}) at batch 1 and 256 against FP32."""
    from tqdm.auto import tqdm

    rows = []
    for acts, (label, path) in tqdm(exports.items(), desc="diagnosing each INT8 export on ONNX Runtime (CPU)"):
        rep = perf_diagnose.diagnose(path, make_input, batch=1, big_batch=256, fp32_path=fp32_path, repeats=repeats)
        rows.append({"activations": acts, "export": label, "int8 / fp32 speed": rep.measurements["int8 / fp32 speed"],
                     "_report": rep})
    return {"perf": rows}


PERF_RUN = Experiment("ch11.perf", _perf, {"perf": PERF}, needs="cpu")

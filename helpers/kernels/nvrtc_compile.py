"""Compile a CUDA C kernel of this folder with NVRTC for a GPU target without a GPU (cuda-bindings), so a CPU test
catches a C++, PTX or register-spill error before the kernel reaches a GPU, and chapter 12 can say what a GEMV launch
holds on an SM (its registers, ``wo_gemv_resources``) on any machine.

    ok, log = compile_log("wo_gemm", ["wo_gemm<4, 1, 32, 4, 1>"], "sm_90")   # template instances by name

Serves: core — used by chapter 12 and lab 13.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

from helpers.kernels.cuda_source import HERE


def include_dir() -> str | None:
    """A folder with cuda_fp16.h for NVRTC: $CUDA_HOME/include, else the copy numba-cuda ships for CUDA 12."""
    for base in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if base and (Path(base) / "include" / "cuda_fp16.h").exists():
            return str(Path(base) / "include")
    spec = importlib.util.find_spec("numba_cuda")
    if spec and spec.origin:
        d = Path(spec.origin).parent / "numba" / "cuda" / "include" / "12"
        if (d / "cuda_fp16.h").exists():
            return str(d)
    return None


def available() -> bool:
    """True when cuda-bindings' NVRTC and a cuda_fp16.h are here."""
    return importlib.util.find_spec("cuda.bindings") is not None and include_dir() is not None


def compile_log(name: str, instances: list[str], arch: str = "sm_90") -> tuple[bool, str]:
    """(compiled, compiler log with ptxas -v) of ``<name>.cu`` with these template instances (and its extern "C"
    kernels) for `arch`."""
    from cuda.bindings import nvrtc

    code = (HERE / f"{name}.cu").read_text(encoding="utf-8")
    err, prog = nvrtc.nvrtcCreateProgram(code.encode(), f"{name}.cu".encode(), 0, [], [])
    for n in instances:
        nvrtc.nvrtcAddNameExpression(prog, n.encode())
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", f"-I{include_dir()}".encode(), b"-Xptxas=-v"]
    (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    nvrtc.nvrtcDestroyProgram(prog)
    return res == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode(errors="replace").rstrip("\x00 ")


def version() -> str:
    """NVRTC's version, e.g. '12.9'."""
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def resources(log: str) -> dict[str, tuple[int, int]]:
    """{compiled function: (registers a thread, static shared bytes)} from a ptxas -v log."""
    out = {}
    for block in log.split("Compiling entry function '")[1:]:
        name = block.split("'", 1)[0]
        regs = re.search(r"Used (\d+) registers", block)
        smem = re.search(r"(\d+) bytes smem", block)
        if regs:
            out[name] = (int(regs.group(1)), int(smem.group(1)) if smem else 0)
    return out


def spills(log: str) -> list[int]:
    """Bytes of spill stores per compiled function in a ptxas -v log."""
    return [int(v) for v in re.findall(r"(\d+) bytes spill stores", log)]

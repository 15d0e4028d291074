"""'no kernel image is available for execution on the device': reproduce it, read the compute
capability, and fix it with the right nvcc -gencode options.

The rules: SASS (code=sm_XY) runs only on GPUs of the same major version X and minor >= Y;
PTX (code=compute_XY) is compiled by the driver at load time for any GPU of compute capability >= X.Y.
A binary with neither for your GPU fails to load with exactly that message.

Serves: chapter 11 (also lab 09).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from helpers.errors import InputError, MissingPackageError

# What nvcc 13.0 accepts (nvcc --list-gpu-code); older toolkits also know sm_50..sm_72.
NVCC13_ARCHS = (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121)
KERNEL_SOURCE = r'''
extern "C" __global__ void add_one(float* a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += 1.0f;
}
'''


def _cc(cc: tuple[int, int] | int | str) -> tuple[int, int]:
    """Normalise (9, 0), 90, '9.0', 'sm_90' or 'compute_90' to (9, 0)."""
    if isinstance(cc, tuple) and len(cc) == 2 and all(isinstance(v, int) for v in cc):
        return cc
    text = str(cc).lower().removeprefix("sm_").removeprefix("compute_").rstrip("af")
    if "." in text:
        major, minor = text.split(".", 1)
    elif text.isdigit() and len(text) >= 2:
        major, minor = text[:-1], text[-1]
    else:
        major, minor = "", ""
    if not (major.isdigit() and minor.isdigit()):
        raise InputError(f"a compute capability looks like (9, 0), 90, '9.0' or 'sm_90'; got {cc!r}.")
    return int(major), int(minor)


def arch_number(cc: tuple[int, int] | int | str) -> int:
    """The number nvcc uses for a compute capability: (9, 0) -> 90."""
    major, minor = _cc(cc)
    return major * 10 + minor


def sass_runs_on(code: tuple[int, int] | int | str, device: tuple[int, int] | int | str) -> bool:
    """True when SASS built for `code` (sm_XY) runs on a GPU of compute capability `device`."""
    (cm, cn), (dm, dn) = _cc(code), _cc(device)
    if str(code).lower().endswith("a"):  # sm_90a: arch-specific features, that exact GPU only
        return (cm, cn) == (dm, dn)
    return cm == dm and cn <= dn


def ptx_runs_on(ptx: tuple[int, int] | int | str, device: tuple[int, int] | int | str) -> bool:
    """True when PTX for `ptx` (compute_XY) can be JIT-compiled by the driver for `device`."""
    return _cc(ptx) <= _cc(device)


def gencode_flags(device: tuple[int, int] | int | str, *, ptx: bool = True) -> list[str]:
    """The nvcc options for a device: SASS for it, plus its PTX so that newer GPUs can JIT it."""
    n = arch_number(device)
    flags = ["-gencode", f"arch=compute_{n},code=sm_{n}"]
    if ptx:
        flags += ["-gencode", f"arch=compute_{n},code=compute_{n}"]
    return flags


def wrong_arch_for(device: tuple[int, int] | int | str, known: tuple[int, ...] = NVCC13_ARCHS) -> int:
    """An architecture nvcc can build whose SASS cannot run on `device` (an older major version if any)."""
    major = _cc(device)[0]
    older = [a for a in known if a // 10 < major]
    newer = [a for a in known if a // 10 > major]
    if not (older or newer):
        raise InputError(f"no architecture of another major version than {major} in {known}.")
    return max(older) if older else min(newer)


def explain(built: list[str], device: tuple[int, int] | int | str) -> str:
    """Why a binary built with `built` codes (e.g. ['sm_80', 'compute_80']) does or does not load on `device`."""
    dev = _cc(device)
    lines = []
    for code in built:
        if code.startswith("sm_"):
            ok = sass_runs_on(code, dev)
            lines.append(f"{code}: SASS {'runs' if ok else 'does NOT run'} on {dev[0]}.{dev[1]} "
                         f"(SASS needs the same major version and a minor <= the GPU's)")
        elif code.startswith("compute_"):
            ok = ptx_runs_on(code, dev)
            lines.append(f"{code}: PTX {'is JIT-compiled' if ok else 'cannot be used'} on {dev[0]}.{dev[1]} "
                         "(PTX works on any GPU at least that new, at a one-time JIT cost)")
        else:
            raise InputError(f"codes look like 'sm_90' or 'compute_90'; got {code!r}.")
    runs = any(sass_runs_on(c, dev) for c in built if c.startswith("sm_")) or any(
        ptx_runs_on(c, dev) for c in built if c.startswith("compute_"))
    verdict = "loads" if runs else "fails with 'no kernel image is available for execution on the device'"
    fix = " ".join(gencode_flags(dev))
    return "\n".join(lines + [f"=> the binary {verdict}." + ("" if runs else f" Fix: nvcc {fix}")])


def torch_build_supports(arch_list: list[str], device: tuple[int, int] | int | str) -> bool:
    """True when a torch build compiled for `arch_list` (torch.cuda.get_arch_list()) has code for `device`."""
    return any(sass_runs_on(a, device) if a.startswith("sm_") else ptx_runs_on(a, device) for a in arch_list)


def find_nvcc() -> str:
    """Path of nvcc (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin), or MissingPackageError."""
    cands = [shutil.which("nvcc")] + [str(Path(os.environ.get(v, "/nonexistent")) / "bin" / "nvcc")
                                       for v in ("CUDA_HOME", "CUDA_PATH")] + ["/usr/local/cuda/bin/nvcc"]
    for c in cands:
        if c and Path(c).exists():
            return c
    raise MissingPackageError("nvcc", "install the CUDA toolkit (or conda install cuda-nvcc)",
                              "building a kernel binary for a chosen architecture")


def compile_kernel(flags: list[str], out_dir: str | Path | None = None) -> Path:
    """Build the add_one kernel into a fatbin with the given nvcc flags; return its path.

    Without `out_dir` the files go to a scratch folder removed when this Python process exits;
    a folder you pass is yours and is never deleted.
    """
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise InputError(f"flags must be a list of strings such as {gencode_flags((9, 0))}; got {flags!r}.")
    nvcc = find_nvcc()
    if out_dir is None:
        from helpers.session import scratch_dir

        out = scratch_dir("arch")
    else:
        out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src = out / "add_one.cu"
    src.write_text(KERNEL_SOURCE)
    tag = "_".join(f.split("=")[-1] for f in flags if "code=" in f) or "default"
    binary = out / f"add_one_{tag}.fatbin"
    proc = subprocess.run([nvcc, "-fatbin", *flags, "-o", str(binary), str(src)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise InputError(f"nvcc rejected the flags {flags}: {proc.stderr.strip()[:500]}")
    return binary


def load_and_run(binary: str | Path) -> tuple[bool, str]:
    """Load a kernel binary with cupy and run add_one on 4 elements: (worked, message)."""
    from helpers.device import require_gpu
    from helpers.errors import require_package

    require_gpu("Loading a kernel binary")
    cupy = require_package("cupy", "pip install cupy-cuda13x", "loading a compiled kernel")
    try:
        fn = cupy.RawModule(path=str(binary)).get_function("add_one")
        a = cupy.zeros(4, dtype=cupy.float32)
        fn((1,), (4,), (a, cupy.int32(4)))
        cupy.cuda.Device().synchronize()
        ok = bool((a == 1).all())
        return ok, "ran and gave the right answer" if ok else "ran but gave a wrong answer"
    except Exception as exc:  # noqa: BLE001 - the error text is the lesson
        return False, f"{type(exc).__name__}: {exc}"


def reproduce_and_fix(out_dir: str | Path | None = None) -> list[dict]:
    """Build add_one for a wrong architecture, for the wrong one plus old PTX, and for this GPU; load each."""
    from helpers.device import gpu_info, require_gpu

    require_gpu("Reproducing 'no kernel image is available'")
    dev = gpu_info().compute_capability
    wrong = wrong_arch_for(dev)
    older_ptx = min(NVCC13_ARCHS)
    attempts = {
        f"wrong SASS only (sm_{wrong})": ["-gencode", f"arch=compute_{wrong},code=sm_{wrong}"],
        f"sm_{wrong} + PTX compute_{older_ptx}": ["-gencode", f"arch=compute_{wrong},code=sm_{wrong}",
                                                  "-gencode", f"arch=compute_{older_ptx},code=compute_{older_ptx}"],
        f"right: {' '.join(gencode_flags(dev))}": gencode_flags(dev),
    }
    rows = []
    for label, flags in attempts.items():
        ok, msg = load_and_run(compile_kernel(flags, out_dir))
        rows.append({"build": label, "loads and runs": ok, "message": msg})
    return rows

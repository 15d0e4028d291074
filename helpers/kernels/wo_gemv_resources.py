"""What one launch of the weight-only GEMV (``wo_gemv``) holds on an SM: registers a thread and static shared memory
from the compiler (the driver's count of the compiled function on a GPU; ptxas through NVRTC for sm_90 on any machine
with cuda-bindings), and the warps an SM keeps resident by the course's occupancy calculator.

    r = of_launch(4, wo_gemv.config_for(4, 11008, 4096, 2), batch=2)
    r.registers, r.occupancy.warps_per_sm, r.source

At batch M > 1 the kernel converts each 16-byte piece of weights once and reuses it for every row, so R rows per
block keep R x 16 converted FP16 pairs live at once: the reuse costs registers, and registers bound how many warps
an SM holds. Chapter 12 reads it where the GEMV's lead over tinygemm is smallest.

Serves: core — used by chapter 12 and lab 13.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from helpers.device import has_gpu
from helpers.kernels import nvrtc_compile as nv
from helpers.kernels import wo_gemv as wg
from helpers.kernels.occupancy import Occupancy, occupancy

ARCH = "sm_90"  # Hopper, the course's reference cards


@dataclass(frozen=True)
class Resources:
    """One compiled GEMV instance: registers a thread, static shared bytes, threads a block, and who counted them."""

    registers: int
    shared_bytes: int
    threads: int
    source: str  # 'the driver' (a GPU here) or 'ptxas of NVRTC 12.9 for sm_90'

    @property
    def occupancy(self) -> Occupancy:
        """Blocks and warps an SM keeps resident (helpers.kernels.occupancy, Hopper's limits)."""
        return occupancy(self.threads, self.registers, self.shared_bytes)


def of_launch(bits: int, cfg: wg.Config, batch: int = 1, norm: bool = False) -> Resources | None:
    """The resources of the GEMV instance one launch runs (``wg.kernel_name``): from the driver on a GPU, else from
    ptxas through NVRTC; None where neither is here."""
    name, threads = wg.kernel_name(bits, cfg, batch, norm), 32 * cfg.split
    if has_gpu():
        fn = wg.compiled(name)
        return Resources(int(fn.num_regs), int(getattr(fn, "shared_size_bytes", 0)), threads, "the driver")
    if not nv.available():
        return None
    found = _ptxas(name)
    return None if found is None else Resources(found[0], found[1], threads,
                                                f"ptxas of NVRTC {nv.version()} for {ARCH}")


@functools.cache
def _ptxas(name: str) -> tuple[int, int] | None:
    """(registers, shared bytes) of one template instance, compiled for ARCH (the log also holds the file's extern "C"
    kernels; the instance is the one C++-mangled name)."""
    ok, log = nv.compile_log("wo_gemv", [name], ARCH)
    mangled = [v for k, v in nv.resources(log).items() if k.startswith("_Z")] if ok else []
    return mangled[0] if len(mangled) == 1 else None


def batch_sentence(bits: int, n: int, k: int, m0: int, m1: int, zh: bool = False) -> str:
    """What the default GEMV launch holds at batch m1 against batch m0 for a (bits, N, K) weight: its rows and split,
    registers a thread and the warps an SM keeps resident, and who counted (in Chinese with `zh`); '' where the
    compiler is not here or nothing changed."""
    c0, c1 = wg.config_for(bits, n, k, m0), wg.config_for(bits, n, k, m1)
    r0, r1 = of_launch(bits, c0, m0), of_launch(bits, c1, m1)
    if r0 is None or r1 is None or (r0.registers, c0) == (r1.registers, c1):
        return ""
    o0, o1 = r0.occupancy, r1.occupancy
    if zh:
        return (f"M = {m1} 时 GEMV 的启动（每块 {c1.rows} 行，split {c1.split}）每个线程占用 {r1.registers} 个寄存器，"
                f"M = {m0} 时（每块 {c0.rows} 行，split {c0.split}）为 {r0.registers} 个（{r1.source}）：每个 SM 只能驻留 "
                f"{o1.warps_per_sm}/{o1.max_warps} 个 warp，而不是 {o0.warps_per_sm} 个，这是每块权重只转换一次、供 {m1} 行复用的代价。")
    return (f"The GEMV's launch at M = {m1} (rows {c1.rows}, split {c1.split}) holds {r1.registers} registers a thread "
            f"against {r0.registers} at M = {m0} (rows {c0.rows}, split {c0.split}; {r1.source}): an SM keeps "
            f"{o1.warps_per_sm} of its {o1.max_warps} warps resident instead of {o0.warps_per_sm}, the price of "
            f"converting each piece of weights once for all {m1} rows.")

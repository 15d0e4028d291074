"""What the lecture notes say about the memory hierarchy, judged by the sector model and chapter 3's runs.

Registered in ``helpers.claims``; the notebook shows each as a callout where the topic comes up.

Serves: chapter 3.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers import spread
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values
from helpers.findings import NOT_RESOLVED, spread_of
from helpers.perf import access_patterns as ap
from helpers.kernels.occupancy import HOPPER

A100_SHARED_PER_SM_KIB = 164  # CUDA C++ Programming Guide, table of compute capabilities: cc 8.0


def _shared_size(_: Values) -> tuple[str, str]:
    from helpers.device import gpu_info

    info = gpu_info()
    here = (f"; this GPU ({info.name}): {info.shared_memory_per_sm // 1024} KiB per SM"
            if info is not None and info.shared_memory_per_sm else "")
    hopper = HOPPER.shared_bytes // 1024
    return (f"A100 (cc 8.0): {A100_SHARED_PER_SM_KIB} KiB per SM; H100/H200 (cc 9.0): {hopper} KiB per SM, "
            f"{HOPPER.max_shared_per_block // 1024} KiB for one block{here}"), \
        f"outdated: Hopper has {hopper} KiB" if hopper > A100_SHARED_PER_SM_KIB else HOLDS


LDG_GAIN = 1.03  # __ldg "gains bandwidth" when the stencil runs this much faster than with plain loads


def _ldg(m: Values) -> tuple[str, str]:
    plain, ldg, restrict = (m.get(f"ch03.readonly_gbs.{k}") for k in ("plain", "ldg", "restrict"))
    if plain is None or ldg is None:
        return "the stencil was not measured", NOT_MEASURED
    r = ldg / plain
    s_ldg, s_plain = spread_of(m, "ch03.readonly_gbs.ldg"), spread_of(m, "ch03.readonly_gbs.plain")
    noise = spread.ratio(s_ldg, s_plain) if s_ldg is not None and s_plain is not None else None
    verdict = NOT_RESOLVED if noise is not None and noise.contains(LDG_GAIN) else HOLDS if r > LDG_GAIN else FAILS
    return (f"stencil with __ldg runs at {r:.2f}× the plain loads"
            + (f" ({noise.lo:.2f}..{noise.hi:.2f} from the two timings' spreads)" if noise is not None else "")
            + (f", const __restrict__ at {restrict / plain:.2f}×" if restrict else "")
            + ": recent GPUs cache ordinary global loads in L1 too"), verdict


def _byte_stride_kernel(_: Values) -> tuple[str, str]:
    addrs = ap.warp_addresses(lambda t: 4 * t, itemsize=1)
    eff = ap.efficiency(addrs, itemsize=1)
    fixed = ap.efficiency(ap.warp_addresses(lambda t: t, itemsize=4), itemsize=4)
    return (f"sector model: a warp reading data[idx * 4] (one byte per thread, 4 bytes apart) needs "
            f"{ap.sectors(addrs, 1)} sectors for {ap.WARP} useful bytes, {eff:.0%} of what it moves; reading "
            f"one 4-byte word per thread (char4 or int) uses {fixed:.0%}"), FAILS if eff < 0.5 else HOLDS


def _ldg_zh(m: Values) -> str:
    plain, ldg = m.get("ch03.readonly_gbs.plain"), m.get("ch03.readonly_gbs.ldg")
    if plain is None or ldg is None:
        return "模板计算（stencil）尚未测量"
    return f"同一模板计算中 __ldg 的速度是普通读取的 {ldg / plain:.2f} 倍：新一代 GPU 的 L1 也缓存普通全局读取"


def _byte_stride_zh() -> str:
    eff = ap.efficiency(ap.warp_addresses(lambda t: 4 * t, itemsize=1), itemsize=1)
    return f"扇区模型：每个线程读 data[idx * 4] 的 1 个字节，相隔 4 字节，只用到搬运数据的 {eff:.0%}，并非每次读取 4 字节"


registry.register(
    registry.Claim(
        "ch03.shared_memory_size", 3, "notes 1 §1.2.3",
        "Shared memory usually holds 48 KB to 164 KB.",
        "共享内存的容量通常为 48 KB 到 164 KB。",
        _shared_size, "CUDA C++ Programming Guide, technical specifications per compute capability",
        baseline="the CUDA Programming Guide's per-SM figures for A100 (8.0) and H100/H200 (9.0)",
        summary_zh=lambda m: (f"A100 每个 SM {A100_SHARED_PER_SM_KIB} KiB，H100/H200 每个 SM {HOPPER.shared_bytes // 1024} KiB："
                              "讲义的上限已过时")),
    registry.Claim(
        "ch03.ldg_read_only_cache", 3, "notes 3 §2.2",
        "Load read-only data with the __ldg instruction to go through the read-only cache and gain bandwidth.",
        "用 __ldg 指令读取只读数据，走只读缓存，从而提高带宽。",
        _ldg, "this chapter's stencil (plain, const __restrict__, __ldg loads)",
        ("ch03.readonly_gbs.plain", "ch03.readonly_gbs.restrict", "ch03.readonly_gbs.ldg"),
        baseline="the same stencil with plain global loads", summary_zh=_ldg_zh),
    registry.Claim(
        "ch03.byte_stride_kernel", 3, "notes 3 §5.2",
        "The 'improved' kernel coalesces by having each thread read data[idx * 4], four bytes at a time.",
        "“改进后”的核函数让每个线程读取 data[idx * 4]，并称这是合并访问、每次读取 4 个字节。",
        _byte_stride_kernel, "the sector model of this chapter (helpers.perf.access_patterns)",
        baseline="one 4-byte word per thread, consecutive (what 'coalesced, 4 bytes at a time' means)",
        summary_zh=lambda m: _byte_stride_zh()),
)

"""What the lecture notes say about warps, blocks and latency hiding, judged by chapter 4's occupancy runs.

Registered in ``helpers.claims``; the notebook shows each as a callout where the topic comes up.

Serves: chapter 4.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values, combine, in_range
from helpers.chapters.ch04_warp_execution.warp_bench import BLOCK_SIZES, SHARED_KIB
from helpers.kernels import occupancy

SMEM_GBS = [f"ch04.smem_gbs.k{k}" for k in SHARED_KIB]
SMEM_OCC = [f"ch04.smem_occupancy.k{k}" for k in SHARED_KIB]
BLOCK_GBS = [f"ch04.blocksize_gbs.b{b}" for b in BLOCK_SIZES]


def _few_warps(m: Values) -> tuple[str, str]:
    pts = [(o, g) for on, gn in zip(SMEM_OCC, SMEM_GBS)
           if (o := m.get(on)) is not None and (g := m.get(gn)) is not None]
    if not pts:
        return "the occupancy sweep was not measured", NOT_MEASURED
    best = max(g for _, g in pts)
    occ, gbs = min(pts)
    limits = occupancy.limits_for_device()  # this GPU's, or the H100/H200's the stored run used
    slots = limits.max_threads // limits.warp_size
    return (f"the copy at its lowest measured occupancy ({occ * slots:.0f} of {slots} warps per SM) reaches "
            f"{gbs / best:.0%} of its best bandwidth; two warps per SM would have even fewer loads in flight"), \
        HOLDS if gbs / best > 0.9 else FAILS


def _block_size(m: Values) -> tuple[str, str]:
    gbs = {b: m.get(n) for b, n in zip(BLOCK_SIZES, BLOCK_GBS)}
    known = {b: v for b, v in gbs.items() if v is not None}
    if not known:
        return "the block-size sweep was not measured", NOT_MEASURED
    best = max(known.values())
    top = max(known, key=lambda b: known[b])
    parts = {f"{b} threads": in_range(known[b] / best if b in known else None, 0.9, 1.0) for b in (128, 256)}
    shown = ", ".join(f"{b}: {v / best:.0%}" for b, v in known.items())
    return f"copy bandwidth by block size, as a share of the best ({top} threads): {shown}", combine(parts)


def _few_warps_zh(m: Values) -> str:
    pts = [(o, g) for on, gn in zip(SMEM_OCC, SMEM_GBS)
           if (o := m.get(on)) is not None and (g := m.get(gn)) is not None]
    if not pts:
        return "占用率扫描尚未测量"
    occ, gbs = min(pts)
    return f"拷贝核函数在最低占用率（{occ:.0%}）下只达到最佳带宽的 {gbs / max(g for _, g in pts):.0%}：线程束少了，在途访存就少"


def _block_size_zh(m: Values) -> str:
    known = {b: v for b, n in zip(BLOCK_SIZES, BLOCK_GBS) if (v := m.get(n)) is not None}
    if not known:
        return "线程块大小扫描尚未测量"
    best = max(known.values())
    return "各线程块大小的拷贝带宽占最佳值的比例：" + "，".join(f"{b}：{v / best:.0%}" for b, v in known.items())


registry.register(
    registry.Claim(
        "ch04.two_warps_hide_latency", 4, "notes 3 §2.2",
        "Launch at least two warps per SM to hide latency.",
        "每个 SM 至少启动 2 个线程束（warp）以隐藏延迟。",
        _few_warps, "this chapter's shared-memory occupancy sweep (a copy kernel)", tuple(SMEM_OCC + SMEM_GBS),
        baseline="the same copy kernel at full occupancy (its best bandwidth)", summary_zh=_few_warps_zh),
    registry.Claim(
        "ch04.block_size_128_256", 4, "notes 3 §2.2",
        "Blocks of 128 to 256 threads are the recommended size.",
        "线程块大小建议取 128 到 256 个线程。",
        _block_size, "this chapter's block-size sweep (a copy kernel)", tuple(BLOCK_GBS),
        baseline="the best block size of the same copy kernel", summary_zh=_block_size_zh),
)

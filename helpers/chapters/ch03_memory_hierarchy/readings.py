"""Chapter 3's interpretation sentences, computed from the sector model and the record (live, else stored).

Serves: chapter 3.
"""

from __future__ import annotations

from helpers import findings
from helpers.perf import access_patterns as ap

NCU = "ch11.ncu"  # chapter 11 profiles the same kernels with Nsight Compute; its records are read here


def model_fraction(stride: int) -> float:
    """The sector model's bandwidth at `stride` as a fraction of stride 1 (useful ÷ moved bytes)."""
    return ap.stride_rows([stride])[0]["useful"] / ap.stride_rows([1])[0]["useful"]


def stride_gap(stride: int = 32) -> str:
    """The measured stride curve against the sector model at its widest stride."""
    model = model_fraction(stride)
    m = findings.get(f"ch03.stride_gbs.s{stride}"), findings.get("ch03.stride_gbs.s1")
    if m[0] is None or m[1] is None:
        return "No stride sweep measured here or stored yet."
    r = m[0].value / m[1].value
    below = r < 0.9 * model
    return (f"At stride {stride} the copy keeps {r:.3f} of its stride-1 bandwidth (about 1/{1 / r:.0f}); "
            f"the sector model predicts {model:.3f} (1/{1 / model:.0f}): "
            f"{'the measured curve keeps falling past the model' if below else 'the model explains it'}. "
            f"({m[0].where()})")


def dram_traffic(stride: int = 32) -> str:
    """DRAM bytes per useful byte of the strided copy, from chapter 11's Nsight Compute profile."""
    model = 1 / model_fraction(stride)
    return findings.sentence(
        "Nsight Compute on the same copy kernels: at stride {s} the DRAM moved {d:,.0f} GB/s while the copy "
        "delivered {u:,.0f} GB/s of useful bytes, {verdict}.".replace("{s}", str(stride)),
        {"d": f"{NCU}.copy_stride32.dram_gbs", "u": f"ch03.stride_gbs.s{stride}",
         "d1": f"{NCU}.copy_simple.dram_gbs", "u1": "ch03.stride_gbs.s1"},
        lambda v: (f"{v['d'] / v['u']:.0f} bytes of DRAM traffic per useful byte where the sector model counts "
                   f"{model:.0f} (at stride 1 the same comparison gives {v['d1'] / v['u1']:.1f})"),
        zh=f"对同样的拷贝内核用 Nsight Compute 测量：步长 {stride} 时 DRAM 搬运 {{d:,.0f}} GB/s，而拷贝交付的有用字节为 "
           "{u:,.0f} GB/s，{verdict}。",
        verdict_zh=lambda v: (f"每个有用字节对应 {v['d'] / v['u']:.0f} 字节的 DRAM 流量，扇区模型算的是 {model:.0f}"
                              f"（步长 1 时同样的比较为 {v['d1'] / v['u1']:.1f}）"))


def misalignment(offset: int = 1) -> str:
    """What an offset of `offset` floats costs, measured, against the sector model's extra traffic."""
    aligned = ap.sectors(ap.warp_addresses(lambda t: t))
    shifted = ap.sectors(ap.warp_addresses(lambda t: t + offset))
    o, a = findings.get(f"ch03.offset_gbs_cupy.o{offset}"), findings.get("ch03.offset_gbs_cupy.o0")
    if o is None or a is None:
        return "No misalignment sweep measured here or stored yet."
    extra, r = shifted / aligned - 1, o.value / a.value
    why = ("the neighbouring warp asks for the same boundary sector, so the L2 cache can serve one of the two "
           "requests instead of DRAM" if r > 1 - extra / 2 else "the extra sectors cost DRAM bandwidth")
    return (f"Offset by {offset} float the copy keeps {r:.1%} of its aligned bandwidth, though each warp asks for "
            f"{shifted} sectors instead of {aligned} ({extra:.0%} more in the sector model): {why}. ({o.where()})")


def transposes() -> str:
    """The three transposes as fractions of a copy with the same tiling."""
    return findings.sentence(
        "As a fraction of the tiled copy: naive transpose {naive:.2f}, shared-memory tile {tiled:.2f}, padded tile "
        "{padded:.2f}: {verdict}.",
        {"naive": "ch03.transpose_over_copy.cupy_naive", "tiled": "ch03.transpose_over_copy.cupy_tiled",
         "padded": "ch03.transpose_over_copy.cupy_padded"},
        lambda v: (f"padding the tile is worth {v['padded'] / v['tiled']:.1f}× over the unpadded tile, and the tile "
                   f"{v['tiled'] / v['naive']:.1f}× over the naive transpose"),
        zh="与同样分块的拷贝相比：朴素转置 {naive:.2f}，共享内存分块 {tiled:.2f}，填充后的分块 {padded:.2f}：{verdict}。",
        verdict_zh=lambda v: (f"填充让分块快了 {v['padded'] / v['tiled']:.1f} 倍，分块比朴素转置快 "
                              f"{v['tiled'] / v['naive']:.1f} 倍"))

"""The numpy twin of ``wo_flat.cu``: each warp's run of units in the kernel's order, the fragments it builds (the
operands swapped at M <= 8 or not), one mma.sync at a time, and the flush of every piece of a column tile (FP16 store
of a whole tile, FP32 workspace adds and the arrival counter otherwise), so the CPU tests can check the work split,
the swapped fragment assignment and the counters' arithmetic without a GPU.

Within a warp the order of the sums is fixed; only the order in which the warps of one tile add into the workspace
is left to the GPU, so the twin's sum equals the kernel's up to that order.

Serves: tooling — the flat GEMM's CPU tests.
"""

from __future__ import annotations

import numpy as np

from helpers.kernels import wo_gemm_flat as F
from helpers.kernels import wo_gemm_twin as twin
from helpers.quant import wo_layout


def _unit_mma(acc: np.ndarray, frag: np.ndarray, xp: np.ndarray, swap: bool, nt: int, c: int) -> None:
    """Add one unit's mma's into acc (ACC, 32 lanes, 4), as the kernel builds the operands (rows >= M zero)."""
    ar, ac = twin.a_owner()
    g, t = twin.G, twin.T
    for ks in range(2):
        b = frag[nt, c, :, :, ks]  # (lane, j, register, half): the B registers of the 4 column blocks
        if swap:  # A = weights of column blocks 2jj (rows 0-7) and 2jj + 1 (rows 8-15); B = token g's inputs
            reg, h = np.arange(2)[None, :, None], np.arange(2)[None, None, :]
            xb = xp[g[:, None, None], 32 * c + 16 * ks + 2 * t[:, None, None] + 8 * reg + h]  # rows >= M: zeros
            for jj in range(2):
                a = np.stack([b[:, 2 * jj, 0], b[:, 2 * jj + 1, 0], b[:, 2 * jj, 1], b[:, 2 * jj + 1, 1]], 1)
                acc[jj] = twin.np_mma(a, xb, acc[jj])
        else:  # A = activations of row tile i, B = the weights of column block j
            for i in range(acc.shape[0] // 4):
                a = xp[16 * i + ar, 32 * c + 16 * ks + ac]
                for j in range(4):
                    acc[4 * i + j] = twin.np_mma(a, b[:, j], acc[4 * i + j])


def _pairs(swap: bool, acc_count: int, tile: int) -> list[tuple[int, int, int, int, int]]:
    """(accumulator tile, lane, value, row, col) of every lane's value, as the flush places them."""
    out = []
    for a in range(acc_count):
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for e in range(4):
                h, odd = e // 2, e % 2
                if swap:
                    row, col = 2 * t + odd, tile * 32 + 8 * (2 * a + h) + g
                else:
                    row, col = 16 * (a // 4) + g + 8 * h, tile * 32 + 8 * (a % 4) + 2 * t + odd
                out.append((a, lane, e, row, col))
    return out


def np_flat(x: np.ndarray, bits: int, data: np.ndarray, scale: np.ndarray, n: int, k: int, group: int, config: str,
            warps: int) -> tuple[np.ndarray, dict]:
    """The kernel's FP32 sums y (M, N) for `warps` warps, and what the launch did: 'arrivals' per tile (chunks added
    in warp order), 'finisher' per split tile (the warp whose add completed it), 'whole' tiles written directly."""
    m = x.shape[0]
    swap = F.swapped(config, m)
    mt = -(-m // 16)
    xp = np.zeros((16 * mt, k), np.float16)
    xp[:m] = x
    n_pad, nch = wo_layout.padded(n), k // 32
    frag = twin.np_b_fragments(bits, data, scale, n_pad, k, group)
    acc_count = 2 if swap else 4 * mt
    y = np.zeros((m, n_pad), np.float32)
    ws = np.zeros((m, n_pad), np.float32)
    counter = np.zeros(n_pad // 32, np.int64)
    info: dict = {"arrivals": {}, "finisher": {}, "whole": []}
    for w, (u0, u1) in enumerate(F.runs(n_pad // 32 * nch, warps)):
        for tile, c0, chunks in F.segments(u0, u1, nch):
            acc = np.zeros((acc_count, 32, 4), np.float32)
            for c in range(c0, c0 + chunks):
                _unit_mma(acc, frag, xp, swap, tile, c)
            whole = chunks == nch
            for a, lane, e, row, col in _pairs(swap, acc_count, tile):
                v = acc[a, lane, e] * (np.float32(scale[col]) if bits == 8 else np.float32(1))
                if row < m:
                    if whole:
                        y[row, col] = v
                    else:
                        ws[row, col] = np.float32(ws[row, col] + v)
            if whole:
                info["whole"].append(tile)
                continue
            info["arrivals"].setdefault(tile, []).append(chunks)
            counter[tile] += chunks
            if counter[tile] == nch:
                info["finisher"][tile] = w
                y[:, 32 * tile:32 * tile + 32] = ws[:, 32 * tile:32 * tile + 32]
                ws[:, 32 * tile:32 * tile + 32] = 0
                counter[tile] = 0
    info["left"] = (int(np.abs(ws).sum() != 0), int(counter.sum()))  # what the launch leaves behind: (0, 0)
    return y[:, :n], info

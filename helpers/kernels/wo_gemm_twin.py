"""The numpy twin of ``wo_gemm.cu``: the mma.sync m16n8k16 fragment ownership, the in-register dequantisation and
the kernel's loop over tiles, so that the CPU tests can check the layout and the arithmetic bit by bit.

Fragment ownership (PTX ISA, mma.m16n8k16 with .f16 A/B and .f32 C/D), lane = 4 g + t:
    A (16 x 16, row-major)  a0: row g, cols 2t, 2t+1   a1: row g+8, same cols   a2: row g, cols 2t+8, 2t+9   a3: row g+8
    B (16 x 8, "col")       b0: rows (k) 2t, 2t+1 of col (n) g                 b1: rows 2t+8, 2t+9 of col g
    C (16 x 8, FP32)        c0, c1: row g, cols 2t, 2t+1                        c2, c3: row g+8, cols 2t, 2t+1
(the lower 16 bits of a register hold the first of its two FP16 values.)

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import numpy as np

from helpers.quant import wo_layout

LANES = np.arange(32)
G, T = LANES // 4, LANES % 4


def a_owner() -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of A held by (lane, register 0..3, half 0..1): arrays (32, 4, 2)."""
    reg, half = np.arange(4)[None, :, None], np.arange(2)[None, None, :]
    row = G[:, None, None] + 8 * (reg % 2) + 0 * half
    col = 2 * T[:, None, None] + 8 * (reg // 2) + half
    return row, col


def b_owner() -> tuple[np.ndarray, np.ndarray]:
    """(k, n) of B held by (lane, register 0..1, half 0..1): arrays (32, 2, 2)."""
    reg, half = np.arange(2)[None, :, None], np.arange(2)[None, None, :]
    return 2 * T[:, None, None] + 8 * reg + half, G[:, None, None] + 0 * (reg + half)


def c_owner() -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of C held by (lane, value 0..3): arrays (32, 4)."""
    e = np.arange(4)[None, :]
    return G[:, None] + 8 * (e // 2), 2 * T[:, None] + e % 2


def np_mma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One mma.sync m16n8k16 on fragments: a (32, 4, 2), b (32, 2, 2) FP16 values, c (32, 4) FP32; returns d."""
    A = np.zeros((16, 16), np.float32)
    B = np.zeros((16, 8), np.float32)
    A[a_owner()] = a
    B[b_owner()] = b
    D = A.astype(np.float64) @ B.astype(np.float64)
    return (c + D[c_owner()]).astype(np.float32)


def _h(bits: np.ndarray) -> np.ndarray:
    """uint16 FP16 bit patterns as float16 numbers."""
    return np.asarray(bits & 0xFFFF, np.uint16).view(np.float16)


def np_b_fragments(bits: int, data: np.ndarray, scale: np.ndarray, n_pad: int, k: int, group: int = 0) -> np.ndarray:
    """The kernel's B registers as FP16: (N_pad/32, K/32, lane, j, ks, register, half), emulating stage 4 exactly."""
    nt, nch = n_pad // wo_layout.TILE, k // wo_layout.TILE
    out = np.empty((nt, nch, 32, 4, 2, 2, 2), np.float16)
    if bits == 4:
        words = (np.asarray(data).astype(np.int64) & 0xFFFFFFFF).reshape(nt, nch, 32, 4)
        s = np.asarray(scale, np.float16)  # (K/G, N_pad), a lane's 4 columns at 4g + j of each tile
        grp = (np.arange(nch) * 32) // group
        sc = s[grp][:, (np.arange(nt)[:, None, None] * 32 + 4 * G[None, :, None] + np.arange(4)[None, None, :])]
        sc = sc.transpose(1, 0, 2, 3)  # (nt, nch, lane, j)
        for ks in range(2):
            v = words >> (8 * ks)
            lo = (v & 0x000F000F) | 0x64006400  # LOP3: nibbles 0, 4 (k-step 0) or 2, 6 after >> 8 (k-step 1)
            hi = (v & 0x00F000F0) | 0x64006400
            for h in range(2):
                b0 = _h(lo >> (16 * h)) - np.float16(1032)  # HSUB2
                b1 = _h(hi >> (16 * h)) * np.float16(1 / 16) + np.float16(-72)  # HFMA2 (exact)
                out[..., ks, 0, h] = b0 * sc  # HMUL2 by the group scale: exact product, one rounding
                out[..., ks, 1, h] = b1 * sc
    else:
        b = np.asarray(data, np.uint8).reshape(nt, nch, 2, 32, 4, 4)  # [piece = ks][lane][word j][byte]
        q = b.astype(np.int64)
        for ks in range(2):
            for r in range(2):
                for h in range(2):  # PRMT 0x4140 (bytes 0, 1) / 0x4342 (bytes 2, 3) with 0x64, minus 1152
                    out[..., ks, r, h] = _h(0x6400 | q[:, :, ks, :, :, 2 * r + h]) - np.float16(1152)
    return out


def np_dense(bits: int, data: np.ndarray, scale: np.ndarray, n: int, k: int, group: int = 0) -> np.ndarray:
    """The float32 weight (N, K) the kernel multiplies by, placed from its B registers with the PTX ownership.

    ``b_owner`` puts (lane = 4 g + t, register r, half h) at k = 2 t + 8 r + h, n = g of a 16 x 8 block; a lane's
    word j holds the block at output row 8 j of its 32-row tile nt, k-step ks the block at input column 16 ks of its
    32-column chunk c. So the weight is the fragments with their axes reordered: row 32 nt + 8 j + g, column
    32 c + 16 ks + 8 r + 2 t + h: one transpose (the CPU tests check the result against the quantized weight bit for
    bit, and ``np_gemm``, which places the fragments with ``b_owner``, against the reference)."""
    n_pad = wo_layout.padded(n)
    frag = np_b_fragments(bits, data, scale, n_pad, k, group)  # (nt, c, lane, j, ks, r, h)
    nt, nch = n_pad // wo_layout.TILE, k // wo_layout.TILE
    w = frag.reshape(nt, nch, 8, 4, 4, 2, 2, 2)  # lane -> (g, t)
    w = w.transpose(0, 4, 2, 1, 5, 6, 3, 7).reshape(n_pad, k)[:n].astype(np.float32)  # (nt, j, g), (c, ks, r, t, h)
    if bits == 8:
        w *= np.asarray(scale, np.float32)[:n, None]
    return w


def np_gemm(x: np.ndarray, bits: int, data: np.ndarray, scale: np.ndarray, n: int, k: int, group: int = 0) -> np.ndarray:
    """The kernel's loop in numpy: A fragments from x (rows >= M masked to 0), B from the layout, mma, epilogue (one
    warp a column tile, K in order; split-K and KW > 1 add the same products in another order)."""
    m = x.shape[0]
    mt_count = -(-m // 16)
    xp = np.zeros((16 * mt_count, k), np.float16)
    xp[:m] = x
    n_pad = wo_layout.padded(n)
    frag = np_b_fragments(bits, data, scale, n_pad, k, group)
    ar, ac = a_owner()
    cr, cc = c_owner()
    y = np.zeros((16 * mt_count, n_pad), np.float32)
    for nt in range(n_pad // 32):
        for i in range(mt_count):
            for j in range(4):
                acc = np.zeros((32, 4), np.float32)
                for c in range(k // 32):
                    for ks in range(2):
                        a = xp[16 * i + ar, 32 * c + 16 * ks + ac]
                        acc = np_mma(a, frag[nt, c, :, j, ks], acc)
                if bits == 8:
                    acc = acc * np.asarray(scale, np.float32)[32 * nt + 8 * j + cc]
                y[16 * i + cr, 32 * nt + 8 * j + cc] = acc
    return y[:m, :n]


# With swapped operands (M <= 8, wo_gemm.SWAP_MAX_M) the weights are A: A rows 0-7 are output columns 8 (2 cb) + g and
# rows 8-15 columns 8 (2 cb + 1) + g of the tile, so A register q is B register SWAP_A[q][1] of column block
# 2 cb + SWAP_A[q][0] (a0: row g, inputs 2t..; a1: row g + 8; a2: row g, inputs 2t + 8..; a3: row g + 8).
SWAP_A = ((0, 0), (1, 0), (0, 1), (1, 1))


def np_gemm_swapped(x: np.ndarray, bits: int, data: np.ndarray, scale: np.ndarray, n: int, k: int, group: int = 0,
                    order: tuple[tuple[int, int], ...] = SWAP_A, late: bool = False) -> np.ndarray:
    """The swapped kernel's loop (M <= 8) in numpy: y^T = W x^T, the A fragments made from the dequantised B registers
    of two column blocks in `order`, the rows as B (n = 8, rows >= M zero), C read back as y^T.

    `late` (W4, the kernel's LATE): the A fragments hold the codes alone, and each scale group's sums join the totals
    times the group's FP32 scale of the C element's column, which the lane reads at 4 g + j of the tile's scale
    layout (j = 2 cb + e // 2, the column block of C value e)."""
    m = x.shape[0]
    if m > 8:
        raise ValueError(f"the swapped operands take at most 8 rows, got {m}")
    xp = np.zeros((8, k), np.float16)
    xp[:m] = x
    n_pad = wo_layout.padded(n)
    late = late and bits == 4
    frag = np_b_fragments(bits, data, np.ones_like(scale) if late else scale, n_pad, k, group)  # (nt, c, lane, ...)
    kb, nb = b_owner()
    cr, cc = c_owner()  # C rows: output columns of the two blocks; C columns: activation rows
    e = np.arange(4)[None, :]
    y = np.zeros((8, n_pad), np.float32)
    for nt in range(n_pad // 32):
        for cb in range(2):
            acc = np.zeros((32, 4), np.float32)
            for grp in range(k // group if late else 1):
                tiles = range(grp * group // 32, (grp + 1) * group // 32) if late else range(k // 32)
                part = np.zeros((32, 4), np.float32)
                for c in tiles:
                    for ks in range(2):
                        a = np.stack([frag[nt, c, :, 2 * cb + j, ks, r] for j, r in order], axis=1)  # (32, 4, 2)
                        b = xp[nb, 32 * c + 16 * ks + kb]
                        part = np_mma(a, b, part)
                if late:  # add_group: the lane's scale j of this group, in FP32
                    s = np.asarray(scale, np.float32)[grp, 32 * nt + 4 * G[:, None] + 2 * cb + e // 2]
                    part = (s.astype(np.float64) * part + acc).astype(np.float32)
                acc = part
            col = 32 * nt + 16 * cb + cr
            if bits == 8:
                acc = acc * np.asarray(scale, np.float32)[col]
            y[cc, col] = acc
    return y[:m, :n]

"""The offline weight layouts of chapter 12's CUDA weight-only GEMV, and numpy references of how the kernel unpacks them.

A batch-1 GEMV reads every weight once, so the layout is chosen offline to make the kernel's work per weight small.
Each lane of a warp loads 16 bytes at a time (32 INT4 or 16 INT8 codes of one row), and the *magic* layouts put the
codes in the order that the magic-number conversion wants:
    magic W8  byte u = q + 128 (offset binary), row-major. The kernel's PRMT puts the byte 0x64 above u:
              the FP16 bits 0x64uu are the number 1024 + u, so one HSUB2 of 1152 gives q for two weights.
    magic W4  32-bit words (N, K / 8); word j holds elements 8j..8j+7 of its row as nibbles
              [e0 e2 e4 e6 e1 e3 e5 e7] (nibble i = bits 4i..4i+3), u = q + 8. Nibbles i and i + 4 sit in the two
              16-bit halves at the same place, so one LOP3 (mask, OR 0x6400) makes the FP16 pair (1024 + u[2i],
              1024 + u[2i+1]) (or 16 u for the nibbles at bits 4..7): two neighbouring elements, which meet the
              activation pair (x[2i], x[2i+1]) that one 32-bit load brings; one HSUB2 or HFMA2 gives both codes.
    natural   int8 codes (W8) and `helpers.quant.weight_only.pack_int4` bytes (W4): what steps 0 and 1 of the path read.
The *fragment* layouts feed the tensor-core GEMM (``wo_gemm.cu``), whose weights are the B operand of
``mma.sync.m16n8k16``: lane l = 4 g + t of a warp holds, per mma, B[k][n] for n = g and k = 2t, 2t+1 (register b0)
and 2t+8, 2t+9 (b1). The weight is cut into 32 x 32 (n x k) tiles; in tile (nt, c) each lane's 16-byte pieces hold
exactly its B fragments for the tile's 4 column blocks of 8 (j) and 2 k-steps of 16 (s): 8 mma's.
    fragment W4  one 16-byte piece per lane: word j holds, as nibbles i = 0..7, u = q + 8 of column 32 nt + 8 j + g at
                 k = 32 c + 2t + GEMM_W4_NIBBLE_K[i]: nibbles i and i + 4 sit in the two 16-bit halves, so the LOP3
                 of the GEMV makes one B register (two k neighbours) at a time: (0,4) s0 b0, (1,5) s0 b1, (2,6) s1 b0,
                 (3,7) s1 b1. Scales (K / G, N_pad) FP16, the 4 of a lane's columns adjacent (one 8-byte load).
    fragment W8  two 16-byte pieces per lane (piece p = k-step s): word j holds bytes u = q + 128 of column
                 32 nt + 8 j + g at k = 32 c + 16 p + 2t + (0, 1, 8, 9): PRMT 0x4140 gives b0, 0x4342 gives b1.
Memory order is [nt][c][piece][lane][word], so each warp load is 512 contiguous bytes; N is padded to a multiple of 32.
The packers take torch tensors (CPU or GPU); the ``np_*`` functions are the numpy references the tests check them
with, bit by bit, including an emulation of the FP16 arithmetic of the conversion.

Serves: core — used by chapter 12 and lab 13.
"""

from __future__ import annotations

import numpy as np
import torch

from helpers.quant import weight_only as wo
from helpers.errors import InputError
from helpers.validation import require_choice, require_int_range

W4_NIBBLE_ELEMENT = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i of a magic W4 word holds element W4_NIBBLE_ELEMENT[i]
FP16_1024 = 0x6400  # the FP16 bits of 1024.0: with u in the low mantissa bits, 0x6400 | u is 1024 + u
PIECE_BYTES = 16  # one lane's load
TILE = 32  # the GEMM's weight tile: 32 columns (n) x 32 inputs (k), one warp load (W4) or two (W8)
GEMM_W4_NIBBLE_K = (0, 8, 16, 24, 1, 9, 17, 25)  # nibble i of a fragment W4 word: k offset from 32 c + 2 t
GEMM_W8_BYTE_K = (0, 1, 8, 9)  # byte b of a fragment W8 word: k offset from 32 c + 16 p + 2 t


def require_codes(q: torch.Tensor, lo: int, hi: int, multiple: int, what: str) -> torch.Tensor:
    """q as a 2-D integer tensor with values in lo..hi and K a multiple of `multiple`, or InputError."""
    if not isinstance(q, torch.Tensor) or q.ndim != 2 or q.is_floating_point():
        raise InputError(f"q must be a 2-D integer torch tensor of {what} codes (N, K), got "
                         f"{type(q).__name__} {tuple(getattr(q, 'shape', ()))}; quantize first (helpers.quant.weight_only).")
    if q.shape[1] % multiple:
        raise InputError(f"K={q.shape[1]} must be a multiple of {multiple} for the {what} layout "
                         f"(one lane loads {PIECE_BYTES} bytes); pad the weight's inputs.")
    if q.numel() and (int(q.min()) < lo or int(q.max()) > hi):
        raise InputError(f"{what} codes must lie in {lo}..{hi}, got {int(q.min())}..{int(q.max())}.")
    return q


def magic_w8(q: torch.Tensor) -> torch.Tensor:
    """INT8 codes (N, K) as offset-binary bytes u = q + 128 (uint8, N x K): the magic W8 layout."""
    require_codes(q, -128, 127, 16, "INT8")
    return (q.to(torch.int16) + 128).to(torch.uint8).contiguous()


def magic_w4(q: torch.Tensor) -> torch.Tensor:
    """INT4 codes (N, K) in the magic W4 layout: int32 words (N, K / 8), nibbles [e0 e2 e4 e6 e1 e3 e5 e7], u = q + 8."""
    require_codes(q, wo.INT4_MIN, wo.INT4_MAX, 32, "INT4")
    n, k = q.shape
    u = (q.to(torch.int64) + 8).reshape(n, k // 8, 8)
    word = torch.zeros(n, k // 8, dtype=torch.int64, device=q.device)
    for i, e in enumerate(W4_NIBBLE_ELEMENT):
        word |= u[:, :, e] << (4 * i)
    return torch.where(word >= 2**31, word - 2**32, word).to(torch.int32).contiguous()


def natural_w4(q: torch.Tensor) -> torch.Tensor:
    """INT4 codes (N, K) packed two a byte, element 2i in the low nibble (uint8, N x K / 2): steps 0 and 1 read this."""
    require_codes(q, wo.INT4_MIN, wo.INT4_MAX, 32, "INT4")
    return wo.pack_int4(q.to(torch.int8)).contiguous()


def gemm_index(bits: int, n_pad: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, k) of every code in a fragment layout: arrays that broadcast to (N_pad/32, K/32, pieces, 32 lanes, 4 words,
    codes a word) (n varies along tiles, lanes and words only, k along k-tiles, pieces, lanes and codes)."""
    require_choice(bits, (4, 8), "bits")
    if n_pad % TILE or k % TILE:
        raise InputError(f"the fragment layout needs N and K multiples of {TILE}, got N={n_pad}, K={k}; pad them.")
    pieces, offs = (1, GEMM_W4_NIBBLE_K) if bits == 4 else (2, GEMM_W8_BYTE_K)
    nt, c, p, lane, j, e = np.ix_(*(np.arange(v) for v in (n_pad // TILE, k // TILE, pieces, 32, 4, len(offs))))
    g, t = lane // 4, lane % 4
    return TILE * nt + 8 * j + g, TILE * c + 16 * p + 2 * t + np.asarray(offs)[e]


def _pad_rows(q: torch.Tensor, n_pad: int, fill: int) -> torch.Tensor:
    """q (N, K) with rows N..n_pad-1 set to `fill`."""
    if n_pad == q.shape[0]:
        return q
    return torch.cat([q, torch.full((n_pad - q.shape[0], q.shape[1]), fill, dtype=q.dtype, device=q.device)])


def require_group(group: int, what: str) -> int:
    """A W4 group size that is a power of two >= 32 (a 32-input piece or tile never spans two groups), or InputError."""
    if group < 32 or group & (group - 1):
        raise InputError(f"{what} needs group_size a power of two >= 32 (32 inputs loaded together never span two "
                         f"groups); got {group}. Quantize with quantize_w4(w, 32), 64 or 128.")
    return group


def padded(n: int) -> int:
    """N rounded up to the GEMM's tile."""
    return -(-n // TILE) * TILE


def gemm_w4(q: torch.Tensor) -> torch.Tensor:
    """INT4 codes (N, K) in the fragment W4 layout: int32 words, (N_pad/32) * (K/32) * 32 lanes * 4, flat."""
    require_codes(q, wo.INT4_MIN, wo.INT4_MAX, TILE, "INT4")
    n_pad, k = padded(q.shape[0]), q.shape[1]
    nn, kk = (torch.from_numpy(a).to(q.device) for a in gemm_index(4, n_pad, k))
    u = _pad_rows(q.to(torch.int64), n_pad, 0) + 8
    codes = u[nn, kk]  # (..., 4 words, 8 nibbles), gathered on q's device
    word = sum(codes[..., i] << (4 * i) for i in range(8))
    return torch.where(word >= 2**31, word - 2**32, word).to(torch.int32).reshape(-1).contiguous()


def gemm_w8(q: torch.Tensor) -> torch.Tensor:
    """INT8 codes (N, K) in the fragment W8 layout: bytes u = q + 128, (N_pad/32) * (K/32) * 2 * 32 * 4 * 4, flat."""
    require_codes(q, -128, 127, TILE, "INT8")
    n_pad, k = padded(q.shape[0]), q.shape[1]
    nn, kk = (torch.from_numpy(a).to(q.device) for a in gemm_index(8, n_pad, k))
    u = _pad_rows(q.to(torch.int16), n_pad, 0) + 128
    return u[nn, kk].to(torch.uint8).reshape(-1).contiguous()


def gemm_scales_w4(scale: torch.Tensor) -> torch.Tensor:
    """Group scales (N, K/G) as FP16 (K/G, N_pad); in each 32-column tile lane group g's 4 columns 8j + g sit at 4g + j."""
    if not isinstance(scale, torch.Tensor) or scale.ndim != 2:
        raise InputError(f"scale must be a 2-D tensor (N, K / group), got {type(scale).__name__}.")
    n_pad = padded(scale.shape[0])
    s = _pad_rows(scale.half(), n_pad, 0).T  # (groups, N_pad)
    perm = torch.tensor(GEMM_SCALE_COLUMN * (n_pad // TILE)) + torch.arange(n_pad // TILE).repeat_interleave(TILE) * TILE
    return s[:, perm.to(s.device)].contiguous()


GEMM_SCALE_COLUMN = tuple(8 * (i % 4) + i // 4 for i in range(TILE))  # position 4g + j of a tile holds column 8j + g


# ---- numpy references: what the kernel's bit operations compute, checked against the codes ----

def np_half_bits(bits: np.ndarray) -> np.ndarray:
    """uint16 FP16 bit patterns as float32 numbers (numpy's float16 is IEEE binary16, as the GPU's)."""
    return np.asarray(bits, np.uint16).view(np.float16).astype(np.float32)


def np_magic_w4_pairs(words: np.ndarray) -> np.ndarray:
    """Emulate the kernel on magic W4 words (..., W) in FP16 arithmetic; the codes (..., 8 W) in element order.

    Per word v and its shift v >> 8 the kernel ORs 0x6400 into two masks: 0x000F000F gives the pair
    (1024 + u, 1024 + u'), minus 1032 is the codes; 0x00F000F0 gives (1024 + 16u, 1024 + 16u'), times 1/16 minus 72
    is the codes. The four pairs are elements (0, 1), (2, 3), (4, 5), (6, 7) of the word's eight.
    """
    w = np.asarray(words).astype(np.int64) & 0xFFFFFFFF
    out = np.empty(w.shape + (8,), np.float32)
    magic = FP16_1024 * 0x10001
    for i, (v, mask) in enumerate(((w, 0x000F000F), (w, 0x00F000F0), (w >> 8, 0x000F000F), (w >> 8, 0x00F000F0))):
        t = (v & mask) | magic  # one LOP3: two FP16 numbers
        for h in range(2):
            f = np_half_bits((t >> (16 * h)) & 0xFFFF).astype(np.float16)
            if mask == 0x000F000F:
                q = f - np.float16(1032)  # HSUB2, exact
            else:
                q = f * np.float16(1 / 16) + np.float16(-72)  # HFMA2, exact: 1/16 is a power of two
            out[..., 2 * i + h] = q.astype(np.float32)
    return out.reshape(*w.shape[:-1], w.shape[-1] * 8)


def np_byte_perm(x: np.ndarray, y: int, selector: int) -> np.ndarray:
    """CUDA's __byte_perm(x, y, s) on uint32 arrays: output byte i is byte (s >> 4i) & 7 of the 8 bytes {y, x}."""
    x = np.asarray(x).astype(np.int64) & 0xFFFFFFFF
    pool = [(x >> (8 * b)) & 0xFF for b in range(4)] + [np.full_like(x, (y >> (8 * b)) & 0xFF) for b in range(4)]
    return sum(pool[(selector >> (4 * i)) & 7] << (8 * i) for i in range(4))


def np_magic_w8_pairs(u8: np.ndarray) -> np.ndarray:
    """Emulate the kernel on magic W8 bytes (..., K): PRMT 0x4140 / 0x4342 with 0x64, minus 1152, as codes (..., K)."""
    b = np.ascontiguousarray(np.asarray(u8, np.uint8))
    words = b.view("<u4").astype(np.int64)
    out = np.empty(words.shape + (4,), np.float32)
    for j, sel in enumerate((0x4140, 0x4342)):
        t = np_byte_perm(words, 0x64646464, sel)
        for h in range(2):
            v = np_half_bits((t >> (16 * h)) & 0xFFFF).astype(np.float16) - np.float16(1152)
            out[..., 2 * j + h] = v.astype(np.float32)
    return out.reshape(b.shape)


def np_natural_w4(packed: np.ndarray) -> np.ndarray:
    """Codes of natural W4 bytes (..., K / 2) as the kernel's shifts read them: nibble t of a word is element t."""
    words = np.ascontiguousarray(np.asarray(packed, np.uint8)).view("<u4").astype(np.int64)
    out = np.empty(words.shape + (8,), np.int64)
    for t in range(8):
        v = (words << (32 - 4 * (t + 1))) & 0xFFFFFFFF  # shift code t to the top, then sign-extend it down
        out[..., t] = np.where(v >= 2**31, v - 2**32, v) >> 28
    return out.reshape(*words.shape[:-1], words.shape[-1] * 8)


def np_unpack_magic_w4(words: np.ndarray) -> np.ndarray:
    """Integer reference: the signed codes (..., 8 W) of magic W4 words, read nibble by nibble."""
    w = np.asarray(words).astype(np.int64) & 0xFFFFFFFF
    out = np.empty(w.shape + (8,), np.int64)
    for i, e in enumerate(W4_NIBBLE_ELEMENT):
        out[..., e] = ((w >> (4 * i)) & 0xF) - 8
    return out.reshape(*w.shape[:-1], w.shape[-1] * 8)


def traffic(bits: int, rows: int, batch: int = 1, group: int = 128) -> dict[str, float]:
    """Bytes one warp step reads per byte of weights: activations (reused by `rows` rows) and scales, from the code."""
    require_int_range(bits, 4, 16, "bits")
    require_int_range(rows, 1, 64, "rows")
    require_int_range(batch, 1, 64, "batch")
    per_piece = 128 // bits  # weights in one lane's 16-byte load
    act = batch * per_piece * 2 / (PIECE_BYTES * rows)  # FP16 activations, one load for `rows` rows
    scale = 2 / (group * bits / 8) if bits == 4 else 0.0
    return {"weights": 1.0, "activations": act, "scales": scale, "total": 1.0 + act + scale}

"""helpers.quant.wo_layout's fragment layouts for the tensor-core GEMM: each code sits where mma.sync expects it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.errors import InputError
from helpers.kernels import wo_gemm_twin as twin
from helpers.quant import wo_layout as L


def test_every_lane_piece_holds_the_b_fragments_the_ptx_table_names():
    """Independently of the packer: word j, nibble i of lane 4g + t is mma (s, j)'s register r, half h, at B[k][n]."""
    nn, kk = np.broadcast_arrays(*L.gemm_index(4, 64, 64))
    kb, nb = twin.b_owner()
    decode = {0: (0, 0, 0), 4: (0, 0, 1), 1: (0, 1, 0), 5: (0, 1, 1), 2: (1, 0, 0), 6: (1, 0, 1), 3: (1, 1, 0),
              7: (1, 1, 1)}  # nibble -> (k-step, register, half), as the kernel's LOP3 masks and >> 8 read it
    for lane in range(32):
        for i, (s, r, h) in decode.items():
            assert np.all(nn[:, :, 0, lane, :, i] % 32 == 8 * np.arange(4) + nb[lane, r, h])
            assert np.all(kk[:, :, 0, lane, :, i] % 32 == 16 * s + kb[lane, r, h])
    nn8, kk8 = np.broadcast_arrays(*L.gemm_index(8, 32, 32))
    for lane in range(32):
        for b in range(4):  # byte b of word j of piece p: register b // 2, half b % 2 of k-step p
            assert np.all(kk8[0, 0, :, lane, :, b] == 16 * np.arange(2)[:, None] + kb[lane, b // 2, b % 2])
            assert np.all(nn8[0, 0, :, lane, :, b] == 8 * np.arange(4) + nb[lane, b // 2, b % 2])


@pytest.mark.parametrize("bits", [4, 8])
def test_the_index_covers_every_weight_exactly_once(bits):
    nn, kk = L.gemm_index(bits, 64, 96)
    flat = np.broadcast_arrays(nn, kk)
    seen = np.zeros((64, 96), int)
    np.add.at(seen, (flat[0].ravel(), flat[1].ravel()), 1)
    assert np.all(seen == 1)


def test_layouts_round_trip_through_the_index():
    torch.manual_seed(1)
    q4 = torch.randint(-8, 8, (40, 64), dtype=torch.int8)
    words = L.gemm_w4(q4).numpy().astype(np.int64) & 0xFFFFFFFF
    nn, kk = L.gemm_index(4, 64, 64)
    nib = (words.reshape(2, 2, 1, 32, 4)[..., None] >> (4 * np.arange(8))) & 0xF
    back = np.full((64, 64), 99)
    back[np.broadcast_arrays(nn, kk)] = nib - 8
    assert np.array_equal(back[:40], q4.numpy()) and np.all(back[40:] == 0)  # padded rows hold code 0
    q8 = torch.randint(-128, 128, (33, 32), dtype=torch.int8)
    u = L.gemm_w8(q8).numpy().reshape(2, 1, 2, 32, 4, 4)
    nn8, kk8 = L.gemm_index(8, 64, 32)
    back8 = np.zeros((64, 32), int)
    back8[np.broadcast_arrays(nn8, kk8)] = u.astype(int) - 128
    assert np.array_equal(back8[:33], q8.numpy())


def test_scale_layout_puts_a_lanes_four_columns_side_by_side():
    s = torch.arange(40 * 3, dtype=torch.float32).reshape(40, 3) / 8
    lay = L.gemm_scales_w4(s)
    assert lay.shape == (3, 64) and lay.dtype == torch.float16
    for g in range(8):
        for j in range(4):
            assert torch.equal(lay[:, 32 + 4 * g + j], s[32 + 8 * j + g].half()) if 32 + 8 * j + g < 40 else \
                bool((lay[:, 32 + 4 * g + j] == 0).all())


def test_a_shifted_nibble_table_is_caught():
    q4 = torch.randint(-8, 8, (32, 32), dtype=torch.int8)
    good = L.gemm_w4(q4)
    old = L.GEMM_W4_NIBBLE_K
    try:
        L.GEMM_W4_NIBBLE_K = (0, 1, 16, 17, 8, 9, 24, 25)  # a plausible but wrong order (b1 and the half swapped)
        bad = L.gemm_w4(q4)
    finally:
        L.GEMM_W4_NIBBLE_K = old
    assert not torch.equal(good, bad)
    d_bad = twin.np_dense(4, bad.numpy(), L.gemm_scales_w4(torch.ones(32, 1)).numpy(), 32, 32, 32)
    assert not np.array_equal(d_bad, q4.numpy().astype(np.float32))


def test_bad_shapes_are_named():
    with pytest.raises(InputError, match="multiple of 32"):
        L.gemm_w4(torch.zeros(2, 48, dtype=torch.int8))
    with pytest.raises(InputError, match="bits"):
        L.gemm_index(2, 32, 32)
    with pytest.raises(InputError, match="multiples of 32"):
        L.gemm_index(4, 40, 32)

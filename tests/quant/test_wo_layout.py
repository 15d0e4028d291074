"""helpers.quant.wo_layout: the CUDA GEMV's weight layouts, checked bit by bit against the integer codes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.errors import InputError
from helpers.quant import weight_only as wo
from helpers.quant import wo_layout as L


@pytest.fixture()
def q4() -> torch.Tensor:
    torch.manual_seed(0)
    q = torch.randint(-8, 8, (5, 96), dtype=torch.int8)
    q[0, :8] = torch.tensor([-8, -7, -1, 0, 1, 6, 7, -8])  # the extremes and zero, at known places
    return q


def test_magic_w4_words_hold_each_element_where_the_nibble_table_says(q4):
    words = L.magic_w4(q4)
    assert words.dtype == torch.int32 and words.shape == (5, 12)
    w = words.numpy().astype(np.int64) & 0xFFFFFFFF
    for i, e in enumerate(L.W4_NIBBLE_ELEMENT):  # nibble i of word j is element 8j + e, offset by 8
        assert np.array_equal((w >> (4 * i)) & 0xF, q4.numpy()[:, e::8].astype(np.int64) + 8)
    assert np.array_equal(L.np_unpack_magic_w4(words.numpy()), q4.numpy())


def test_the_magic_number_conversion_gives_the_codes_exactly_in_element_order(q4):
    got = L.np_magic_w4_pairs(L.magic_w4(q4).numpy())
    assert np.array_equal(got, q4.numpy().astype(np.float32))
    q8 = torch.randint(-128, 128, (3, 48), dtype=torch.int8)
    q8[0, :4] = torch.tensor([-128, -1, 0, 127])
    u8 = L.magic_w8(q8)
    assert u8.dtype == torch.uint8 and int(u8[0, 0]) == 0 and int(u8[0, 3]) == 255
    assert np.array_equal(L.np_magic_w8_pairs(u8.numpy()), q8.numpy().astype(np.float32))


def test_a_wrong_layout_is_caught_by_the_emulation(q4):
    words = L.magic_w4(q4).numpy()
    natural = L.natural_w4(q4).numpy().view("<u4").reshape(words.shape)  # the plain packing, read as magic words
    assert not np.array_equal(L.np_magic_w4_pairs(natural), q4.numpy())
    swapped = ((words.astype(np.int64) >> 16) | ((words.astype(np.int64) & 0xFFFF) << 16)).astype(np.uint32)
    assert not np.array_equal(L.np_magic_w4_pairs(swapped), q4.numpy())  # halves swapped: pairs reversed


def test_natural_layout_is_pack_int4_and_the_shift_reading_recovers_it(q4):
    packed = L.natural_w4(q4)
    assert torch.equal(packed, wo.pack_int4(q4))
    assert np.array_equal(L.np_natural_w4(packed.numpy()), q4.numpy())


def test_byte_perm_matches_cuda_semantics():
    x = np.array([0x44332211], dtype=np.uint32)
    assert int(L.np_byte_perm(x, 0x88776655, 0x3210)[0]) == 0x44332211
    assert int(L.np_byte_perm(x, 0x88776655, 0x7654)[0]) == 0x88776655
    assert int(L.np_byte_perm(x, 0x64646464, 0x4140)[0]) == 0x64226411


def test_traffic_counts_activation_bytes_per_weight_byte():
    assert L.traffic(4, 1)["activations"] == 4.0 and L.traffic(4, 4)["activations"] == 1.0
    assert L.traffic(8, 2)["activations"] == 1.0 and L.traffic(16, 1)["activations"] == 1.0
    assert L.traffic(4, 8, group=128)["scales"] == pytest.approx(2 / 64)


def test_bad_codes_are_named():
    with pytest.raises(InputError, match="multiple of 32"):
        L.magic_w4(torch.zeros(2, 40, dtype=torch.int8))
    with pytest.raises(InputError, match="-8..7"):
        L.magic_w4(torch.full((2, 32), 9, dtype=torch.int8))
    with pytest.raises(InputError, match="integer torch tensor"):
        L.magic_w8(torch.zeros(2, 32))
    with pytest.raises(InputError, match="bits"):
        L.traffic(3.5, 1)

"""Lab 13 checks: the solution kernels pass (visible and hidden cases) and a differently written correct answer
too; each known-wrong kernel is rejected for the right reason (swapped nibbles, no -8 offset, two's complement
read, uint8 wrap-around, the scale of the wrong group, reductions that drop lanes, races in a shared-memory
reduction, uncoalesced or repeated weight loads); warp shuffles, which the simulator lacks, are explained."""

from __future__ import annotations

import pytest
from numba import cuda, float32, int32

from helpers.grading.check import CheckFailed, check, verify
from instructors.keys import lab13_weight_only_gemv as key
from instructors.keys.lab13_weight_only_gemv import unpack_int4, warp_sum  # globals the kernels below call


# ---------- unpack ----------

@cuda.jit(device=True)
def unpack_swapped(b):
    """Known wrong: the high nibble first."""
    v = int32(b)
    return (v >> 4) - 8, (v & 0xF) - 8


@cuda.jit(device=True)
def unpack_no_offset(b):
    """Known wrong: the stored nibbles, 0..15."""
    v = int32(b)
    return v & 0xF, v >> 4


@cuda.jit(device=True)
def unpack_twos_complement(b):
    """Known wrong: decodes two's complement nibbles (pack_int4's storage), not offset binary."""
    v = int32(b)
    lo, hi = v & 0xF, v >> 4
    return (lo - 16 if lo > 7 else lo), (hi - 16 if hi > 7 else hi)


@cuda.jit(device=True)
def unpack_uint8(b):
    """Known wrong in the simulator: subtracts from the uint8 byte itself, which wraps around at 256."""
    return (b & 0xF) - 8, (b >> 4) - 8


@cuda.jit(device=True)
def unpack_shifts(b):
    """Correct, written another way: shift-and-mask both nibbles, offset as one subtraction each."""
    lo = int32(b) % 16
    hi = int32(b) // 16
    return lo - 8, hi - 8


@pytest.mark.parametrize("exercise, fn", [("lab13.unpack", key.unpack_int4), ("lab13.unpack", unpack_shifts)])
def test_correct_unpacks_pass_visible_and_hidden_cases(exercise, fn):
    verify(exercise, fn)


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize("fn, why", [
    (unpack_swapped, "wrong order"), (unpack_no_offset, "run 0..15"),
    (unpack_twos_complement, "two's complement"), (unpack_uint8, "wraps around at 256")])
def test_known_wrong_unpacks_are_rejected(fn, why):
    with pytest.raises(CheckFailed, match=why):
        check("lab13.unpack", fn, plot=False)


# ---------- warp sum ----------

def _shared_sum(first: int = 16, last: int = 1, barriers: bool = True, guard_all: bool = False):
    """A shared-memory tree from step `first` down to `last`: without barriers, or with every lane that has a
    partner adding (a race the one-thread-at-a-time replay cannot show in the values)."""

    @cuda.jit(device=True)
    def reduce(v):
        sh = cuda.shared.array(32, float32)
        lane = cuda.threadIdx.x % 32
        sh[lane] = v
        if barriers:
            cuda.syncthreads()
        s = first
        while s >= last:
            if (lane + s < 32) if guard_all else (lane < s):
                sh[lane] += sh[lane + s]
            if barriers:
                cuda.syncthreads()
            s //= 2
        return sh[0]

    return reduce


@cuda.jit(device=True)
def sum_by_rounds(v):
    """Correct, written another way: a for loop over the steps, lane number from cuda.laneid."""
    slots = cuda.shared.array(32, float32)
    slots[cuda.laneid] = v
    cuda.syncthreads()
    for step in (16, 8, 4, 2, 1):
        if cuda.laneid < step:
            slots[cuda.laneid] = slots[cuda.laneid] + slots[cuda.laneid + step]
        cuda.syncthreads()
    return slots[0]


@cuda.jit(device=True)
def sum_shuffles(v):
    """Right on a GPU, but the simulator that replays kernels has no warp shuffles: explained, not accepted."""
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    return v


@pytest.mark.parametrize("fn", [key.warp_sum, sum_by_rounds])
def test_correct_warp_sums_pass_visible_and_hidden_cases(fn):
    verify("lab13.warp_sum", fn)


@pytest.mark.parametrize("fn, why", [
    (_shared_sum(first=8), "yours 120.0 vs expected 496.0"), (_shared_sum(last=2), "yours 240.0 vs expected 496.0"),
    (_shared_sum(barriers=False), "elements differ(.|\n)*data race"),
    (_shared_sum(guard_all=True), "values are right here(.|\n)*data race: element"),
    (sum_shuffles, "has no warp shuffles"),
])
def test_known_wrong_warp_sums_are_rejected(fn, why):
    with pytest.raises(CheckFailed, match=why):
        check("lab13.warp_sum", fn, plot=False)


# ---------- the GEMV ----------

def _gemv(unpack=unpack_int4, reduce=warp_sum, byte_group: bool = False, chunked: bool = False,
          whole_row: bool = False):
    """The GEMV with one mistake switched on (another unpack or reduction, the group of the byte, loads)."""

    @cuda.jit
    def kernel(packed, scales, x, y):
        row = cuda.blockIdx.x
        lane = cuda.threadIdx.x
        nbytes = packed.shape[1]
        group = 2 * nbytes // scales.shape[1]
        per = (nbytes + 31) // 32
        start, stop, step = (lane * per, min(nbytes, lane * per + per), 1) if chunked else (lane, nbytes, 32)
        if whole_row:
            start, stop, step = 0, nbytes, 1
        acc = float32(0)
        for j in range(start, stop, step):
            lo, hi = unpack(packed[row, j])
            k = 2 * j
            g = j // group if byte_group else k // group
            acc += scales[row, g] * (float32(lo) * x[k] + float32(hi) * x[k + 1])
        total = reduce(acc)
        if lane == 0:
            y[row] = acc if whole_row else total

    return kernel


@cuda.jit
def gemv_two_rows_of_bytes(packed, scales, x, y):
    """Correct, written another way: a while loop, the byte unpacked inline, the sum by rounds."""
    row = cuda.blockIdx.x
    lane = cuda.laneid
    group = 2 * packed.shape[1] // scales.shape[1]
    acc = float32(0)
    j = lane
    while j < packed.shape[1]:
        v = int32(packed[row, j])
        s = scales[row, (2 * j) // group]
        acc += s * float32((v & 15) - 8) * x[2 * j] + s * float32((v >> 4) - 8) * x[2 * j + 1]
        j += 32
    acc = sum_by_rounds(acc)
    if lane == 0:
        y[row] = acc


@pytest.mark.parametrize("fn", [key.gemv_w4, gemv_two_rows_of_bytes])
def test_correct_gemvs_pass_visible_and_hidden_cases(fn):
    verify("lab13.gemv", fn)


@pytest.mark.parametrize("fn, why", [
    (_gemv(unpack=unpack_swapped), "exactly those of a kernel that reads element 2j from the high nibble"),
    (_gemv(unpack=unpack_no_offset), "exactly those of a kernel that leaves the codes at 0..15"),
    (_gemv(byte_group=True), "exactly those of a kernel that takes each scale's group from the byte index"),
    (_gemv(reduce=_shared_sum(first=8)), "exactly those of a kernel that adds up the partial sums of only 16"),
    (_gemv(reduce=_shared_sum(guard_all=True)), "values are right here(.|\n)*data race"),
    (_gemv(reduce=sum_shuffles), "has no warp shuffles"),
    (_gemv(chunked=True), "lanes read bytes far apart"),
    (_gemv(whole_row=True), "threads read the same weight byte"),
])
def test_known_wrong_gemvs_are_rejected(fn, why):
    small = [key.gemv_case("1 row, K = 128, groups of 32", 1, 128, 32, 135)]  # two bytes a lane: fast
    with pytest.raises(CheckFailed, match=why):
        check("lab13.gemv", fn, plot=False, cases=small)

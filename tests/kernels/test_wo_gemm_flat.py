"""helpers.kernels.wo_gemm_flat: the work split, the counters, the numpy twin of the swapped and plain fragments,
NVRTC compilation, inputs, the measured dispatch; on a GPU every launch against the reference and graph replay."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from helpers.errors import InputError
from helpers.kernels import wo_gemm as G
from helpers.kernels import wo_gemm_flat as F
from helpers.kernels import wo_gemm_flat_twin as ftwin
from helpers.kernels import wo_gemm_nvrtc as nv
from helpers.quant import weight_only as wo


def exact(q) -> np.ndarray:
    """The float32 weight the kernels multiply by: W4 fp16(q * s), W8 q * s."""
    if isinstance(q, wo.W8Weight):
        return (q.q.float() * q.scale[:, None]).numpy()
    s = q.scale.half().float().repeat_interleave(q.group_size, dim=1)
    return (wo.unpack_int4(q.packed).float() * s).half().float().numpy()


@pytest.mark.parametrize("units, warps", [(24, 6), (24, 24), (24, 100), (44032, 2640), (16384, 2112), (7, 3)])
def test_every_unit_belongs_to_exactly_one_warp_and_runs_are_equal(units, warps):
    runs = F.runs(units, warps)
    covered = [u for u0, u1 in runs for u in range(u0, u1)]
    assert covered == list(range(units))  # contiguous, in order, each once
    lengths = {u1 - u0 for u0, u1 in runs}
    assert max(lengths) - min(lengths) <= 1


@pytest.mark.parametrize("nch", [1, 4, 8, 128])
def test_segments_cut_a_run_at_column_tiles_and_cover_it(nch):
    for u0, u1 in [(0, 1), (3, 19), (5, 5 + 3 * nch + 2), (0, 2 * nch)]:
        segs = F.segments(u0, u1, nch)
        assert sum(chunks for _, _, chunks in segs) == u1 - u0
        u = u0
        for tile, c, chunks in segs:
            assert (tile, c) == divmod(u, nch) and 1 <= chunks <= nch - c
            u += chunks
        assert all(c == 0 for _, c, _ in segs[1:])  # only the first piece may start inside a tile


@pytest.mark.parametrize("n, k, warps", [(4096, 4096, 2640), (72, 256, 5), (72, 256, 24), (40, 128, 1),
                                         (200, 1024, 20)])
def test_the_counters_complete_every_split_tile_once_and_whole_tiles_skip_them(n, k, warps):
    nch, tiles = k // 32, -(-n // 32)
    arrivals: dict[int, list[int]] = {}
    whole = []
    for u0, u1 in F.runs(tiles * nch, warps):
        for tile, _, chunks in F.segments(u0, u1, nch):
            (whole.append(tile) if chunks == nch else arrivals.setdefault(tile, []).append(chunks))
    assert sorted(whole + list(arrivals)) == list(range(tiles))
    for tile, adds in arrivals.items():
        assert len(adds) >= 2 and sum(adds) == nch
        done = [i for i in range(len(adds)) if sum(adds[:i + 1]) == nch]
        assert done == [len(adds) - 1]  # in any order of arrival, only the last add reaches nch


def test_the_grid_fills_the_resident_warps_but_never_exceeds_the_units():
    assert F.grid_blocks(11008, 4096, 5, 132) == 660
    assert F.grid_blocks(72, 256, 5, 132) == 6  # 24 units: one a warp
    assert F.grid_blocks(40, 32, 8, 132) == 1


@pytest.mark.parametrize("config", list(F.CONFIGS))
@pytest.mark.parametrize("m", [1, 3, 8, 17])
def test_the_twin_of_the_flat_kernel_matches_the_reference(config, m):
    torch.manual_seed(m)
    w16 = torch.randn(72, 128) * 0.02
    x = torch.randn(m, 128).half()
    for q in (wo.quantize_w4(w16, 32), wo.quantize_w8(w16)):
        p = G.prepare(q)
        ref = x.float().numpy() @ exact(q).T
        for warps in (1, 3, 7, 12):  # whole tiles, runs across tiles, one unit a warp
            y, info = ftwin.np_flat(x.numpy(), p.bits, p.data.numpy(), p.scale.numpy(), p.n, p.k, p.group, config,
                                    warps)
            assert y.shape == (m, 72) and np.allclose(y, ref, atol=1e-5, rtol=1e-5), (config, warps)
            assert info["left"] == (0, 0)  # workspace and counters zero again
            assert set(info["whole"]) | set(info["finisher"]) == {0, 1, 2}


def test_a_wrong_swapped_assignment_is_caught():
    """The twin's swapped A operand is the B registers of column blocks 2jj and 2jj + 1; exchanging them fails."""
    torch.manual_seed(0)
    w16 = torch.randn(32, 64) * 0.02
    x = torch.randn(4, 64).half()
    p = G.prepare(wo.quantize_w8(w16))
    frag = ftwin.twin.np_b_fragments(8, p.data.numpy(), p.scale.numpy(), 32, 64)
    good = np.zeros((2, 32, 4), np.float32)
    bad = np.zeros((2, 32, 4), np.float32)
    xp = np.zeros((16, 64), np.float16)
    xp[:4] = x.numpy()
    ftwin._unit_mma(good, frag, xp, True, 0, 0)
    ftwin._unit_mma(bad, frag[:, :, :, [1, 0, 3, 2]], xp, True, 0, 0)
    assert not np.allclose(good, bad)


def test_configs_name_their_instances():
    assert F.kernel_name(4, 8, "s8") == "wo_flat<4, 1, true, 8, 4>"
    assert F.kernel_name(4, 9, "s8") == "wo_flat<4, 1, false, 8, 4>"  # M > 8: the operands are not swapped
    assert F.kernel_name(8, 64, "f8") == "wo_flat<8, 4, false, 4, 4>"  # W8: 2 loads a unit
    assert len(F.check_launches(4, 4)) == 4 * len(F.CHECK_GRIDS) and len(F.check_launches(4, 16)) == 2 * 3


@pytest.mark.skipif(not nv.available(), reason="needs cuda-bindings (NVRTC) and a cuda_fp16.h")
def test_every_flat_instance_compiles_for_hopper_without_spills_and_the_estimate_follows_ptxas():
    from helpers.kernels.occupancy import occupancy

    names = {F.kernel_name(b, m, c): (b, m, c) for b in (4, 8) for m in (1, 16, 32, 64) for c in F.CONFIGS}
    ok, log = nv.compile_log(list(names), "sm_90", "wo_flat")
    assert ok, log
    assert len(nv.spills(log)) >= len(names) and max(nv.spills(log)) == 0, log
    found = re.findall(r"Compiling entry function '_Z7wo_flatILi(\d+)ELi(\d+)ELb(\d)ELi(\d+)ELi(\d+)E.*?"
                       r"Used (\d+) registers", log, re.S)
    assert len(found) == len(names), log
    for bits, mt, swap, ring, warps, regs in found:
        b, m, c = names[f"wo_flat<{bits}, {mt}, {'true' if swap == '1' else 'false'}, {ring}, {warps}>"]
        real = occupancy(32 * F.WARPS, int(regs), 0).blocks_per_sm
        est = F.estimated_blocks_per_sm(b, m, c)
        assert est == real if (b == 4 and m <= 16) else abs(est - real) <= 2, (b, m, c, regs, est, real)


def test_bad_inputs_get_one_line_errors():
    w16 = torch.randn(40, 128) * 0.02
    p = G.prepare(wo.quantize_w8(w16))
    x = torch.zeros(2, 128, dtype=torch.float16)
    with pytest.raises(InputError, match="config"):
        F.gemm(x, p, "z9")
    with pytest.raises(InputError, match="blocks"):
        F.gemm(x, p, "s8", 0)
    with pytest.raises(InputError, match="prepare"):
        F.gemm(x, w16)
    with pytest.raises(InputError, match="K=128"):
        F.gemm(torch.zeros(2, 64, dtype=torch.float16), p)
    with pytest.raises(InputError, match="1..64"):
        F.gemm(torch.zeros(65, 128, dtype=torch.float16), p)
    with pytest.raises(InputError, match="blocks_per_sm"):
        F.blocks_per_sm(3, 8, "s8")
    from helpers.errors import NoGPUError

    with pytest.raises(NoGPUError):
        F.gemm(x, p)


def test_the_measured_table_dispatches_to_the_faster_family():
    key = G.table_key("w4a16", 4096, 4096, 8)
    before = G.set_table({key: {"config": "b", "split": 3, "us": 10.0, "flat": {"config": "s4", "blocks": 5,
                                                                                "us": 8.0}}})
    try:
        assert F.choice("w4a16", 4096, 4096, 8) == ("flat", "s4", 5)
        G.set_table({key: {"config": "b", "split": 3, "us": 7.0, "flat": {"config": "s4", "blocks": 5, "us": 8.0}}})
        assert F.choice("w4a16", 4096, 4096, 8) == ("gemm", "b", 3)
        assert F.choice("w4a16", 4096, 4096, 16) is None
    finally:
        G.set_table(before)
    from helpers.kernels import wo_gemm_check as C

    rows = [{"kernel": k, "scheme": s, "shape": "64x64", "M": 2, "us": us, "lo": us, "hi": us} for k, s, us in (
        ("cuBLAS fp16", "fp16", 10.0), ("gemm b s1 w4a16", "w4a16", 5.0), ("flat s8 b5 w4a16", "w4a16", 4.0),
        ("flat f8 b4 w4a16", "w4a16", 4.5), ("gemv w4a16", "w4a16", 6.0))]
    table, lines = C.summarize(rows)
    assert table == {"w4a16 64x64 m2": {"config": "b", "split": 1, "us": 5.0, "fastest": "flat",
                                        "flat": {"config": "s8", "blocks": 5, "us": 4.0}}}
    assert any(line.startswith("flat w4a16") and line.split()[-1] == "2.50" for line in lines)


@pytest.mark.gpu
@pytest.mark.parametrize("scheme", ["w4a16", "w8a16"])
def test_every_flat_launch_matches_the_reference_on_the_gpu(scheme):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from helpers.kernels import wo_gemm_flat_check as FC

    rows = [r for r in FC.check(((72, 256), (4104, 512), (200, 1024)), (1, 2, 3, 4, 8, 16, 17, 32, 64))
            if r["scheme"].startswith(scheme)]
    assert rows and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]][:3]


@pytest.mark.gpu
def test_a_captured_flat_launch_replays_twice_with_the_same_answer():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from helpers.kernels import wo_gemm_flat_check as FC

    assert FC.graph_replays_agree()


def test_the_comparison_takes_each_familys_fastest_and_pairs_the_rounds():
    """compare: 'old' is the faster of the GEMM and the GEMV, ratios are cuBLAS ÷ kernel, and the spread comes from
    the geometric means of round i over the shapes (paired), not from unpaired quantiles."""
    from helpers.kernels import wo_gemm_flat_check as FC

    def row(kernel, shape, rounds):
        return {"kernel": kernel, "scheme": "w4a16", "shape": shape, "M": 4, "us": sorted(rounds)[len(rounds) // 2],
                "lo": min(rounds), "hi": max(rounds), "rounds_us": rounds}
    rows = []
    for shape, f in (("4096x4096", 1.0), ("11008x4096", 2.0)):
        rows += [row("cuBLAS fp16", shape, [f * 30.0] * 10), row("gemm a s4 w4a16", shape, [f * 15.0] * 10),
                 row("gemv w4a16", shape, [f * 20.0] * 10),
                 row("flat s8 b2 w4a16", shape, [f * v for v in (10.0,) * 5 + (12.0,) * 5])]
    cell = FC.compare(rows)["w4a16"]["M=4"]
    assert cell["old"]["cases"]["4096x4096"]["kernel"] == "gemm a s4 w4a16"
    assert abs(cell["old"]["geomean"] - 2.0) < 1e-9 and abs(cell["gemv"]["geomean"] - 1.5) < 1e-9
    assert abs(cell["flat"]["geomean_lo"] - 2.5) < 1e-9 and abs(cell["flat"]["geomean_hi"] - 3.0) < 1e-9

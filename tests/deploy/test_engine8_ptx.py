"""Reading a compiled GEMM's PTX (``helpers.deploy.engine8.ptx``) and the chapter's sentence about it."""

from __future__ import annotations

import pytest
import torch

from helpers.deploy.engine8 import kernels, ptx
from helpers.errors import InputError

ASYNC_FP8 = """
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%f1}, %rd5, %rd6, 1, 1, 1;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 1;
    wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%f1}, %rd7, %rd8, 1, 1, 1;
    wgmma.wait_group.sync.aligned 0;
"""
SYNC_INT8 = """
    cp.async.cg.shared.global [ %r5 + 0 ], [ %rd9 + 0 ], 0x10, %r6;
    wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {%r7}, %rd10, %rd11, 1;
    wgmma.wait_group.sync.aligned 0;
"""
AMPERE = "ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];\n mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1};"


def test_the_ptx_says_which_instruction_runs_how_many_groups_stay_in_flight_and_how_tiles_load():
    assert ptx.describe(ASYNC_FP8) == {"instruction": "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3",
                                       "MMA groups in flight": 1, "tile loads": "TMA"}
    assert ptx.describe(SYNC_INT8) == {"instruction": "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8",
                                       "MMA groups in flight": 0, "tile loads": "cp.async"}
    assert ptx.describe(AMPERE) == {"instruction": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                                    "MMA groups in flight": 0, "tile loads": "ld.global"}
    assert ptx.describe("") == {"instruction": "none", "MMA groups in flight": 0, "tile loads": "none"}


class _Rows:
    def __init__(self, rows, gemm=()):
        self.rows = {"instructions": rows, "gemm": list(gemm)}

    def __getitem__(self, k):
        return self.rows[k]

    def where(self):
        return "nowhere"


def _row(fmt, text):
    return {"format": fmt, "shape": "4096x3072x768", "config": [128, 256, 128, 8, 8, 3, "tma"], **ptx.describe(text)}


def test_the_sentence_names_the_cost_only_where_int8_waits_and_fp8_does_not(capsys):
    from helpers.chapters.ch09_deployment import engine_view

    rows = [_row("fp8", ASYNC_FP8), _row("int8", SYNC_INT8)]
    behind = [{"shape": s, "GEMM": g, "× FP16 cuBLAS": x} for s in ("a", "b")
              for g, x in (("fp8 engine", 1.2), ("int8 engine", 1.1))]
    text = engine_view.instruction_sentence(_Rows(rows, behind))
    assert "s32.s8.s8, 0 MMA group(s) in flight" in text and "e4m3, 1 MMA group(s) in flight" in text
    assert "accumulator is FP32" in text and "INT32" in capsys.readouterr().out
    assert "INT8 row behind its FP8 row at all 2 shapes" in text
    # where the same run's GEMM table does not show INT8 behind at every shape, the sentence does not claim it
    ahead_once = [dict(r, **{"× FP16 cuBLAS": 1.3}) if (r["shape"], r["GEMM"]) == ("b", "int8 engine") else r
                  for r in behind]
    assert "behind" not in engine_view.instruction_sentence(_Rows(rows, ahead_once))
    assert "behind" not in engine_view.instruction_sentence(_Rows(rows))
    both_async = engine_view.instruction_sentence(_Rows([_row("fp8", ASYNC_FP8), _row("int8", ASYNC_FP8)]))
    assert "accumulator" not in both_async  # no explanation where nothing needs one
    assert "not stored (nowhere)" in engine_view.instruction_sentence(_Rows([]))


def test_asking_for_the_compiled_kernel_without_a_gpu_is_refused_clearly():
    a = torch.zeros(4, 16, dtype=torch.int8)
    with pytest.raises(InputError, match="compiled=True"):
        kernels.gemm(a, a, torch.ones(4), compiled=True)


@pytest.mark.gpu
def test_on_hopper_fp8_gemms_keep_an_mma_group_in_flight_and_int8_ones_wait_on_a_gpu():
    """What the chapter's sentence reports, on the GPU (Triton 3.6 on an H100: INT8 waits, FP8 overlaps); if a
    Triton release changes it, this test says so and the chapter's sentence drops its explanation."""
    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    from helpers.chapters.ch09_deployment import engine_tune as et

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma is Hopper's")
    rows = {fmt: et.instruction_rows(fmt, {(256, 256, 256): (128, 128, 64, 8, 4, 3, "tma")})[0]
            for fmt in ("fp8", "int8")}
    assert rows["fp8"]["instruction"].startswith("wgmma") and rows["int8"]["instruction"].endswith("s32.s8.s8")
    assert rows["fp8"]["MMA groups in flight"] >= 1 and rows["int8"]["MMA groups in flight"] == 0
    assert rows["fp8"]["tile loads"] == rows["int8"]["tile loads"] == "TMA"

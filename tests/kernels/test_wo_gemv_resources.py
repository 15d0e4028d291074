"""The GEMV's resources per launch: ptxas's registers read from its log, and the batch > 1 launch that converts each
piece once for every row holding more registers (so fewer warps) than the batch-1 launch of the same rows."""

from __future__ import annotations

import pytest

from helpers.kernels import nvrtc_compile as nv
from helpers.kernels import wo_gemv as wg
from helpers.kernels import wo_gemv_resources as R

LOG = """ptxas info    : Compiling entry function '_Z7wo_gemvILi4EEv' for 'sm_90'
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 122 registers, used 1 barriers, 4608 bytes smem
ptxas info    : Compiling entry function 'wo_naive_w4' for 'sm_90'
ptxas info    : Used 32 registers, used 0 barriers
"""


def test_ptxas_log_is_read_per_function():
    assert nv.resources(LOG) == {"_Z7wo_gemvILi4EEv": (122, 4608), "wo_naive_w4": (32, 0)}
    assert nv.resources("") == {}


def test_the_default_launch_keeps_its_rule():
    assert wg.config_for(4, 11008, 4096, 1) == wg.Config(4, 4) == wg.config_for(4, 11008, 4096, 2)
    assert wg.config_for(4, 11008, 4096, 4).rows == 2 and wg.config_for(8, 1, 1, 1) == wg.Config(*wg.FALLBACK[8])


@pytest.mark.skipif(not nv.available(), reason="needs cuda-bindings (NVRTC) and a cuda_fp16.h")
def test_reusing_converted_weights_for_two_rows_costs_registers_and_warps(monkeypatch):
    monkeypatch.setattr(R, "has_gpu", lambda: False)
    one, two = R.of_launch(4, wg.Config(4, 4), 1), R.of_launch(4, wg.Config(4, 4), 2)
    assert one.source.startswith("ptxas of NVRTC") and one.threads == 128 and one.shared_bytes > 0
    assert two.registers > one.registers and two.occupancy.warps_per_sm < one.occupancy.warps_per_sm
    assert R.of_launch(4, wg.Config(2, 4), 2).registers < two.registers  # half the rows: half the converted pieces
    assert R.batch_sentence(4, 11008, 4096, 1, 1) == ""
    monkeypatch.setattr(R.nv, "available", lambda: False)
    assert R.of_launch(4, wg.Config(4, 4), 3) is None and R.batch_sentence(4, 11008, 4096, 1, 3) == ""

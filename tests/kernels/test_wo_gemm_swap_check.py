"""helpers.kernels.wo_gemm_swap_check: the switches it sets and puts back, its summary's verdicts, its refusals, and
(on a GPU) the swapped launches against the reference."""

from __future__ import annotations

import pytest
import torch

from helpers.kernels import wo_gemm as G
from helpers.kernels import wo_gemm_swap_check as S


def test_a_variant_sets_the_switches_and_puts_them_back_even_after_an_error():
    before = (G.SWAPPED[0], G.LATE_SCALE[0])
    with pytest.raises(RuntimeError):
        with S.variant("plain"):
            assert not G.swapped(8) and G.kernel_name(4, 8, "a") == "wo_gemm<4, 1, 4, 4, 3>"
            raise RuntimeError("a failing launch")
    assert (G.SWAPPED[0], G.LATE_SCALE[0]) == before
    with S.variant("swapped"):
        assert G.swapped(8) and G.kernel_name(4, 8, "a").endswith(", true>") and not G.LATE_SCALE[0]
    assert (G.SWAPPED[0], G.LATE_SCALE[0]) == before


def _row(shape: str, scheme: str, m: int, plain: tuple, swapped: tuple) -> dict:
    def t(us, lo, hi):
        return {"launch": "c s3", "us": us, "min": lo, "max": hi}
    return {"scheme": scheme, "shape": shape, "M": m, "cuBLAS fp16": t(20.0, 19.8, 20.2),
            "plain": t(*plain), "swapped": t(*swapped)}


def test_the_summary_says_faster_only_outside_both_ranges():
    rows = [_row(s, "w4a16", 4, (10.0, 9.9, 10.1), (9.0, 8.9, 9.1)) for s in ("a", "b", "c")]
    rows += [_row(s, "w4a16", 8, (10.0, 9.5, 10.5), (9.8, 9.4, 10.2)) for s in ("a", "b", "c")]
    m4, m8 = S.summary(rows)
    assert "w4a16 M = 4" in m4 and "plain 2.00" in m4 and "swapped 2.22" in m4
    assert "plain ÷ swapped 1.111 (1.088..1.135, faster)" in m4  # from their own rounds, not through cuBLAS's
    assert "not resolved)" in m8
    slower = [_row(s, "w4a16", 4, (9.0, 8.9, 9.1), (10.0, 9.9, 10.1)) for s in ("a", "b")]
    assert "slower)" in S.summary(slower)[0]


def _rows(plain: tuple, swapped: tuple, late: tuple, w8: tuple | None = None) -> list[dict]:
    """Two shapes of each CASE: W4A16 rows with a late-scaled column, W8A16 rows with `w8` as the swapped time."""
    out = []
    for scheme, m in S.CASES:
        for shape in ("a", "b"):
            r = _row(shape, scheme, m, plain, swapped if scheme == "w4a16" or w8 is None else w8)
            if scheme == "w4a16":
                r["swapped, late scales"] = {"launch": "c s3", "us": late[0], "min": late[1], "max": late[2]}
            out.append(r)
    return out


def test_the_recommendation_switches_on_only_a_setting_that_wins_and_never_loses():
    plain, fast, faster, slow = (10.0, 9.9, 10.1), (9.0, 8.9, 9.1), (8.0, 7.9, 8.1), (11.0, 10.9, 11.1)
    on, late, why = S.recommend(_rows(plain, fast, faster))
    assert (on, late) == (True, True) and "LATE_SCALE = [True]" in why and "3 of 3" in why
    on, late, _ = S.recommend(_rows(plain, faster, fast))  # late scaling loses to the plain swap
    assert (on, late) == (True, False)
    on, _, why = S.recommend(_rows(plain, fast, faster, w8=slow))  # W8A16 slower swapped: nothing switched on
    assert not on and "Keep wo_gemm.SWAPPED off" in why
    on, _, _ = S.recommend(_rows(plain, (9.95, 9.5, 10.4), (9.95, 9.5, 10.4)))  # inside the spread everywhere
    assert not on
    assert S.recommend([])[0] is False


def test_the_check_says_when_there_is_no_gpu(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert S.main(["--selftest"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["swapped", "swapped, late scales"])
def test_the_swapped_operands_match_the_reference_on_the_gpu(name):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from helpers.kernels import wo_gemm_check as C

    with S.variant(name):
        rows = C.check_cases(((72, 256), (4104, 512)), (1, 3, 5, 8))
    assert rows and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]][:3]

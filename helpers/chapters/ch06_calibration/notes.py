"""What the lecture notes say about calibration ranges, registered in the course's claims registry and
judged by chapter 6's measurements on the digits MLP.

Serves: chapter 6.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values

NOTICEABLE_DB = 3.0  # an SQNR loss a calibrator choice should not cost


def _cover_99(m: Values) -> tuple[str, str]:
    p99, best = m.get("ch06.sqnr_db.layer4.percentile_99"), m.get("ch06.sqnr_db.layer4.best")
    clipped = m.get("ch06.clipped_pct.layer4.percentile_99")
    if p99 is None or best is None:
        return "the calibrators were not compared", NOT_MEASURED
    share = "" if clipped is None else f" it clips {clipped:.2g}% of the values and"
    too_tight = best - p99 > NOTICEABLE_DB
    reading = ("a range that covers only 99% of the values is far too tight at 8 bits" if too_tight else
               f"covering 99% of the values costs less than {NOTICEABLE_DB:g} dB here")
    return (f"on the input of the MLP's last layer (test inputs),{share} its SQNR is {p99:.1f} dB against "
            f"{best:.1f} dB for the best calibrator: {reading}"), FAILS if too_tight else HOLDS


def _cover_99_zh(m: Values) -> str:
    p99, best = m.get("ch06.sqnr_db.layer4.percentile_99"), m.get("ch06.sqnr_db.layer4.best")
    if p99 is None or best is None:
        return "各校准器尚未比较"
    return (f"MLP 最后一层的输入：只覆盖 99% 的范围 SQNR 为 {p99:.1f} dB，最佳校准器 {best:.1f} dB，"
            f"{'差距超过' if best - p99 > NOTICEABLE_DB else '差距不到'} {NOTICEABLE_DB:g} dB")


CLAIMS: tuple[registry.Claim, ...] = (
    registry.Claim(
        "ch06.cover_99", 6, "notes 3 §5.1",
        "When accuracy drops, check that the quantization range covers 99% of the activation values.",
        "精度下降时，检查量化参数的范围是否覆盖了 99% 的激活值。",
        _cover_99, "chapter 6 §3: SQNR of 8-bit fake-quantized activations per calibrator (99th percentile vs the rest)",
        ("ch06.sqnr_db.layer4.percentile_99", "ch06.sqnr_db.layer4.best", "ch06.clipped_pct.layer4.percentile_99"),
        baseline="the best calibrator's range on the same activations (its SQNR)", summary_zh=lambda m: _cover_99_zh(m)),
)
registry.register(*CLAIMS)

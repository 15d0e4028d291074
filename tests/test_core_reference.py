"""helpers.reference: targets from MEASUREMENTS.md, stored records, the side-by-side table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import reference
from helpers.bench import Record

SHARED = Path(__file__).resolve().parents[2] / "shared" / "MEASUREMENTS.md"


@pytest.mark.skipif(not SHARED.exists(), reason="shared/MEASUREMENTS.md is not beside the checkout")
def test_targets_are_exactly_the_shared_headline_names():
    names = re.findall(r"^\| `([a-z0-9_.]+)` \|", SHARED.read_text(), flags=re.M)
    assert sorted(names) == sorted(t.name for t in reference.TARGETS)


def test_target_verdicts():
    t = reference.TARGETS_BY_NAME["copy.cupy_over_d2d"]
    assert t.met(0.95) is True and t.met(0.5) is False and t.met(None) is None
    assert reference.TARGETS_BY_NAME["copy.stride32_over_stride1"].met(0.1) is True
    assert reference.TARGETS_BY_NAME["transpose.naive_over_copy"].met(0.3) is None


def test_comparison_rows_show_missing_as_missing():
    mine = [Record("gemm.int8_over_bf16", 1.2, "ratio", "GPU X", "2026-01-01")]
    rows = reference.comparison_rows(["gemm.int8_over_bf16", "no.such.measurement"], mine)
    assert rows[0]["yours"].startswith("1.2") and rows[0]["target"] == ">= 1.15"
    assert rows[1]["yours"] == "not measured"
    assert rows[1]["stored h200"] == "not measured"


@pytest.mark.parametrize("source", reference.SOURCES)
def test_stored_records_are_well_formed(source):
    for r in reference.load(source):
        assert r.name and r.unit is not None and r.device and r.date
        assert isinstance(r.value, float)


def test_unknown_source_is_rejected():
    with pytest.raises(ValueError, match="h200"):
        reference.results_path("a100")

"""helpers.reference: targets from MEASUREMENTS.md, stored records, provenance, the side-by-side table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import reference
from helpers.bench import Record

SHARED = Path(__file__).resolve().parents[2] / "shared" / "MEASUREMENTS.md"


def shared_targets(text: str) -> dict[str, str]:
    """{name: target text} from MEASUREMENTS.md's table; a row `a.b.m4` / `.m8` names a.b.m8 too, its targets
    split at ' / ' the same way ('≥ 2.5 / ≥ 2.0')."""
    out = {}
    for cells in (line.split(" | ") for line in text.splitlines() if line.startswith("| `")):
        first, *more = re.findall(r"`([a-z0-9_.]+)`", cells[0])
        names = [first] + [first.rsplit(".", 1)[0] + m for m in more]
        targets = cells[-1].rstrip(" |").split(" / ")
        out.update(zip(names, targets if len(targets) == len(names) else targets * len(names)))
    return out


def test_shared_targets_are_parsed_with_their_suffixes():
    got = shared_targets("| `a.b.m4` / `.m8` | what | ≥ 2.5 / ≥ 2.0 |\n| `c.d` | what | reported |")
    assert got == {"a.b.m4": "≥ 2.5", "a.b.m8": "≥ 2.0", "c.d": "reported"}


@pytest.mark.skipif(not SHARED.exists(), reason="shared/MEASUREMENTS.md is not beside the checkout")
def test_targets_are_exactly_the_shared_headline_names_and_targets():
    shared = shared_targets(SHARED.read_text())
    assert sorted(shared) == sorted(t.name for t in reference.TARGETS)
    def parsed(text: str) -> tuple:
        m = re.fullmatch(r"([≥≤]|>=|<=) ([\d.]+)(?: on an (\w+))?", text)
        return ("reported",) if text == "reported" else (m[1].replace(">=", "≥").replace("<=", "≤"), float(m[2]), m[3])

    ours = {t.name: parsed(t.text) for t in reference.TARGETS}
    assert {k: v for k, v in shared.items() if ours[k] != parsed(v)} == {}


def test_target_verdicts():
    t = reference.TARGETS_BY_NAME["copy.cupy_over_d2d"]
    assert t.met(0.95) is True and t.met(0.5) is False and t.met(None) is None
    assert reference.TARGETS_BY_NAME["copy.stride32_over_stride1"].met(0.1) is True
    assert reference.TARGETS_BY_NAME["transpose.naive_over_copy"].met(0.3) is None


def test_comparison_rows_describe_and_explain_missing_values():
    mine = [Record("gemm.int8_over_bf16", 1.2, "ratio", "GPU X", "2026-01-01")]
    rows = reference.comparison_rows(["gemm.int8_over_bf16", "no.such.measurement"], mine)
    assert rows[0]["what"] == reference.TARGETS_BY_NAME["gemm.int8_over_bf16"].meaning
    assert rows[0]["unit"] == "ratio" and rows[0]["yours"] == "1.2" and rows[0]["target"] == ">= 1.15"
    assert rows[1]["yours"] == "no run has measured it yet" and rows[1]["stored H200 run"] == "–"
    assert "not measured" not in str(rows)


def test_rows_write_thousands_with_separators_not_exponents():
    mine = [Record("ch04.smem_gbs.k16", 4213.0, "GB/s", "GPU X", "2026-01-01"),
            Record("copy.cupy_over_d2d", 0.9287, "ratio", "GPU X", "2026-01-01")]
    rows = reference.comparison_rows(["ch04.smem_gbs.k16", "copy.cupy_over_d2d"], mine)
    assert [r["yours"] for r in rows] == ["4,213", "0.929"]
    assert rows[1]["target"] == reference.TARGETS_BY_NAME["copy.cupy_over_d2d"].text == ">= 0.92"
    assert reference.TARGETS_BY_NAME["transpose.naive_over_copy"].text == "reported"


def test_rows_say_why_a_value_is_missing_here():
    rows = reference.comparison_rows({"copy.cupy_over_d2d": "best cupy copy ÷ D2D",
                                      "ort_cpu.int8_over_fp32": "ORT INT8 ÷ FP32"}, mine=[])
    assert rows[0]["what"] == "best cupy copy ÷ D2D"
    if reference.lookup("copy.cupy_over_d2d") and not reference.lookup("copy.cupy_over_d2d", "cpu"):
        assert rows[0]["yours"].startswith("needs an NVIDIA GPU (notebook 03_memory_hierarchy")
    if reference.lookup("ort_cpu.int8_over_fp32", "cpu"):
        assert rows[1]["yours"].startswith("measured in notebook")


def test_provenance_names_device_date_and_software(tmp_path, monkeypatch):
    recs = [Record("a.b", 1.0, "ratio", "NVIDIA H200", "2026-11-29",
                   versions={"torch": "2.11.0+cu130", "python": "3.12.3", "onnxruntime": "1.30.0"})]
    monkeypatch.setattr(reference, "load", lambda source="h200": tuple(recs))
    text = reference.provenance("h200")
    assert text.startswith("NVIDIA H200, 2026-11-29; torch 2.11.0+cu130, CUDA 13.0, ONNX Runtime 1.30.0")
    assert "Python 3.12.3" in text and "driver not recorded" in text
    assert reference.stored_label("h200") == ("NVIDIA H200 · stored reference, 2026-11-29 · torch 2.11.0+cu130, "
                                              "CUDA 13.0, ORT 1.30.0, Python 3.12.3")
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\nonnxruntime==1.32.0\n")
    monkeypatch.setattr(reference, "ROOT", tmp_path)
    monkeypatch.setattr(reference, "pins", lambda root=tmp_path: {"torch": "2.13.0", "onnxruntime": "1.32.0"})
    assert reference.pin_differences("h200") == ["torch 2.11.0+cu130 (pinned 2.13.0)",
                                                 "ONNX Runtime 1.30.0 (pinned 1.32.0)"]


def test_pins_are_read_from_the_requirements():
    pins = reference.pins()
    assert pins.get("torch") and pins.get("numpy")


@pytest.mark.parametrize("source", reference.SOURCES)
def test_stored_records_are_well_formed(source):
    for r in reference.load(source):
        assert r.name and r.unit is not None and r.device and r.date
        assert isinstance(r.value, float)


def test_stored_runs_carry_their_versions():
    for source in reference.SOURCES:
        if reference.load(source):
            assert {"torch", "python"} <= set(reference.software(source)), source


def test_unknown_source_is_rejected():
    with pytest.raises(ValueError, match="h200"):
        reference.results_path("a100")


def test_a_labs_reference_run_comes_from_the_nearest_card_that_holds_its_records(monkeypatch):
    """The card whose records a lab shows is the one its sentences read first: the nearest that holds the prefix,
    not a fixed H200 (which once showed an H200 table under H100 sentences)."""
    def rec(name, device, date):
        return Record(name=name, value=1.0, unit="ratio", device=device, date=date)

    runs = {"h200": (rec("lab13.x", "NVIDIA H200", "2026-12-01"), rec("ch01.y", "NVIDIA H200", "2026-12-01")),
            "h100": (rec("lab13.x", "NVIDIA H100 80GB HBM3", "2026-12-07"),)}
    monkeypatch.setattr(reference, "load", lambda source="h200": runs.get(source, ()))
    monkeypatch.setattr("helpers.device.device_label", lambda: "CPU (x86_64, 2 cores)")
    card, recs = reference.nearest_holding("lab13.")
    assert card == "h100" and [r.device for r in recs] == ["NVIDIA H100 80GB HBM3"]  # the newer run, no GPU here
    monkeypatch.setattr("helpers.device.device_label", lambda: "NVIDIA H200")
    assert reference.nearest_holding("lab13.")[0] == "h200"  # the same card as this machine's first
    assert reference.nearest_holding("ch01.")[0] == "h200"   # only it holds these
    assert reference.nearest_holding("lab99.") == (None, [])

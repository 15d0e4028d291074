"""A figure stored under reference/*/figures has records behind it (helpers.tools.report_figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import bench
from helpers.reference import REFERENCE_DIR
from helpers.tools.report_figures import FIGURE_RECORDS, figure_problem, orphan_figures

STORED = sorted(REFERENCE_DIR.glob("*/figures/*.png"))
# Known gaps: (card, figure) -> why a stored figure has no records yet; each case is a strict xfail.
KNOWN_GAPS: dict[tuple[str, str], str] = {}  # none: the orphaned H200 engine-size figure is gone (the builds are
# stored again, from an H100, in reference/h100; the figure is drawn from them, labelled with that card)


# Figures whose records no stored run holds yet, with what stores them (an entry a stored run now holds fails).
AWAITING_RUN: dict[str, str] = {}  # every figure's records are stored (2026-12-06: the whole course on an H100)


def _case(fig: Path):
    key = (fig.parent.parent.name, fig.stem)
    marks = [pytest.mark.xfail(reason=KNOWN_GAPS[key], strict=True)] if key in KNOWN_GAPS else []
    return pytest.param(fig, id=f"{key[0]}/{fig.name}", marks=marks)


@pytest.mark.parametrize("figure", [_case(f) for f in STORED])
def test_every_stored_figure_has_records_behind_it(figure):
    names = {r.name for r in bench.load_records(figure.parent.parent / "results.json")}
    assert figure_problem(figure, names) is None, figure_problem(figure, names)


def test_a_planted_orphan_figure_and_an_undeclared_one_fail(tmp_path):
    folder = tmp_path / "h200"
    (folder / "figures").mkdir(parents=True)
    bench.save_records([bench.Record("ch03.copy_gbs.cupy", 1.0, "GB/s", "NVIDIA H200", "d")], folder / "results.json")
    for stem in ("Copy_kernels_torch_D2D_copy", "ch05_grid", "ch09_bert", "my_own_plot"):
        (folder / "figures" / f"{stem}.png").write_bytes(b"png")
    problems = orphan_figures(folder)
    assert len(problems) == 2, problems  # backed (copy) and computed (grid) pass
    assert problems[0].startswith("ch09_bert.png shows ch09.bert.* records, and none is stored in h200/")
    assert problems[1].startswith("my_own_plot.png is not declared")


def test_every_declared_prefix_is_a_stored_name_or_computed():
    """A typo in the table would make a figure look orphaned (or backed by the wrong records)."""
    stored = {r.name for f in REFERENCE_DIR.glob("*/results.json") for r in bench.load_records(f)}
    unknown = [p for p in set(FIGURE_RECORDS.values()) if p and not any(n.startswith(p) for n in stored)]
    assert set(unknown) <= {FIGURE_RECORDS[stem] for _, stem in KNOWN_GAPS} | set(AWAITING_RUN), unknown
    assert not [p for p in AWAITING_RUN if any(n.startswith(p) for n in stored)], "stored now: remove from AWAITING_RUN"


def test_the_stored_summary_lists_figures_without_records(tmp_path):
    import json

    from helpers.tools import report

    dest, out = tmp_path / "h200", tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "ch09_bert.png").write_bytes(b"png")  # its ch09.bert.* records are not in this run
    bench.save_records([bench.Record("ch03.copy_gbs.cupy", 1.0, "GB/s", "NVIDIA H200", "d", notebook="03_x")],
                       out / "results.json")
    (out / "runs.json").write_text(json.dumps([{"path": "notebooks/03_x.ipynb", "seconds": 1.0, "ok": True}]))
    report.store(out, dest, partial=True)
    assert "## Stored figures without records\n\n- ch09_bert.png shows ch09.bert.* records" in (dest / "summary.md").read_text()

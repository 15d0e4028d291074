"""The course's shared figures pass the figure rules (tests/figure_lint.py) and save as PNGs
under $WORKBOOK_FIGURES; the lint itself catches unlabelled, unit-less, device-less figures."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from figure_lint import figure_problems  # noqa: E402

from helpers.chapters.ch05_quantization_fundamentals import explorer  # noqa: E402

from helpers import plots


@pytest.fixture(autouse=True)
def _figures_to(tmp_path, monkeypatch):
    """Save figures into a temporary folder and close them afterwards."""
    monkeypatch.setenv(plots.FIGURES_VAR, str(tmp_path))
    yield tmp_path
    plt.close("all")


def test_bar_ratios_is_a_complete_figure(tmp_path):
    fig = plots.bar_ratios({"cupy": 0.95, "numba": 0.9}, title="copy vs D2D", target=0.92,
                           ylabel="ratio to torch D2D", name="t.bar")
    assert figure_problems(fig) == []
    assert (tmp_path / "t.bar.png").stat().st_size > 1000


def test_sweep_is_a_complete_figure(tmp_path):
    fig = plots.sweep([1, 2, 4], {"a": [1, 2, 3], "b": [2, 3, 4]}, title="bandwidth vs stride",
                      xlabel="stride (elements)", ylabel="bandwidth (GB/s)", logx=True,
                      name="t.sweep")
    assert figure_problems(fig) == []
    assert (tmp_path / "t.sweep.png").exists()


@pytest.mark.parametrize("per_channel", [False, True])
def test_explorer_figure_is_complete(per_channel):
    w = explorer.example_weights(8, 64)
    fig = explorer.draw(w, explorer.explore(w, bits=4, per_channel=per_channel))
    assert figure_problems(fig) == []


def test_lint_catches_what_a_reader_would_miss():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], color="#ff0000")
    ax.set_ylabel("bandwidth")
    problems = " | ".join(figure_problems(fig))
    assert "no x-axis label" in problems
    assert "gives no unit" in problems
    assert "palette" in problems
    assert "no device label" in problems

"""The course's shared figures pass the figure rules (helpers.figure_check) and save as PNGs
under $WORKBOOK_FIGURES; the lint itself catches unlabelled, unit-less, device-less figures."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from helpers.figure_check import figure_problems  # noqa: E402

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


def _labelled(fig, ax):
    """A figure that passes the label rules, so that only the planted problem shows."""
    ax.set_xlabel("x (units)")
    ax.set_ylabel("y (units)")
    plots.label_device(ax, "test device")
    return fig


def test_overlapping_tick_labels_are_caught_and_slanted_ones_are_not():
    fig, ax = plt.subplots(figsize=(2.5, 2))
    ax.bar([f"a long label {i}" for i in range(8)], range(1, 9), color=plots.PALETTE[0])
    _labelled(fig, ax)
    assert "overlaps text 'a long label" in " ".join(figure_problems(fig))
    plt.close(fig)
    fig = plots.bar_ratios({f"kernel_variant_{i}": 1.0 + i for i in range(9)}, title="slanted", ylabel="ratio")
    assert figure_problems(fig) == []


def test_a_legend_over_the_data_or_the_title_is_caught():
    fig, ax = plt.subplots()
    x = list(range(10))
    ax.plot(x, [5] * 10, color=plots.PALETTE[0], label="a line right where the legend goes")
    ax.plot(x, [4] * 10, color=plots.PALETTE[1], label="another")
    ax.set_ylim(0, 6)
    ax.legend(loc="upper center")
    _labelled(fig, ax)
    assert "the legend covers" in " ".join(figure_problems(fig))
    fig2, ax2 = plt.subplots()
    ax2.plot(x, x, color=plots.PALETTE[0], label="line")
    ax2.set_title("a title", loc="left")
    ax2.legend(loc="lower left", bbox_to_anchor=(0, 1.0))
    _labelled(fig2, ax2)
    assert "the legend covers text 'a title'" in " ".join(figure_problems(fig2))


def test_a_zoomed_y_axis_must_say_why():
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [2480, 2620, 2550], color=plots.PALETTE[0])
    _labelled(fig, ax)
    assert "start it at zero" in " ".join(figure_problems(fig))
    plots.zoomed(ax, "the change is a few percent")
    assert figure_problems(fig) == [] and "axis zoomed" in ax.get_ylabel()
    fig2, ax2 = plt.subplots()
    ax2.plot([0, 1], [30, 40], color=plots.PALETTE[0])
    _labelled(fig2, ax2)
    ax2.set_ylabel("SQNR (dB)")
    assert figure_problems(fig2) == []  # decibels have no natural zero


def test_the_device_label_never_covers_an_axis_label():
    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 2.5))
    for ax in (a, b):
        ax.plot([1, 2], [1, 2], color=plots.PALETTE[0])
        ax.set(xlabel="a fairly long x-axis label (units)", ylabel="y (units)")
    plots.label_device(b, "NVIDIA H200 · stored reference, 2026-11-29 · torch 2.11.0+cu130, Python 3.12.3")
    fig.tight_layout()
    assert figure_problems(fig) == []


def test_a_shared_x_axis_needs_one_label():
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True)
    top.plot([1, 2], [1, 2], color=plots.PALETTE[0])
    bottom.plot([1, 2], [2, 1], color=plots.PALETTE[1])
    top.set_ylabel("y (units)")
    bottom.set(xlabel="x (units)", ylabel="z (units)")
    plots.label_device(top, "test device")
    assert figure_problems(fig) == []


def test_explorer_series_keep_their_colours_when_toggled():
    w = explorer.example_weights(8, 64)
    colours = {}
    for per_channel in (False, True):
        fig = explorer.draw(w, explorer.explore(w, bits=4, per_channel=per_channel))
        right = fig.axes[1]
        colours[per_channel] = {ln.get_label().split(" (")[0]: ln.get_color() for ln in right.lines}
    assert colours[False] == colours[True]
    assert colours[False]["per-tensor"] != colours[False]["per-channel"]


def test_a_figure_is_judged_as_last_drawn(tmp_path, monkeypatch):
    """plots.sweep saves (draws) the figure before its caller zooms it: only the last draw counts."""
    from helpers import figure_check

    found = tmp_path / "problems.jsonl"
    monkeypatch.setenv(figure_check.LINT_VAR, str(found))
    monkeypatch.setitem(figure_check._state, "notebook", "99_planted")
    fixed = plots.sweep([1, 2, 3], {"a": [95.0, 96.0, 97.0]}, title="Fixed later", xlabel="epoch (count)",
                        ylabel="accuracy (%)", device="test")
    left = plots.sweep([1, 2, 3], {"a": [95.0, 96.0, 97.0]}, title="Never fixed", xlabel="epoch (count)",
                       ylabel="accuracy (%)", device="test")
    for fig in (fixed, left):
        figure_check.attach(fig)
        fig.canvas.draw()
    assert {r["figure"] for r in figure_check.read_problems(found)} == {"Fixed later", "Never fixed"}
    plots.zoomed(fixed.axes[0], "the points that matter")
    fixed.canvas.draw()
    assert [r["figure"] for r in figure_check.read_problems(found)] == ["Never fixed"]
    plt.close("all")

"""The quantization explorer's logic (helpers.chapters.ch05_quantization_fundamentals.explorer): numbers against helpers.quant.core,
monotone error, clipping, bad input, the static fallback, and the widget wiring (no browser)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from helpers.chapters.ch05_quantization_fundamentals import explorer as ex
from helpers.errors import InputError
from helpers.quant import core


@pytest.fixture(scope="module")
def w() -> np.ndarray:
    """The example weight: 32 channels x 256, spread ranges, one outlier."""
    return ex.example_weights()


def test_per_tensor_matches_core_roundtrip(w):
    r = ex.explore(w, bits=8)
    np.testing.assert_array_equal(r.x_hat, core.roundtrip(w, bits=8))
    assert r.scale.shape == () and int(r.zero_point) == 0
    assert r.scale == pytest.approx(np.abs(w).max() / 127, rel=1e-6)


def test_per_channel_has_one_scale_per_output_channel(w):
    r = ex.explore(w, bits=8, per_channel=True)
    scale, _ = core.params_for(w, axis=0)
    np.testing.assert_allclose(r.scale, scale, rtol=1e-6)
    np.testing.assert_array_equal(r.x_hat, core.roundtrip(w, bits=8, axis=0))
    assert r.channel_sqnr_db.shape == (w.shape[0],)


def test_asymmetric_grid_is_unsigned_with_a_zero_point_and_holds_zero():
    x = np.linspace(-0.2, 1.0, 101, dtype=np.float32)
    r = ex.explore(x, bits=8, symmetric=False)
    assert (r.qmin, r.qmax) == (0, 255) and int(r.zero_point) > 0
    assert 0.0 in ex.grid_values(r)


def test_error_falls_with_bits_and_per_channel_beats_per_tensor(w):
    for per_channel in (False, True):
        sqnr = [ex.explore(w, bits=b, per_channel=per_channel).sqnr_db for b in range(2, 9)]
        assert all(b > a for a, b in zip(sqnr, sqnr[1:])), sqnr
        assert 5.0 < sqnr[-1] - sqnr[-2] < 7.0  # about 6 dB per bit at 8 bits
    for b in (4, 8):
        assert ex.explore(w, bits=b, per_channel=True).sqnr_db > ex.explore(w, bits=b).sqnr_db + 6


def test_clipping_counts_values_beyond_the_range_and_can_help(w):
    full, clipped = ex.explore(w, bits=4), ex.explore(w, bits=4, clip=0.3)
    assert full.clipped_fraction == 0.0
    expected = np.mean((w < clipped.low) | (w > clipped.high))
    assert clipped.clipped_fraction == pytest.approx(expected) and clipped.clipped_fraction > 0
    assert clipped.high < full.high
    assert clipped.sqnr_db > full.sqnr_db  # the outlier no longer wastes the 4-bit grid


def test_grid_values_step_is_the_scale(w):
    r = ex.explore(w, bits=3)
    g = ex.grid_values(r)
    assert g.size == 8 and 0.0 in g
    np.testing.assert_allclose(np.diff(g), float(r.scale), rtol=1e-6)
    rc = ex.explore(w, bits=3, per_channel=True)
    c = ex.typical_channel(rc)
    np.testing.assert_allclose(np.diff(ex.grid_values(rc)), rc.scale[c], rtol=1e-6)
    with pytest.raises(InputError, match="channel"):
        ex.grid_values(rc, channel=w.shape[0])


def test_readout_names_setting_and_error(w):
    r = ex.explore(w, bits=6, clip=0.5, symmetric=False, per_channel=True)
    text = ex.readout(r)
    parts = ("6-bit asymmetric per-channel", "clip 50%", f"{w.shape[0]} scales", "MSE", "SQNR")
    for part in parts + ("clipped",):
        assert part in text
    assert "<b>SQNR" in ex.readout_html(r)


def test_torch_input_gives_the_same_numbers(w):
    torch = pytest.importorskip("torch")
    assert ex.explore(torch.from_numpy(w), bits=5).sqnr_db == ex.explore(w, bits=5).sqnr_db


@pytest.mark.parametrize("bad, kw, match", [
    (np.arange(6).reshape(2, 3), {}, "floating point"),
    (np.zeros((0, 3), np.float32), {}, "empty"),
    (np.array([[1.0, np.nan]], np.float32), {}, "NaN"),
    (np.ones((2, 3), np.float32), {"bits": 1}, "bits"),
    (np.ones((2, 3), np.float32), {"bits": 17}, "bits"),
    (np.ones((2, 3), np.float32), {"clip": 0.0}, "clip"),
    (np.ones((2, 3), np.float32), {"clip": 1.5}, "clip"),
    (np.ones(5, np.float32), {"per_channel": True}, "per-channel"),
    ([1.0, 2.0], {}, "numpy array"),
])
def test_bad_input_is_explained(bad, kw, match):
    with pytest.raises(InputError, match=match):
        ex.explore(bad, **kw)


def test_widgets_are_off_under_pytest_and_can_be_forced(monkeypatch):
    assert not ex.widgets_can_render()
    monkeypatch.setenv(ex.WIDGETS_VAR, "1")
    assert ex.widgets_can_render()
    monkeypatch.setenv(ex.WIDGETS_VAR, "0")
    assert not ex.widgets_can_render()


def _title(explorer: ex.Explorer) -> str:
    """The histogram's title (it names the setting the figure shows)."""
    return explorer.figure.axes[0].get_title()


def test_static_view_shows_readout_and_saves_the_figure(small, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBOOK_FIGURES", str(tmp_path))
    view = ex.quantization_explorer(small, bits=4)
    assert view.widget is None and not view.interactive
    view._ipython_display_()
    out = capsys.readouterr().out
    assert "4-bit symmetric per-tensor" in out and "Static view" in out
    assert list(tmp_path.glob("explorer_*.png"))
    left, right = view.figure.axes
    for ax in (left, right):
        assert ax.get_xlabel() and ax.get_ylabel()
    assert "numpy" in view.figure._workbook_device_label.get_text()  # the device label


@pytest.fixture(scope="module")
def small() -> np.ndarray:
    """A small example weight, so that redrawing stays quick."""
    return ex.example_weights(8, 64)


def test_widget_controls_drive_the_readout_and_figure(small, monkeypatch):
    view = ex.quantization_explorer(small, interactive=True)
    png, html = view._image.value, view._readout.value
    view.controls["bits"].value = 4
    assert "4-bit" in view._readout.value and view._readout.value != html
    assert "32 scales" not in view._readout.value
    assert view._image.value != png and view._image.value[:4] == b"\x89PNG"
    view.controls["per_channel"].value = True
    assert view.settings == ex.Settings(bits=4, per_channel=True)
    assert "4-bit symmetric per-channel" in _title(view)
    monkeypatch.setattr(ex, "draw", lambda x, result, axis=0: view.figure)  # wiring only from here
    view.controls["symmetric"].value = False
    view.controls["clip"].value = 0.5
    assert view.settings == ex.Settings(bits=4, clip=0.5, symmetric=False, per_channel=True)


def test_concurrent_updates_never_leave_a_torn_figure(small):
    view = ex.quantization_explorer(small, interactive=False)
    threads = [threading.Thread(target=view.update, kwargs={"bits": b}) for b in (3, 5, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _title(view).startswith(view.settings.describe())

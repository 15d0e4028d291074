"""The notebook-run checks of `make notebooks` (tests/support/nbval_guard.py) fail on planted problems:
a silent long cell, a figure with overlapping labels, and a time recorded by a notebook run beside another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.tools.notebooks import build

ROOT = Path(__file__).resolve().parents[2]
PLANT = [
    ("code", "from helpers import figure_check\nfigure_check.enable('99_planted')"),
    ("code", "import time\ntime.sleep(2.5)"),                                     # silent and long
    ("code", "from tqdm.auto import tqdm\nfor _ in tqdm(range(3), desc='work'):\n    time.sleep(1)"),
    ("code", "import matplotlib.pyplot as plt\nfrom helpers import plots\n"
             "fig, ax = plt.subplots(figsize=(2, 2))\nax.bar([f'a long label {i}' for i in range(8)], range(8))\n"
             "ax.set_ylabel('count'); plots.label_device(ax)\nplt.show()"),           # crowded tick labels
]


@pytest.mark.slow
def test_planted_problems_fail_the_notebook_run(tmp_path: Path) -> None:
    nb = build(tmp_path / "99_planted.ipynb", PLANT)
    env = {**os.environ, "WORKBOOK_SILENT_LIMIT_S": "2", "WORKBOOK_FIGURE_LINT": str(tmp_path / "figures.jsonl")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.nbval_guard",
                          "--nbval-lax", "--nbval-current-env", str(nb)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "Cell 1 ran" in out and "without a progress bar (first line: 'import time')" in out
    assert "Cell 2 ran" not in out                            # the tqdm cell is long too, but shows progress
    assert "figure in 99_planted" in out and "overlaps text 'a long label" in out


@pytest.mark.parametrize("outputs, expected", [
    ([{"output_type": "stream", "text": "work: 100%|██████████| 3/3 [00:01<00:00]"}], True),
    ([{"output_type": "display_data", "data": {"text/plain": "fit:  40%|████      | 2/5",
                                                "application/vnd.jupyter.widget-view+json": {}}}], True),
    ([{"output_type": "stream", "text": "accuracy 100% | done"}], False),
    ([], False),
])
def test_progress_is_recognised(outputs, expected):
    from tests.support.nbval_guard import shows_progress

    assert shows_progress(outputs) is expected


@pytest.mark.slow
def test_a_time_recorded_beside_another_notebook_fails_the_beside_run(tmp_path: Path) -> None:
    """--lane beside holds the notebooks that time nothing here (07_ptq is one); a time one of them records fails
    the run, an accuracy does not; --lane alone holds the others (an unknown notebook counts as timing the CPU)."""
    nb = build(tmp_path / "07_ptq.ipynb", [("code", "from helpers import records\nrecords.set_notebook('07_ptq')\n"
                                                    "records.record('planted.acc', 91.0, '%')\n"
                                                    "records.record('planted.cpu_ms', 2.5, 'ms')")])
    unknown = build(tmp_path / "99_unknown.ipynb", [("code", "x = 1")])
    results = tmp_path / "records.jsonl"
    results.write_text('{"name": "earlier.lane_ms", "unit": "ms", "value": 1.0}\n')  # the alone lane's, before
    env = {**os.environ, "WORKBOOK_RESULTS": str(results)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.support.nbval_guard",
                          "--nbval-lax", "--nbval-current-env", "--lane", "beside", str(nb), str(unknown)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = run.stdout + run.stderr
    assert run.returncode == 1 and "1 passed, 1 deselected" in out, out
    assert "07_ptq recorded planted.cpu_ms in ms while it ran beside another notebook" in out, out
    assert "planted.acc" not in out and "earlier.lane_ms" not in out, out


@pytest.mark.parametrize("record, is_timed", [
    ({"name": "ch08.w4a8.qat_delta_pts", "unit": "pts"}, False),
    ({"name": "ch12.ppl.fp32", "unit": "perplexity"}, False),
    ({"name": "ch07.size_ratio.resnet", "unit": "ratio"}, False),
    ({"name": "ch01.bert_base.cpu_ms.b1", "unit": "ms"}, True),
    ({"name": "ch10.layout.cpu_fp32_nhwc_speedup", "unit": "ratio"}, True),
    ({"name": "x.tput", "unit": "tokens/s"}, True),
    ({"name": "x.new", "unit": "furlongs"}, True),
])
def test_what_counts_as_a_recorded_time(record, is_timed):
    from tests.support.nbval_guard import timed

    assert timed(record) is is_timed

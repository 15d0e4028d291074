"""The notebook-run checks of `make notebooks` (tests/support/nbval_guard.py) fail on planted problems:
a silent long cell and a figure with overlapping labels."""

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

"""The one list of notebooks still under the issue-16/17 review, shared by the course-wide checks.

The prose-number test, the bilingual-terms test, the "Next"-cell test and the notebook-run checks
(slow silent cells, figure problems) report these notebooks without failing. An owner removes a
notebook here when it passes; the set only shrinks. Entries are the number before the first '_'
of a file stem: '06' is notebooks/06_calibration.ipynb, 'lab05' is labs/ and solutions/lab05_*.ipynb.
"""

from __future__ import annotations

PENDING: frozenset[str] = frozenset()


def pending(stem: str) -> bool:
    """True when the notebook with this file stem is still under review."""
    return stem.split("_")[0] in PENDING

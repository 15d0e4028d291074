"""The answer keys, one module per lab, named after the lab's package: ``instructors/keys/labNN_<topic>.py`` for
``helpers/labs/labNN_<topic>/``. Each registers its lab's exercises with their specs, hidden cases and hints
(``helpers.grading.exercise.register``); ``helpers.grading.exercise.load_lab`` imports them by name where this
package is present, and the students' copy holds the visible cases instead (``helpers/labs/*/visible.json``).

Serves: instructors (the labs' answer keys).
"""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent


def labs() -> list[str]:
    """The labs that have an answer key: ['lab00', 'lab01', ...]."""
    return sorted(p.stem[:5] for p in FOLDER.glob("lab[0-9][0-9]_*.py"))

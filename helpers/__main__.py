"""`python -m helpers` prints the environment report: what runs for real here, and how to fix gaps.

Serves: core — `python -m helpers` (the environment report of chapter 0).
"""

from helpers.plugins.stacks import report

report()

"""`python -m helpers` prints the environment report: what runs for real here, and how to fix gaps."""

from helpers.device import report

report()

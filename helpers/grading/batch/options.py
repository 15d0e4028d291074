"""Argument types of the grade command: finite numbers in range, or a one-line usage error.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import argparse
import math


def number(text: str) -> float:
    """A finite number from the command line."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a finite, positive number of seconds."""
    value = number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text!r}")
    return value


def factor(text: str) -> float:
    """An argparse type: a finite multiple of 1 or more."""
    value = number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more (a multiple of the reference time), got {text!r}")
    return value


def whole(text: str) -> int:
    """An argparse type: a whole number of 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value

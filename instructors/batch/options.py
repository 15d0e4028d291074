"""Argument types of the grade command: finite numbers and sizes in range, or a one-line usage error.

Whole numbers use `helpers.cli.whole_number` (the one parametrised type every command shares); what is
here is what differs: real numbers of seconds, multiples, and sizes in GiB or MiB.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from helpers import cli

whole = cli.whole_number(0)  # an argparse type: a whole number of 0 or more (0: the default or no limit)


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


def size(unit: int) -> Callable[[str], int]:
    """An argparse type: a finite size of 0 or more in `unit` bytes (GiB or MiB), as bytes."""

    def parse(text: str) -> int:
        """`text` times `unit`, as whole bytes."""
        value = number(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
        return int(value * unit)

    parse.__name__ = "size"  # argparse names the type by it in "invalid ... value"
    return parse

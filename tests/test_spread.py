"""helpers.spread.geomean: the course's one mean of ratios over shapes, and its refusals."""

from __future__ import annotations

import math

import pytest

from helpers.errors import InputError
from helpers.spread import geomean


def test_the_geometric_mean_of_positive_numbers() -> None:
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([0.5]) == 0.5
    assert geomean(x for x in (2.0, 8.0)) == pytest.approx(4.0)  # any iterable, read once
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)  # ratios that cancel, unlike an arithmetic mean (1.25)


@pytest.mark.parametrize("bad", [[], [1.0, 0.0], [1.0, -2.0], [math.nan], [math.inf], ["1"]])
def test_it_refuses_what_has_no_geometric_mean(bad) -> None:
    with pytest.raises(InputError, match="at least one value" if not bad else "positive, finite"):
        geomean(bad)

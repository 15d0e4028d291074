"""The figure rules, for tests: ``figure_problems`` lives in ``helpers.figure_check`` (notebook runs use it too)."""

from __future__ import annotations

from helpers.figure_check import figure_problems

__all__ = ["figure_problems"]

"""Labs and grading: exercises, the students' instant check(), lab generation and batch grading.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from helpers.grading.check import CheckFailed, Verdict, check
from helpers.grading.exercise import Case, Exercise, get, register

__all__ = ["Case", "CheckFailed", "Exercise", "Verdict", "check", "get", "register"]

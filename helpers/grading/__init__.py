"""Labs and grading: exercises, the students' instant check(), hint() and ready(), lab generation and batch grading.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from helpers.grading.check import CheckFailed, Verdict, check, hint, verify
from helpers.grading.exercise import Case, Exercise, get, register
from helpers.grading.kit.unfinished import ready

__all__ = ["Case", "CheckFailed", "Exercise", "Verdict", "check", "get", "hint", "ready", "register", "verify"]

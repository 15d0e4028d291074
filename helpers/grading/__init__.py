"""The check engine every lab runs: exercises, the students' instant check(), hint() and ready(), the traced-kernel
runner (``traced``), the GPU speed checks (``kernel_perf``) and the kernel labs' speed-of-light limits
(``speed_of_light``). The instructors' batch grader, its kernel ranking and authoring tools are
``instructors.batch``, the answer keys ``instructors.keys`` (never imported from here: see ``exercise.load_lab``);
each lab's own code is ``helpers.labs.labNN_<topic>``.

Serves: the labs (self-checks) and instructors (through instructors.batch).
"""

from helpers.grading.check import CheckFailed, Verdict, check, hint, verify
from helpers.grading.exercise import Case, Exercise, get, register
from helpers.grading.unfinished import ready

__all__ = ["Case", "CheckFailed", "Exercise", "Verdict", "check", "get", "hint", "ready", "register", "verify"]

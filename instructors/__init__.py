"""The instructors' package, beside the students' ``helpers``: each lab's answer key (``keys``), the batch grader and
the authoring tools (``batch``: grade, generate, release, hub, rank, ...), and lab 13's timing of the solution
(``lab13_bench``). It never ships to students: the release copies ``helpers`` and the course folders, never this one,
and refuses to write a copy that holds it. It imports ``helpers``; nothing in ``helpers`` imports it (only
``helpers.grading.exercise`` looks it up by name, to load an answer key where one is present).

    python -m instructors.batch grade|generate|release|hub|rank ...

Serves: instructors.
"""

# First: importing helpers switches numba to its CUDA simulator where there is no GPU, before a key imports numba.cuda.
import helpers  # noqa: F401

"""Lab 01, roofline and timing: everything of this lab that students get.

Its answer key (specs and hidden cases) is instructors/keys/lab01_roofline_and_timing.py, never in the students'
release; kit.py its student-side runners and checks, visible.json its visible cases (written by `python -m
instructors.batch generate`); here: kit.py.

Serves: lab 01.
"""

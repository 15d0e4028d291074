"""Lab 09, troubleshoot: everything of this lab that students get.

Its answer key (specs and hidden cases) is instructors/keys/lab09_troubleshoot.py, never in the students'
release; kit.py its student-side runners and checks, visible.json its visible cases (written by `python -m
instructors.batch generate`); here: kit.py deployment.py.

Serves: lab 09.
"""

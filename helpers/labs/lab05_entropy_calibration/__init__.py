"""Lab 05, entropy calibration: everything of this lab in one place.

key.py is its answer key (specs and hidden cases; instructors only, left out of the students' release),
kit.py its student-side runners and checks, visible.json its visible cases (written by
`python -m helpers.grading.batch generate`); here: key.py.

Serves: lab 05.
"""

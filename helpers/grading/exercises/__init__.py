"""One module per lab, each registering its exercises (loaded on demand by helpers.grading.get).

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

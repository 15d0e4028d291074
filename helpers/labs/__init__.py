"""The labs, one package each: ``helpers/labs/labNN_<topic>/`` holds the lab's student-side runners and checks
(``kit.py``), its visible cases (``visible.json``) and its own experiments (``bench.py`` and the like); its answer
key is the instructors' ``instructors/keys/labNN_<topic>.py``, which never ships. A lab builds on core packages,
the check engine (``helpers.grading``) and chapters, never on another lab; no chapter or core module imports a lab
(``helpers.tools.layout`` checks).

Serves: the labs.
"""

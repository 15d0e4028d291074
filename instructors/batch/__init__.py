"""The instructors' service: grade a folder of submissions (grade, options, jobs, worker, runner, sandbox,
limits, interrupts, kernel_session, overwrite, submissions, roster, gradebook, overrides, shards, loadtest,
throughput) and author labs (labgen, visible, release).
Students never need it: it is part of the instructors' package, which the students' release never copies.

    python -m instructors.batch grade|generate|release|rank|hub ...

Serves: instructors.
"""

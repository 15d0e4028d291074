"""Course tooling: the reference run and its report, the static site, canonical notebooks, suite timing.

Serves: tooling — `make test`, `make gpu-report`, `make site`, `make fmt`.
"""

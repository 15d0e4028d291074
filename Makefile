# The workbook's two entry points (see README):  make lab   and   make test
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done
KERNEL := gpu-int8-course
CELL_TIMEOUT ?= 900
BROWSER ?= 1
ARTIFACTS := artifacts

.PHONY: setup lab test unit notebooks browser browser-deps labs grade gpu-report cpu-reference site fmt typecheck

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -r requirements-dev.txt
	$(PY) typings/patch_tensorrt_stubs.py >/dev/null
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "GPU INT8 course" >/dev/null
	mkdir -p $(VENV)/share/jupyter/lab/settings && cp jupyter/overrides.json $(VENV)/share/jupyter/lab/settings/
	@touch $(STAMP)

setup: $(STAMP)

## Open the workbook in JupyterLab on the start page.
lab: setup
	$(VENV)/bin/jupyter lab $$( [ "$$(id -u)" = 0 ] && echo --allow-root ) notebooks/00_start_here.ipynb

## Everything CI runs: unit tests, every notebook and solution (nbval), the labs, the browser tests.
test: setup
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory unit notebooks browser && \
	$(PY) -m helpers.tools.suite_time "$$start" $(ARTIFACTS)/suite_time.json

unit: setup
	$(PY) -m pytest tests -m "not browser" -q

notebooks: setup
	@mkdir -p $(ARTIFACTS) && rm -f $(ARTIFACTS)/cpu_records.jsonl
	WORKBOOK_RESULTS=$(CURDIR)/$(ARTIFACTS)/cpu_records.jsonl WORKBOOK_FIGURES=$(CURDIR)/$(ARTIFACTS)/figures \
	  $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env \
	  --nbval-cell-timeout=$(CELL_TIMEOUT) notebooks solutions
	$(PY) -m helpers.tools.report check-names $(ARTIFACTS)/cpu_records.jsonl

## Store this machine's notebook measurements as the CPU reference (after `make test`).
cpu-reference: setup
	$(PY) -m helpers.tools.report store-cpu $(ARTIFACTS)/cpu_records.jsonl $(ARTIFACTS)/suite_time.json

browser: setup
	@if [ "$(BROWSER)" = "0" ]; then echo "browser tests skipped (BROWSER=0)"; else \
	  $(MAKE) --no-print-directory browser-deps && $(PY) -m pytest tests -m browser -q; fi

## Debian's chromium for the browser tests (needs root; elsewhere run `make test BROWSER=0`).
browser-deps:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: install it, or skip the browser tests with: make test BROWSER=0"; exit 1; fi; }

## Regenerate labs/ from solutions/ (instructors).
labs: setup
	$(PY) -m helpers.grading generate

## Grade a folder of submissions: make grade SUBMISSIONS=path/to/folder
grade: setup
	$(PY) -m helpers.grading grade $(SUBMISSIONS) --out $(ARTIFACTS)/grades

## Run every notebook, collect the measurements, write results + summary + plots.
gpu-report: setup
	$(PY) -m helpers.tools.report --out $(ARTIFACTS)/report

## Static HTML course site from the committed notebooks and stored reference results (offline).
site: setup
	$(PY) -m helpers.tools.site --out $(ARTIFACTS)/site

## Canonicalize notebooks (no outputs, stable JSON).
fmt: setup
	$(PY) -m helpers.tools.notebooks fmt

typecheck: setup
	$(PY) -m mypy helpers/deploy/tensorrt_backend.py

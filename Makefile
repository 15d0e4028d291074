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
JOBS ?= 1

.PHONY: setup lab test unit notebooks browser browser-deps sandbox-deps hub hub-deps labs grade release gpu-report cpu-reference site fmt typecheck

## The pinned packages go in with uv, which downloads and installs in parallel; with pip alone when
## uv cannot be installed or fails, or with INSTALLER=pip. torch always comes through pip: pip reads
## the machine's own wheel sources (find-links, extra indexes), where a CPU build may lie, and uv
## keeps the torch it finds installed. Both write the bytecode at install time (uv's --compile-bytecode;
## pip does it by default): where PYTHONDONTWRITEBYTECODE is set, as on CI, Python would otherwise
## compile matplotlib, numba, ... again in every kernel and worker it starts.
INSTALLER ?= uv
UV_PIN := uv==0.13.8
PIP_INSTALL := $(PY) -m pip install -q --disable-pip-version-check

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml jupyter/overrides.json
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) $$(grep -E '^torch==' requirements.txt)
	@if [ "$(INSTALLER)" = uv ] && $(PIP_INSTALL) $(UV_PIN) && \
	    $(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -r requirements.txt && \
	    $(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) --no-deps -r requirements-dev.txt -e .; then \
	  echo "installed the pinned packages with uv"; else \
	  if [ "$(INSTALLER)" = uv ]; then echo "uv failed: installing with pip instead"; fi; \
	  $(PIP_INSTALL) -r requirements.txt && $(PIP_INSTALL) --no-deps -r requirements-dev.txt && \
	  $(PIP_INSTALL) --no-deps -e . ; fi
	$(PY) typings/patch_tensorrt_stubs.py >/dev/null
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "GPU INT8 course" >/dev/null
	mkdir -p $(VENV)/share/jupyter/lab/settings && cp jupyter/overrides.json $(VENV)/share/jupyter/lab/settings/
	@# nbgrader is the instructors' tool (make labs/grade); students do not see its menus in JupyterLab.
	$(VENV)/bin/jupyter server extension disable --sys-prefix nbgrader.server_extensions.formgrader \
	  nbgrader.server_extensions.validate_assignment nbgrader.server_extensions.assignment_list \
	  nbgrader.server_extensions.course_list >/dev/null 2>&1
	$(VENV)/bin/jupyter labextension disable --level=sys_prefix @jupyter/nbgrader >/dev/null 2>&1
	@touch $(STAMP)

## Chinese terms (中文) render only with a CJK font: fonts-noto-cjk is installed when run as root with apt-get,
## otherwise one line says what to do (checked with fontconfig's fc-list, quick on every run).
setup: $(STAMP)
	@fc-list :lang=zh 2>/dev/null | grep -q . || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing a CJK font (fonts-noto-cjk) for the Chinese terms"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk >/dev/null; } || \
	      echo "could not install fonts-noto-cjk: Chinese terms show as boxes until a CJK font is installed"; \
	  else echo "no CJK font: Chinese terms show as boxes. Install one: sudo apt-get install fonts-noto-cjk (Debian/Ubuntu; elsewhere any Noto Sans CJK font)"; fi; }

## Open the workbook in JupyterLab: the repository is its root, the start notebook opens first.
## jupyter/lab.sh holds the command line (the browser tests start the server through it too);
## extra options: make lab LAB_ARGS="--no-browser --port=8899"
lab: setup
	COURSE_VENV=$(VENV) bash jupyter/lab.sh $(LAB_ARGS)

## Everything CI runs: unit tests, every notebook and solution (nbval), the labs, the browser tests.
## suite.cpu_test_minutes is the whole command, set-up included when it ran (its record says how long that took).
test:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory setup sandbox-deps unit notebooks browser && \
	$(PY) -m helpers.tools.suite_time "$$start" $(ARTIFACTS)/suite_time.json

unit: setup
	@# two workers share two cores: torch's OpenMP threads sleep instead of spinning while they wait for work
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest tests -m "not browser" -q -n 2 --dist loadfile --durations=15

## Every notebook and solution under nbval; tests/support/nbval_guard.py also fails cells that run > 10 s without a
## progress bar and figures with problems (helpers.figure_check); nothing may be left in nbval's private TMPDIR.
## The notebooks that time this machine's CPU (helpers.tools.report_plan.CPU_TIMING) run first, one at a time with
## nothing beside them; then the others, which time nothing here, two at a time (one per core): the guard fails that
## second run if one of them records a time (-p no:tmpdir: xdist would give each worker a folder in the private TMPDIR).
NBVAL := TMPDIR=$$tmp WORKBOOK_RESULTS=$(CURDIR)/$(ARTIFACTS)/cpu_records.jsonl \
  WORKBOOK_FIGURES=$(CURDIR)/$(ARTIFACTS)/figures WORKBOOK_FIGURE_LINT=$(CURDIR)/$(ARTIFACTS)/figure_problems.jsonl \
  $(PY) -m pytest -q -p no:cacheprovider -p tests.support.nbval_guard --nbval-lax --nbval-current-env --durations=5 \
  --nbval-cell-timeout=$(CELL_TIMEOUT) notebooks solutions
notebooks: setup
	@mkdir -p $(ARTIFACTS) && rm -f $(ARTIFACTS)/cpu_records.jsonl $(ARTIFACTS)/figure_problems.jsonl
	@tmp=$$(mktemp -d) && \
	$(NBVAL) --lane alone; rc=$$?; \
	OMP_WAIT_POLICY=PASSIVE $(NBVAL) --lane beside -n 2 --dist loadfile -p no:tmpdir || rc=1; \
	$(PY) -m helpers.tools.report check-tmp "$$tmp" || rc=1; rm -rf "$$tmp"; exit $$rc
	$(PY) -m helpers.tools.report check-names $(ARTIFACTS)/cpu_records.jsonl

## Store this machine's notebook measurements as the CPU reference (after `make test`).
cpu-reference: setup
	$(PY) -m helpers.tools.report store-cpu $(ARTIFACTS)/cpu_records.jsonl $(ARTIFACTS)/suite_time.json

browser: setup
	@if [ "$(BROWSER)" = "0" ]; then echo "browser tests skipped (BROWSER=0)"; else \
	  $(MAKE) --no-print-directory browser-deps hub-deps && $(PY) -m pytest tests -m browser -q; fi

## Debian's chromium for the browser tests (needs root; elsewhere run `make test BROWSER=0`).
browser-deps:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: install it, or skip the browser tests with: make test BROWSER=0"; exit 1; fi; }

## The course's JupyterHub (docs/instructors.md, "Teaching on JupyterHub"), as root, for system users that exist:
##   make hub HUB_STUDENTS="alice bob" HUB_INSTRUCTORS=teacher [HUB_ARGS="--port 8000 --hub /srv/gpu-int8-course"]
hub: hub-deps
	$(PY) -m instructors.batch hub serve --students "$(HUB_STUDENTS)" --instructors "$(HUB_INSTRUCTORS)" $(HUB_ARGS)

## What the hub needs besides the pinned jupyterhub: its proxy (configurable-http-proxy from the npm registry, into
## .venv/hub-proxy) with Node.js, and setfacl (Debian's acl, for the hub test's users); Debian packages as root.
HUB_PROXY := $(VENV)/hub-proxy
CHP_PIN := configurable-http-proxy@5.3.0
hub-deps: setup
	@missing="$$(command -v npm >/dev/null || echo 'nodejs npm') $$(command -v setfacl >/dev/null || echo acl)"; \
	if [ -n "$${missing// /}" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing for the hub: $$missing (install them, e.g. sudo apt-get install $$missing)"; exit 1; fi; fi
	@test -x $(HUB_PROXY)/node_modules/.bin/configurable-http-proxy || \
	  npm install --silent --no-audit --no-fund --prefix $(HUB_PROXY) $(CHP_PIN)

## bubblewrap, the grader's sandbox (no network, read-only system, private /tmp); installed when run as
## root with apt-get, else the grader runs submissions without it (docs/instructors.md says what that loses).
sandbox-deps:
	@command -v bwrap >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	  else echo "bubblewrap is missing: the grading tests run submissions without the sandbox"; fi; }

## Regenerate labs/ and the students' visible cases (helpers/labs/*/visible.json) from solutions/ (instructors).
labs: setup
	$(PY) -m instructors.batch generate

## Grade a folder of submissions: make grade SUBMISSIONS=path/to/folder [OUT=grades] [JOBS=2] [ROSTER=roster.csv]
## [OVERRIDES=fixes.csv] (OUT defaults to artifacts/grades; exit status 3: some submissions were not graded,
## the grader's own failure; run again to resume)
grade: setup
	$(PY) -m instructors.batch grade $(SUBMISSIONS) --out $(if $(OUT),$(OUT),$(ARTIFACTS)/grades) --jobs $(JOBS) \
	  $(if $(ROSTER),--roster $(ROSTER)) $(if $(OVERRIDES),--overrides $(OVERRIDES))

## What students receive (labs, chapters, the course package without answer keys, reference data):
## artifacts/release/ and artifacts/release.tar.gz
release: setup
	$(PY) -m instructors.batch release --out $(ARTIFACTS)/release

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
	$(PY) -m mypy helpers/deploy/tensorrt_backend.py helpers/plugins/trt_family.py helpers/plugins/trt_protocol.py helpers/plugins/trt_layers.py

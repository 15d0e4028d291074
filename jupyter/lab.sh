#!/usr/bin/env bash
# How the course starts JupyterLab. `make lab` runs this file, and so do tests/course/test_lab_server.py
# and tests/course/test_browser.py, which add only --no-browser, an address, a port and a token.
#   - the server's root is the repository: every chapter (notebooks/) and lab (labs/) is in its
#     file browser;
#   - the start notebook opens first, in the browser `make lab` opens and at the URL it prints (with
#     --no-browser the printed URL opens the start notebook, not the Launcher);
#   - the course kernel is the default, so a new notebook gets it too.
# Extra arguments go to `jupyter lab` (make lab LAB_ARGS="--no-browser --port=8899").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="${COURSE_VENV:-.venv}"
start=notebooks/00_start_here.ipynb
args=(--ServerApp.root_dir="$PWD" --MultiKernelManager.default_kernel_name=gpu-int8-course
      --LabApp.default_url="/lab/tree/$start")
if [ "$(id -u)" = 0 ]; then args+=(--allow-root); fi
exec "$venv/bin/jupyter" lab "${args[@]}" "$@" "$start"

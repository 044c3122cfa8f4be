#!/usr/bin/env bash
# The test command: set-up, a running Docker engine, the node image and the ssh test-host image,
# then the whole suite.
# In CI (CI=true) a skipped docker or ssh test fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
bash .ci/docker-setup.sh
bash .ci/ssh-setup.sh
exec .venv/bin/python -m pytest -q -rfEs "$@"

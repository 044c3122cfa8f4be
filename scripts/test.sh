#!/usr/bin/env bash
# The test command, in three tiers (docs/testing.md):
#   ./scripts/test.sh --fast   the pure layers: tests/unit without Spark, node processes, Docker, SSH
#                              or a browser (pytest -m "not slow"); after every change;
#   ./scripts/test.sh --unit   everything under tests/unit (Spark included);
#   ./scripts/test.sh          everything: set-up, a running Docker engine, the node image and the
#                              ssh test-host images, then the whole suite -- what CI runs.
# Tests run on TESTBED_TEST_WORKERS pytest-xdist workers, a test file per worker (its module
# fixtures, e.g. runs shared by its tests, are made once) (default: 2 for --fast/--unit, 4 for
# the whole suite, whose integration tests mostly wait); the tests marked `serial` (wipe, the
# Spark cluster) run afterwards, alone. Further arguments go to pytest (both passes).
# In CI (CI=true) a skipped docker, ssh, browser or spark_cluster test fails the run (tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
tier=all
case "${1:-}" in
  --fast) tier=fast; shift ;;
  --unit) tier=unit; shift ;;
esac
./scripts/setup.sh
PY=.venv/bin/python
case "$tier" in
  fast)
    exec "$PY" -m pytest -q -rfEs -n "${TESTBED_TEST_WORKERS:-2}" --dist loadfile -m "not slow" tests/unit "$@" ;;
  unit)
    exec "$PY" -m pytest -q -rfEs -n "${TESTBED_TEST_WORKERS:-2}" --dist loadfile --durations=15 tests/unit "$@" ;;
esac
bash .ci/docker-setup.sh
bash .ci/ssh-setup.sh
start=$(date +%s)
rc=0
echo "test: the parallel pass (-n ${TESTBED_TEST_WORKERS:-4}, everything but the serial tests)"
"$PY" -m pytest -q -rfEs -n "${TESTBED_TEST_WORKERS:-4}" --dist loadfile --durations=25 -m "not serial" "$@" || rc=$?
echo "test: the serial pass (tests that cannot share the machine, one at a time)"
src=0
"$PY" -m pytest -q -rfEs --durations=10 -m serial "$@" || src=$?
[ "$src" -eq 5 ] && src=0  # no serial test among the selected ones
echo "test: both passes in $(( $(date +%s) - start )) s (parallel pass exit $rc, serial pass exit $src)"
[ "$rc" -eq 0 ] && [ "$src" -eq 0 ]

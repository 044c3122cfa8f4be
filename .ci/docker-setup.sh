#!/usr/bin/env bash
# A running Docker engine with the offline base and the testbed node image. Idempotent.
#  1. start dockerd in the background if `docker info` fails (log: $DOCKERD_LOG), wait up to 60 s;
#  2. make testbed-base:bookworm (debootstrap minbase + docker import) if missing -- no registry needed;
#  3. build testbed-node:<version> on it if missing or stale (node code changed since the build).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

if ! docker info >/dev/null 2>&1; then
  echo "docker-setup: starting dockerd (log: $DOCKERD_LOG)"
  $SUDO sh -c "nohup dockerd >>'$DOCKERD_LOG' 2>&1 &"
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    echo "docker-setup: dockerd did not come up within 60 s; last log lines:" >&2
    tail -n 20 "$DOCKERD_LOG" >&2 || true
    exit 1
  fi
fi
echo "docker-setup: engine $(docker info --format '{{.ServerVersion}}') is up"

# The offline base, then the node image on it (build_image falls back to the offline base when
# python:3.11-slim cannot be pulled; --offline-base makes the base first when it is missing).
exec "$PY" -m testbed.providers.image --offline-base --if-needed

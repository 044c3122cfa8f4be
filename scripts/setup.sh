#!/usr/bin/env bash
# Everything testbed needs on a fresh Debian/Ubuntu machine (run as root, or with sudo available):
# system packages, a virtualenv in .venv with the package and its test/docker/ansible extras.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)   # Spark
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)              # --provider docker, tests
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)        # offline node-image base
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v tc >/dev/null 2>&1 || need+=(iproute2)
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v dot >/dev/null 2>&1 || need+=(graphviz)                # testbed graph
command -v chromium >/dev/null 2>&1 || need+=(chromium)            # browser tests (report.html, reproductions/index.html)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
if [ "${#need[@]}" -gt 0 ]; then
  echo "setup: installing system packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.testbed-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[docker,ansible,test]"
  touch "$stamp"
fi
echo "setup: done (.venv/bin/testbed is ready)"

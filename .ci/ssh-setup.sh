#!/usr/bin/env bash
# The image of the `ssh` tests' hosts: sshd + python3 on the offline base, no Docker engine and
# no msgpack (the ansible provider's `prepare` creates the virtualenv and ships msgpack itself).
# Needs a running engine and testbed-base:bookworm (.ci/docker-setup.sh). Idempotent.
set -euo pipefail
IMAGE=${TESTBED_SSH_HOST_IMAGE:-testbed-sshhost:3}
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "ssh-setup: $IMAGE exists"
  exit 0
fi
echo "ssh-setup: building $IMAGE"
docker build -q -t "$IMAGE" - <<'DOCKERFILE'
FROM testbed-base:bookworm
RUN set -eux; export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends openssh-server python3 python3-venv iproute2 procps; \
    apt-get clean; rm -rf /var/lib/apt/lists/*; \
    useradd -m -s /bin/bash -p "*" tb; mkdir -p /run/sshd /home/tb/.ssh; chmod 700 /home/tb/.ssh; \
    chown tb:tb /home/tb/.ssh; \
    printf 'PasswordAuthentication no\nPermitRootLogin no\nUsePAM no\nMaxSessions 64\nMaxStartups 64:30:128\n' \
      > /etc/ssh/sshd_config.d/testbed.conf
LABEL testbed.sshhost=1
# fresh host keys per container (the image must not share them)
CMD ["sh", "-c", "rm -f /etc/ssh/ssh_host_* && ssh-keygen -A >/dev/null && exec /usr/sbin/sshd -D -e"]
DOCKERFILE
echo "ssh-setup: built $IMAGE"

#!/usr/bin/env bash
# The images of the `ssh` tests' hosts, on the offline base. Idempotent.
#  * testbed-sshhost:3         sshd + python3; no Docker engine, no msgpack (the ansible provider's
#                              `prepare` creates the virtualenv and ships msgpack itself);
#  * testbed-sshhost-docker:1  the same plus a Docker engine of its own (docker.io), started by
#                              /usr/local/sbin/tb-host-entry (cgroups remounted writable, then dockerd,
#                              then sshd); the SSH user `tb` is in the `docker` group. The tests run
#                              it with every capability the outer engine may grant (see
#                              testbed/testing/testhosts.py), never --privileged;
#  * testbed-sshhost-sudo:2    testbed-sshhost:3 without python3 and iproute2 (no tc), where `tb`
#                              may sudo without a password: the apt path of `prepare` (become: true).
# Needs a running engine and testbed-base:bookworm (.ci/docker-setup.sh).
set -euo pipefail
IMAGE=${TESTBED_SSH_HOST_IMAGE:-testbed-sshhost:3}
DOCKER_IMAGE=${TESTBED_SSH_DOCKER_HOST_IMAGE:-testbed-sshhost-docker:1}
SUDO_IMAGE=${TESTBED_SSH_SUDO_HOST_IMAGE:-testbed-sshhost-sudo:2}
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "ssh-setup: $IMAGE exists"
else
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
fi

if docker image inspect "$SUDO_IMAGE" >/dev/null 2>&1; then
  echo "ssh-setup: $SUDO_IMAGE exists"
else
  echo "ssh-setup: building $SUDO_IMAGE"
  docker build -q -t "$SUDO_IMAGE" - <<DOCKERFILE
FROM $IMAGE
RUN set -eux; export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends sudo; \
    apt-get purge -y iproute2 python3 python3-venv 'python3.11*' 'libpython3*'; apt-get autoremove -y; \
    apt-get clean; rm -rf /var/lib/apt/lists/*; \
    echo 'tb ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/tb; chmod 440 /etc/sudoers.d/tb; \
    ! command -v tc; ! command -v python3
LABEL testbed.sshhost=1
DOCKERFILE
  echo "ssh-setup: built $SUDO_IMAGE"
fi

if docker image inspect "$DOCKER_IMAGE" >/dev/null 2>&1; then
  echo "ssh-setup: $DOCKER_IMAGE exists"
  exit 0
fi
echo "ssh-setup: building $DOCKER_IMAGE"
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cat > "$ctx/tb-host-entry" <<'ENTRY'
#!/bin/sh
# A test host with its own Docker engine: the cgroup v1 hierarchies come read-only into a
# container; mount them afresh (read-write, in the container's own cgroup namespace) so the
# inner engine can make cgroups, start dockerd, then sshd in the foreground.
set -e
if [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
  for d in /sys/fs/cgroup/*; do
    [ -d "$d" ] || continue
    opts=$(awk -v m="$d" '$2 == m {print $4}' /proc/mounts | tr ',' '\n' \
           | grep -v -x -e ro -e rw -e nosuid -e nodev -e noexec -e relatime | paste -sd, -)
    [ -n "$opts" ] || continue
    umount "$d" && mount -t cgroup -o "rw,nosuid,nodev,noexec,relatime,$opts" cgroup "$d"
  done
fi
dockerd --iptables=false --ip6tables=false >/var/log/dockerd.log 2>&1 &
rm -f /etc/ssh/ssh_host_*
ssh-keygen -A >/dev/null
exec /usr/sbin/sshd -D -e
ENTRY
cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM $IMAGE
RUN set -eux; export DEBIAN_FRONTEND=noninteractive; \
    apt-get update; \
    apt-get install -y --no-install-recommends docker.io iptables; \
    apt-get clean; rm -rf /var/lib/apt/lists/*; \
    usermod -aG docker tb
COPY tb-host-entry /usr/local/sbin/tb-host-entry
RUN chmod 755 /usr/local/sbin/tb-host-entry
LABEL testbed.sshhost=1
CMD ["/usr/local/sbin/tb-host-entry"]
DOCKERFILE
docker build -q -t "$DOCKER_IMAGE" "$ctx"
echo "ssh-setup: built $DOCKER_IMAGE"

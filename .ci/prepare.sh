#!/usr/bin/env bash
# Prepares a CI machine (Debian, root) so that `make test` skips nothing. Called by .ci/run; idempotent:
# what is already there is neither installed nor downloaded again, so it is safe to run twice.
#
# Only system packages (apt) belong here: every Python package a test needs comes with `make test` itself
# (the `test` extra in pyproject.toml pulls in every other extra), so a newcomer's `make test` runs the same
# Python tests as CI. On a machine without these system packages the tests below skip, each naming why.
#
# What each system-level test needs (grep tests/ for skipif and pytest.skip to check):
#   gcc, make, libzmq3-dev, libmsgpack-dev   tests/system/test_game_server.py builds examples/c_game
#   munge, slurmctld, slurmd, slurm-client   tests/deploy/test_slurm.py; the test starts its own munged,
#                                            slurmctld and slurmd (its own slurm.conf, key and spool in a temp
#                                            dir, as root), so no system daemon is started here
#   tmux, systemd (systemd-analyze)          tests/deploy/test_tmux.py, tests/deploy/test_systemd_units.py
#   iproute2 (ip), util-linux (unshare)      tests/system/test_multihost.py (network namespaces, root) and the
#                                            full_disk chaos drill (a tmpfs in a private mount namespace, root)
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(gcc make libc6-dev libzmq3-dev libmsgpack-dev munge slurmctld slurmd slurm-client tmux systemd
              iproute2 util-linux)

started=$SECONDS
step() {  # step NAME COMMAND...: runs it and says how long it took
    local name=$1 t0=$SECONDS
    shift
    echo "prepare: $name ..." >&2
    "$@"
    echo "prepare: $name took $((SECONDS - t0)) s" >&2
}

apt_install() {
    local missing=() p
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "prepare: apt packages already installed" >&2
        return
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "prepare: installing ${missing[*]} needs root" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

step "apt packages" apt_install
echo "prepare: done in $((SECONDS - started)) s" >&2

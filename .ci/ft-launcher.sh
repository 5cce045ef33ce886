#!/usr/bin/env bash
# Install (or check) NVIDIA Resiliency Extension's `ft_launcher`, the launcher the fault-tolerance
# plugin renders in place of torchrun, for the tests that run that launch path on the local Slurm
# cluster (tests/it/trainer_env_slurm.rs, and slurm_e2e.rs's in-job restart). It runs on CPU: its GPU and NIC health checks find no
# NVML library and no InfiniBand and say so, and the workers start.
#
# The package is installed with pip --target into a directory of its own (the Bridge venv is not
# changed) and runs on the Bridge venv's Python, whose torch it needs; `bin/ft_launcher` there is
# its console script with that directory on sys.path (nothing is added to the environment the
# workers inherit). Pinned: nvidia-resiliency-ext 0.4.1, the newest release whose wheel pip
# installs for CPython 3.12 on Debian 12, and its pure-Python dependencies.
#
# Usage: .ci/ft-launcher.sh PYTHON [--check]
#   PYTHON   the Bridge venv's python (`bash .ci/bridge-venv.sh` prints it)
#   --check  install nothing: exit 1 when it is not installed
# Environment: OVLAUNCH_FT_LAUNCHER_DIR  install directory (default
#   ${XDG_CACHE_HOME:-$HOME/.cache}/ovlaunch/ft-launcher-<version>)
# Prints the ft_launcher path on stdout (last line); progress goes to stderr.
set -euo pipefail

VERSION=0.4.1
PKGS=("nvidia-resiliency-ext==$VERSION" defusedxml==0.7.1 nvidia-ml-py==13.615.71 pynvml==13.0.1)

log() { echo "[ft-launcher] $*" >&2; }
die() { log "error: $*"; exit 1; }

[ $# -ge 1 ] || die "usage: $0 PYTHON [--check]"
PY=$1
CHECK=${2:-}
[ -x "$PY" ] || die "$PY is not an executable python"
DIR=${OVLAUNCH_FT_LAUNCHER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ovlaunch/ft-launcher-$VERSION}
BIN=$DIR/bin/ft_launcher
STAMP_WANT="python=$PY ${PKGS[*]}"

if [ ! -f "$DIR/.ovlaunch-stamp" ] || [ "$(cat "$DIR/.ovlaunch-stamp")" != "$STAMP_WANT" ]; then
  [ "$CHECK" != --check ] || die "not installed in $DIR (run .ci/ft-launcher.sh $PY)"
  rm -rf "$DIR"
  mkdir -p "$DIR/bin"
  log "installing ${PKGS[*]} into $DIR"
  # torch, psutil, packaging and PyYAML come from the Bridge venv
  "$PY" -m pip install -q --no-deps --target "$DIR/site" "${PKGS[@]}" >&2
  cat > "$BIN" <<EOF
#!$PY
import sys

sys.path.insert(0, "$DIR/site")
from nvidia_resiliency_ext.fault_tolerance.launcher import main

sys.exit(main())
EOF
  chmod 755 "$BIN"
  "$BIN" --help > /dev/null || die "$BIN does not start"
  echo "$STAMP_WANT" > "$DIR/.ovlaunch-stamp"
fi
log "nvidia-resiliency-ext $VERSION: $BIN"
echo "$BIN"

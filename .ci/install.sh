#!/usr/bin/env bash
# Install what the ovlaunch integration tests need on a Debian 12 machine.
# Idempotent: packages already installed are skipped, and apt-get is not run
# at all when nothing is missing.  Must run as root.
#
# Usage: .ci/install.sh [COMPONENT...]
# Components (default: all nine):
#   slurm       slurmctld slurmd slurm-client slurm-wlm munge
#   oci         crun (Slurm's OCI containers, see slurm-up.sh) and busybox-static
#               (the tests build a small root filesystem from it)
#   rank-cross  a static aarch64 rank runtime build and a way to run it: Debian's
#               Rust 1.8x+ (rustc-web, cargo-web) with the arm64 standard library
#               (libstd-rust-web-dev:arm64, after `dpkg --add-architecture arm64`),
#               the GNU cross linker and C library, and qemu-user-static
#   lint        the package shellcheck (also accepted: "shellcheck")
#   torch       python3-torch (Debian's CPU build, torch 1.13.1) plus a
#               one-line fix so that its torchrun works on Python 3.11
#   hyperfine   hyperfine; optional: a failure to install it is only reported
#   ssh         openssh-server and openssh-client (the remote-submission test starts
#               its own sshd on a high port in front of the local Slurm), and tcsh
#               (a login node user whose login shell is tcsh)
#   acl         acl (setfacl and getfacl: the shared-cluster tests give files and
#               directories POSIX ACLs)
#   bsdtar      libarchive-tools (bsdtar, libarchive's tar, the one macOS ships: the
#               packaging tests run ovlaunch with it as `tar`, as on a Mac)
#
# Output: one line per component on stderr; apt's own output goes to
# ${OVLAUNCH_CI_LOG:-${TMPDIR:-/tmp}/ovlaunch-ci-install.log} and is shown
# only when apt fails.
set -euo pipefail

log() { echo "[ci-install] $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"
command -v apt-get >/dev/null 2>&1 || die "apt-get not found (Debian 12 expected)"

TMP_BASE=${TMPDIR:-/tmp}
APT_LOG=${OVLAUNCH_CI_LOG:-${TMP_BASE%/}/ovlaunch-ci-install.log}
: > "$APT_LOG"
export DEBIAN_FRONTEND=noninteractive

if [ $# -eq 0 ]; then
  set -- slurm oci rank-cross lint torch hyperfine ssh acl bsdtar
fi

installed() { # pkg -> 0 when dpkg has it fully installed
  [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" = installed ]
}

UPDATED=0
apt_install() { # pkg... ; installs only the missing ones
  local missing=() p
  for p in "$@"; do
    installed "$p" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  if [ "$UPDATED" = 0 ]; then
    # an unreachable extra source must not stop the install from Debian's
    # archive: warn and go on; the install itself reports missing packages
    if ! apt-get update -qq >>"$APT_LOG" 2>&1; then
      log "warning: apt-get update reported errors (see $APT_LOG)"
    fi
    UPDATED=1
  fi
  log "apt-get install ${missing[*]}"
  # Service start attempts by the postinst scripts are blocked by
  # policy-rc.d on container images and fail harmlessly elsewhere without an
  # init system; the tests start their own daemons.
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$APT_LOG" 2>&1; then
    tail -n 20 "$APT_LOG" >&2
    return 1
  fi
}

# torch 1.13.1 on Python 3.11: torch.distributed.elastic.multiprocessing.api
# builds a name->Std map by iterating the IntFlag `Std`.  Since Python 3.11
# that iteration skips the zero member NONE and the composite ALL, so
# Std.from_str("0") (the default of --redirects/--tee) returns None and every
# torchrun run crashes with "'NoneType' object has no attribute 'get'".
# The fix iterates the enum's declared members instead (all four of them).
patch_torch() {
  local f
  f=$(/usr/bin/python3 - <<'EOF'
import importlib.util
spec = importlib.util.find_spec("torch")
import os
print(os.path.join(os.path.dirname(spec.origin),
                   "distributed/elastic/multiprocessing/api.py"))
EOF
)
  [ -f "$f" ] || die "torch elastic api.py not found at $f"
  if grep -qE '^ +for s in Std:$' "$f"; then
    sed -i -E 's/^( +)for s in Std:$/\1for s in Std.__members__.values():  # ovlaunch ci: py3.11 IntFlag fix/' "$f"
    log "patched torchrun for Python 3.11 ($f)"
  elif grep -q 'ovlaunch ci: py3.11 IntFlag fix' "$f"; then
    return 0   # patched and checked before
  fi
  # the check: "0" must map to a value for every local rank
  /usr/bin/python3 -c '
from torch.distributed.elastic.multiprocessing.api import Std, to_map
assert to_map(Std.from_str("0"), 2) == {0: Std.NONE, 1: Std.NONE}
' 2>>"$APT_LOG" || die "torchrun still broken after patching $f (see $APT_LOG)"
}

version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo '?'; }

REQUIRED=()
WANT_TORCH=0
WANT_HYPERFINE=0
for c in "$@"; do
  case "$c" in
    slurm) REQUIRED+=(slurm-wlm slurmctld slurmd slurm-client munge) ;;
    oci) REQUIRED+=(crun busybox-static) ;;
    rank-cross)
      # The arm64 standard library is a multiarch package: dpkg must know the
      # architecture before apt-get update reads its package lists.
      if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        dpkg --add-architecture arm64
        log "dpkg --add-architecture arm64"
      fi
      REQUIRED+=(rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu
        libc6-dev-arm64-cross qemu-user-static) ;;
    lint|shellcheck) REQUIRED+=(shellcheck) ;;
    torch) REQUIRED+=(python3-torch); WANT_TORCH=1 ;;
    hyperfine) WANT_HYPERFINE=1 ;;
    ssh) REQUIRED+=(openssh-server openssh-client tcsh) ;;
    acl) REQUIRED+=(acl) ;;
    bsdtar) REQUIRED+=(libarchive-tools) ;;
    *) die "unknown component '$c' (slurm oci rank-cross lint torch hyperfine ssh acl bsdtar)" ;;
  esac
done

# one apt-get run for everything that is required
if [ ${#REQUIRED[@]} -gt 0 ]; then
  apt_install "${REQUIRED[@]}"
fi
for p in "${REQUIRED[@]}"; do
  case "$p" in
    slurmd|munge|shellcheck|python3-torch|crun|rustc-web|qemu-user-static|openssh-server|tcsh|acl|libarchive-tools) log "$p $(version "$p")" ;;
  esac
done
if [ "$WANT_TORCH" = 1 ]; then
  patch_torch
  log "torchrun: $(command -v torchrun || echo 'not on PATH')"
fi
if [ "$WANT_HYPERFINE" = 1 ]; then
  if apt_install hyperfine; then
    log "hyperfine $(version hyperfine)"
  else
    log "hyperfine: not installed (optional)"
  fi
fi
log "done in ${SECONDS}s"

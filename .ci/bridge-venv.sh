#!/usr/bin/env bash
# Create (or check) the Python 3.12 virtualenv that holds the real Megatron-Bridge package, for the
# tests that build Bridge's ConfigContainer with Bridge's own code (tests/bridge/).
#
# Idempotent: a stamp file in the venv records what was installed; when it matches, nothing is
# downloaded and the script only checks that the packages import.
#
# Environment:
#   OVLAUNCH_BRIDGE_VENV   venv directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/ovlaunch/bridge-venv-<bridge version>)
#   OVLAUNCH_PYTHON312     a Python 3.12 interpreter to use (default: python3.12 on PATH, else pyenv's 3.12)
#
# Prints the venv's python path on stdout (last line); progress goes to stderr.
# Bridge 0.6 requires Python >= 3.12, < 3.13 (its package metadata).
set -euo pipefail
cd "$(dirname "$0")/.."

BRIDGE_VERSION=0.6.2
# Bridge installs Megatron-Core from a git submodule, not by a registry pin; 0.19 is the release line
# its 0.6 branch is built and tested with.
MCORE_VERSION=0.19.2
REQS=tests/bridge/requirements.txt

log() { echo "[bridge-venv] $*" >&2; }
die() { log "error: $*"; exit 1; }

VENV=${OVLAUNCH_BRIDGE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ovlaunch/bridge-venv-$BRIDGE_VERSION}

is_py312() { # interpreter -> 0 when it runs and is 3.12
  "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
  local c root
  if [ -n "${OVLAUNCH_PYTHON312:-}" ]; then
    is_py312 "$OVLAUNCH_PYTHON312" || die "OVLAUNCH_PYTHON312=$OVLAUNCH_PYTHON312 is not a working Python 3.12"
    echo "$OVLAUNCH_PYTHON312"
    return
  fi
  if c=$(command -v python3.12 2>/dev/null) && is_py312 "$c"; then
    echo "$c"
    return
  fi
  # a pyenv shim on PATH only answers for the active version: ask pyenv for its installs instead
  if command -v pyenv >/dev/null 2>&1 && root=$(pyenv root 2>/dev/null); then
    while IFS= read -r c; do
      if is_py312 "$c"; then
        echo "$c"
        return
      fi
    done < <(find "$root/versions" -maxdepth 3 -path '*/3.12*/bin/python3.12' 2>/dev/null | sort -rV)
  fi
  die "no Python 3.12 found (Megatron-Bridge $BRIDGE_VERSION needs it): install python3.12, or a pyenv 3.12, or set OVLAUNCH_PYTHON312"
}

STAMP_WANT="bridge=$BRIDGE_VERSION mcore=$MCORE_VERSION reqs=$(sha256sum "$REQS" | cut -c1-16)"
PY="$VENV/bin/python"

if [ ! -f "$VENV/.ovlaunch-stamp" ] || [ "$(cat "$VENV/.ovlaunch-stamp")" != "$STAMP_WANT" ]; then
  BASE=$(find_python)
  log "python: $BASE ($("$BASE" --version 2>&1))"
  if [ ! -x "$PY" ]; then
    mkdir -p "$(dirname "$VENV")"
    "$BASE" -m venv "$VENV"
  fi
  "$PY" -m pip install -q --upgrade pip >&2
  # The pinned set with its own dependencies (torch brings its CUDA libraries), then Bridge and
  # Megatron-Core without theirs: their full lists are GPU-only packages that do not build here.
  log "installing $REQS"
  "$PY" -m pip install -q -r "$REQS" >&2
  log "installing megatron-bridge==$BRIDGE_VERSION megatron-core==$MCORE_VERSION (no dependencies)"
  "$PY" -m pip install -q --no-deps "megatron-bridge==$BRIDGE_VERSION" "megatron-core==$MCORE_VERSION" >&2
  echo "$STAMP_WANT" > "$VENV/.ovlaunch-stamp"
else
  log "up to date: $VENV"
fi

# the check: Bridge's package metadata is the version pinned here
"$PY" - "$BRIDGE_VERSION" <<'EOF' >&2 || die "the venv at $VENV does not hold megatron-bridge (remove it and run again)"
import importlib.metadata as m, sys
got = m.version("megatron-bridge")
assert got == sys.argv[1], f"megatron-bridge {got} != {sys.argv[1]}"
print(f"[bridge-venv] megatron-bridge {got}, megatron-core {m.version('megatron-core')}, torch {m.version('torch')}")
EOF
log "done in ${SECONDS}s"
echo "$PY"

#!/usr/bin/env bash
# Stop the cluster started by .ci/slurm-up.sh, by the PIDs it recorded
# (never by process name):
#   1. scancel all jobs of this cluster and wait (<= 10 s) for them to leave
#   2. SIGTERM the slurmd daemons, then slurmctld, then munged; each gets
#      10 s before SIGKILL
#   3. SIGKILL job steps of this cluster that survived (slurmstepd detaches
#      from slurmd with setsid; they are found by open files under the state
#      directory) together with their descendants
#   4. remove the /etc/hosts line that slurm-up.sh added (under slurm-up.sh's
#      machine-wide lock, $OVLAUNCH_SLURM_LOCK)
# The state directory is kept (logs); slurm-up.sh wipes it on the next start.
#
# Usage: .ci/slurm-down.sh [--dir DIR] [--hosts-only]   (default
#        $OVLAUNCH_SLURM_DIR or ${TMPDIR:-/tmp}/ovlaunch-slurm).  Safe to run
#        twice.  --hosts-only: step 4 alone.
set -euo pipefail

TMP_BASE=${TMPDIR:-/tmp}
DIR=${OVLAUNCH_SLURM_DIR:-${TMP_BASE%/}/ovlaunch-slurm}
HOSTS_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --dir=*) DIR=${1#*=}; shift ;;
    --hosts-only) HOSTS_ONLY=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "slurm-down: unknown argument: $1" >&2; exit 2 ;;
  esac
done
log() { echo "[slurm-down] $*" >&2; }
[ -d "$DIR" ] && DIR=$(cd "$DIR" && pwd -P)
PIDS=$DIR/pids

stat_field() { # pid n -> n-th field after "(comm)" in /proc/pid/stat: 1 state, 2 ppid
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  local -a f
  read -r -a f <<<"$s"
  echo "${f[$(($2 - 1))]}"
}
alive() { # running and not a zombie (PID 1 may reap orphans late)
  local st
  [ -n "$1" ] || return 1
  st=$(stat_field "$1" 1) || return 1
  [ "$st" != Z ]
}

stop_pid() { # name pid
  local name=$1 pid=$2 cmd
  alive "$pid" || return 0
  cmd=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null || true)
  case "$cmd" in
    *slurm*|*munge*) ;;
    *) log "pid $pid is no longer $name; left alone"; return 0 ;;
  esac
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then
    kill -KILL "$pid" 2>/dev/null || true
    log "$name (pid $pid) needed SIGKILL"
  fi
}

stepds() { # slurmstepd processes holding a file under $DIR open
  local p f
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ] || continue
    for f in "$p"/fd/*; do
      case "$(readlink "$f" 2>/dev/null)" in
        "$DIR"/*) echo "${p#/proc/}"; break ;;
      esac
    done
  done
}
descendants() { # pid -> all descendants
  local k
  for k in /proc/[0-9]*; do
    k=${k#/proc/}
    if [ "$(stat_field "$k" 2 2>/dev/null || true)" = "$1" ]; then
      echo "$k"
      descendants "$k"
    fi
  done
}

if [ "$HOSTS_ONLY" = 1 ]; then
  :
elif [ -f "$PIDS" ]; then
  ctld=$(awk '$1 == "slurmctld" { print $2 }' "$PIDS")
  if alive "$ctld" && [ -f "$DIR/etc/slurm.conf" ]; then
    export SLURM_CONF=$DIR/etc/slurm.conf
    jobs=$(timeout 5 squeue -h -o %A 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      log "cancelling jobs: $(tr '\n' ' ' <<<"$jobs")"
      # shellcheck disable=SC2086  # one job id per word
      timeout 5 scancel $jobs 2>/dev/null || true
      for _ in $(seq 100); do
        [ -z "$(timeout 5 squeue -h -o %A 2>/dev/null || true)" ] && break
        sleep 0.1
      done
    fi
  fi
  for prefix in slurmd- slurmctld munged; do
    while read -r name pid; do
      case "$name" in "$prefix"*) stop_pid "$name" "$pid" ;; esac
    done < "$PIDS"
    if [ "$prefix" = slurmd- ]; then
      for p in $(stepds); do
        for q in "$p" $(descendants "$p"); do
          if alive "$q"; then
            log "killing leftover pid $q ($(cat "/proc/$q/comm" 2>/dev/null || true))"
            kill -KILL "$q" 2>/dev/null || true
          fi
        done
      done
    fi
  done
  mv "$PIDS" "$PIDS.stopped"
  log "stopped the cluster in $DIR"
else
  log "no running cluster recorded in $DIR"
fi

# /etc/hosts is rewritten in place (it may be a bind mount, which a rename would not
# replace), and other clusters' jobs may be resolving their node names from it right now:
# truncating first would show them an empty file. So the shorter text is written over the
# old from the start and the file is cut to its length afterwards; meanwhile a reader sees
# every remaining line, then a piece of the old end that is no valid entry or a whole line
# of this cluster. slurm-up.sh holds the lock when it calls this (--hosts-only).
TAG="# ovlaunch-slurm:$DIR:"
if grep -qF "$TAG" /etc/hosts 2>/dev/null; then
  if [ -z "${OVLAUNCH_SLURM_LOCK_HELD:-}" ]; then
    exec 9>>"${OVLAUNCH_SLURM_LOCK:-/tmp/ovlaunch-slurm.lock}"
    flock 9
  fi
  tmp=$(mktemp)
  grep -vF "$TAG" /etc/hosts > "$tmp" || true
  dd if="$tmp" of=/etc/hosts bs=1M conv=notrunc status=none
  truncate -s "$(stat -c %s "$tmp")" /etc/hosts
  rm -f "$tmp"
  log "removed the node names from /etc/hosts"
fi

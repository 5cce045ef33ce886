#!/usr/bin/env bash
# Shell functions for CI scripts; source it:  . .ci/ci-lib.sh
#   ci_install [COMPONENT...]   .ci/install.sh (slurm lint torch hyperfine)
#   ci_slurm_up [ARGS...]       start the test cluster (.ci/slurm-up.sh) and
#                               export SLURM_CONF, OVLAUNCH_SLURM_DIR and
#                               OVLAUNCH_SLURM_NODES into the calling shell
#   ci_slurm_down               stop it (.ci/slurm-down.sh); safe to call twice
#                               and meant for `trap ci_slurm_down EXIT`
#   ci_job_state JOBID          print the job's JobState (scontrol, then
#                               sacct --completion); empty if unknown
#   ci_job_wait JOBID [SECS]    poll until the job has a final state (default
#                               at most 300 s); print it; status 0 only for
#                               COMPLETED
set -euo pipefail

OVLAUNCH_CI_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

ci_install() {
  "$OVLAUNCH_CI_DIR/install.sh" "$@"
}

ci_slurm_up() {
  local env_lines
  env_lines=$("$OVLAUNCH_CI_DIR/slurm-up.sh" "$@") || return 1
  eval "$env_lines"
}

ci_slurm_down() {
  if [ -n "${OVLAUNCH_SLURM_DIR:-}" ]; then
    "$OVLAUNCH_CI_DIR/slurm-down.sh" --dir "$OVLAUNCH_SLURM_DIR"
  else
    "$OVLAUNCH_CI_DIR/slurm-down.sh"
  fi
}

ci_job_state() {
  local out st=''
  if out=$(scontrol show job -o "$1" 2>/dev/null); then
    st=$(sed -n 's/.* JobState=\([A-Z_]*\).*/\1/p' <<<"$out")
  fi
  if [ -z "$st" ]; then
    # finished longer than MinJobAge ago: the job completion log; the last
    # line is the latest run of a requeued job
    st=$(sacct --completion -n -P -o State -j "$1" 2>/dev/null | tail -n 1 || true)
  fi
  echo "$st"
}

ci_job_wait() {
  local id=$1 limit=${2:-300} st='' deadline
  deadline=$(( $(date +%s) + limit ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    st=$(ci_job_state "$id")
    case "$st" in
      COMPLETED) echo "$st"; return 0 ;;
      FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)
        echo "$st"; return 1 ;;
    esac
    sleep 0.1
  done
  echo "${st:-UNKNOWN}"
  return 1
}

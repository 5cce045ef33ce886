#!/usr/bin/env bash
# Check that the test cluster behaves as the launcher tests expect, and print
# how long each check took.  Needs a running cluster (SLURM_CONF from
# slurm-up.sh) with at least 2 nodes.
#
# Usage: .ci/slurm-smoke.sh [--torch] [--slow]
#   (always)  2 nodes x 2 tasks: 4 distinct ranks on 2 node names; exit 3 ->
#             FAILED 3:0; scancel -> CANCELLED; scontrol requeue -> the job
#             runs again with SLURM_RESTART_COUNT=1; a USR1 sent with
#             `scancel --batch` reaches the batch shell's trap, which
#             requeues the job; sacct --completion lists the jobs
#   --torch   torchrun standalone (2 processes) and under srun on 2 nodes
#             (c10d rendezvous at the first node of the allocation)
#   --slow    also --signal=B:USR1@30 with --time=1 (the signal arrives on
#             slurmctld's 30 s time-limit tick) and a TIMEOUT job (~90 s)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=ci-lib.sh
. "$HERE/ci-lib.sh"
TORCH=0
SLOW=0
for a in "$@"; do
  case "$a" in
    --torch) TORCH=1 ;;
    --slow) SLOW=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "slurm-smoke: unknown argument: $a" >&2; exit 2 ;;
  esac
done
: "${SLURM_CONF:?start the cluster first: eval \"\$(.ci/slurm-up.sh)\"}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ovlaunch-smoke.XXXXXX")
cd "$WORK"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok   $*"; }
field() { scontrol show job -o "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
wait_running() {
  local _
  for _ in $(seq 300); do
    [ "$(ci_job_state "$1")" = RUNNING ] && return 0
    sleep 0.1
  done
  fail "job $1 did not start"
}

# ------------------------------------------------------------ ranks
t=$(now)
cat > ranks.sh <<'EOF'
#!/bin/bash
echo "hostnames $(scontrol show hostnames "$SLURM_JOB_NODELIST" | tr '\n' ' ')"
srun bash -c 'echo "task $SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURMD_NODENAME $SLURM_JOB_NODELIST $(hostname)"'
EOF
j=$(sbatch --parsable --nodes=2 --ntasks-per-node=2 -o ranks.out ranks.sh)
ci_job_wait "$j" 60 >/dev/null || fail "ranks job $j: $(ci_job_state "$j")"
[ "$(grep -c '^task ' ranks.out)" = 4 ] || fail "expected 4 task lines: $(cat ranks.out)"
[ "$(awk '/^task /{print $2}' ranks.out | sort -u | tr '\n' ' ')" = "0 1 2 3 " ] || fail "ranks: $(cat ranks.out)"
[ "$(awk '/^task /{print $5}' ranks.out | sort -u | wc -l)" = 2 ] || fail "node names: $(cat ranks.out)"
ok "2 nodes x 2 tasks: ranks 0-3 on $(awk '/^task /{print $5}' ranks.out | sort -u | tr '\n' ' ')($(since "$t")s)"

# ------------------------------------------------------------ failure
t=$(now)
j=$(sbatch --parsable -o /dev/null --wrap 'exit 3')
st=$(ci_job_wait "$j" 60 || true)
if [ "$st" != FAILED ] || [ "$(field "$j" ExitCode)" != 3:0 ]; then
  fail "exit 3 gave $st $(field "$j" ExitCode)"
fi
ok "exit 3 -> FAILED ExitCode=3:0 ($(since "$t")s)"

# ------------------------------------------------------------ cancel
t=$(now)
j=$(sbatch --parsable -N2 -o /dev/null --wrap 'srun sleep 300')
wait_running "$j"
scancel "$j"
st=$(ci_job_wait "$j" 60 || true)
[ "$st" = CANCELLED ] || fail "scancel gave $st"
ok "scancel -> CANCELLED ExitCode=$(field "$j" ExitCode) ($(since "$t")s)"

# ------------------------------------------------------------ requeue
cat > requeue.sh <<'EOF'
#!/bin/bash
echo "run restart=${SLURM_RESTART_COUNT:-0}"
[ "${SLURM_RESTART_COUNT:-0}" -ge 1 ] && exit 0
trap 'scontrol requeue "$SLURM_JOB_ID"; exit 0' USR1
while :; do sleep 0.1; done
EOF
t=$(now)
j=$(sbatch --parsable --requeue --open-mode=append -o requeue-a.out requeue.sh)
wait_running "$j"
scontrol requeue "$j"
ci_job_wait "$j" 60 >/dev/null || fail "requeued job $j: $(ci_job_state "$j")"
if [ "$(field "$j" Restarts)" != 1 ] || ! grep -q 'restart=1' requeue-a.out; then
  fail "requeue: $(cat requeue-a.out)"
fi
ok "scontrol requeue -> ran again with SLURM_RESTART_COUNT=1, COMPLETED ($(since "$t")s)"

t=$(now)
j=$(sbatch --parsable --requeue --open-mode=append -o requeue-b.out requeue.sh)
wait_running "$j"
sleep 0.5   # let the batch shell install its trap
scancel --batch --signal=USR1 "$j"
ci_job_wait "$j" 60 >/dev/null || fail "signal+requeue job $j: $(ci_job_state "$j")"
grep -q 'restart=1' requeue-b.out || fail "signal+requeue: $(cat requeue-b.out)"
ok "scancel --batch --signal=USR1 -> trap requeued the job, 2nd run COMPLETED ($(since "$t")s)"

# ------------------------------------------------------------ slow checks
if [ "$SLOW" = 1 ]; then
  t=$(now)
  cat > sig.sh <<'EOF'
#!/bin/bash
t0=$(date +%s)
trap 'echo "USR1 after $(( $(date +%s) - t0 ))s"; exit 0' USR1
while :; do sleep 0.2; done
EOF
  j=$(sbatch --parsable --time=1 --signal=B:USR1@30 -o sig.out sig.sh)
  k=$(sbatch --parsable --time=1 -o /dev/null --wrap 'sleep 600')
  ci_job_wait "$j" 120 >/dev/null || fail "signal job $j: $(ci_job_state "$j")"
  ok "--time=1 --signal=B:USR1@30 -> $(grep USR1 sig.out) ($(since "$t")s)"
  st=$(ci_job_wait "$k" 150 || true)
  [ "$st" = TIMEOUT ] || fail "time limit gave $st"
  ok "--time=1 -> TIMEOUT Reason=$(field "$k" Reason) ($(since "$t")s)"
fi

# ------------------------------------------------------------ sacct
sacct --completion -n -P -o JobID,State,ExitCode > sacct.out
if ! grep -q '|FAILED|3:0$' sacct.out || ! grep -q '|CANCELLED|' sacct.out; then
  fail "sacct --completion: $(cat sacct.out)"
fi
ok "sacct --completion lists $(cut -d'|' -f1 sacct.out | sort -u | wc -l) jobs (plain sacct: accounting storage disabled)"

# ------------------------------------------------------------ torchrun
if [ "$TORCH" = 1 ]; then
  TORCHRUN=${TORCHRUN:-$(command -v torchrun)}
  cat > ddp.py <<'EOF'
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
w = dist.get_world_size()
os.write(1, f"rank={dist.get_rank()} world={w} node={os.environ.get('SLURMD_NODENAME', '-')} ok={t.item() == w * (w + 1) / 2}\n".encode())
dist.destroy_process_group()
EOF
  port=$(( 29600 + RANDOM % 300 ))
  t=$(now)
  "$TORCHRUN" --nnodes=1 --nproc_per_node=2 --rdzv_backend=c10d \
    --rdzv_endpoint="127.0.0.1:$port" --monitor_interval=0.2 ddp.py > tr1.out 2>&1 \
    || fail "standalone torchrun: $(cat tr1.out)"
  [ "$(grep -c 'world=2 .*ok=True' tr1.out)" = 2 ] || fail "standalone torchrun: $(cat tr1.out)"
  ok "torchrun 1 node x 2 processes, gloo all_reduce ($(since "$t")s)"

  cat > tr.sh <<EOF
#!/bin/bash
head=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | head -n 1)
srun --kill-on-bad-exit=1 "$TORCHRUN" --nnodes="\$SLURM_JOB_NUM_NODES" --nproc_per_node=2 \\
  --rdzv_backend=c10d --rdzv_endpoint="\$head:$((port + 1))" --rdzv_id="\$SLURM_JOB_ID" \\
  --monitor_interval=0.2 "$WORK/ddp.py"
EOF
  t=$(now)
  j=$(sbatch --parsable --nodes=2 --ntasks-per-node=1 -o tr2.out tr.sh)
  ci_job_wait "$j" 300 >/dev/null || fail "torchrun job $j: $(ci_job_state "$j"): $(cat tr2.out)"
  [ "$(grep -c 'world=4 .*ok=True' tr2.out)" = 4 ] || fail "torchrun in slurm: $(cat tr2.out)"
  ok "srun on 2 nodes -> torchrun x 2 processes each, world 4 ($(since "$t")s)"
fi

echo "smoke test passed (files in $WORK)"

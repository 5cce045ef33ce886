#!/usr/bin/env bash
# Start-up cost of ovlaunch-rank: `ovlaunch-rank -- /bin/true` against plain `/bin/true`
# (release build), with no plan and with a realistic srun plan (env, invariants, static
# affinity, identity derivation from Slurm variables), plus peak RSS.
#
# Uses hyperfine when installed, else a bash loop timed with `date +%s%N` (the loop's own
# fork+exec cost is in every row, so compare the rows, not the absolute numbers).
# Peak RSS comes from `/usr/bin/time -v` when present. Linux keeps the high-water mark
# across exec, so the `-- /bin/true` row is max(ovlaunch-rank, /bin/true); the `--version`
# row is ovlaunch-rank alone (it exits without exec).
#
# Usage: benches/rank.sh [RUNS]    (default 2000; HYPERFINE= forces the bash loop)
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${1:-2000}
cargo build --release --quiet --bin ovlaunch-rank
BIN="${CARGO_TARGET_DIR:-target}/release/ovlaunch-rank"
TRUE=/bin/true

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PLAN="$WORK/plan.json"
cat >"$PLAN" <<'EOF'
{"schema": 1, "launch_mode": "srun", "master_port": 29500, "strict": false,
 "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_P2P_NET_CHUNKSIZE": "2097152",
         "TORCH_NCCL_AVOID_RECORD_STREAMS": "1", "NCCL_NVLS_ENABLE": "0",
         "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
 "invariants": [{"var": "CUDA_DEVICE_MAX_CONNECTIONS", "equals": "1", "reason": "TP overlap"}],
 "affinity": {"policy": "static", "gpus_per_numa": 4, "membind": false}}
EOF
export SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_NTASKS=16 \
    SLURM_TASKS_PER_NODE='8(x2)' SLURM_JOB_NODELIST='gpu[001-002]' SLURM_JOB_NUM_NODES=2

echo "binary: $BIN ($(stat -c %s "$BIN") bytes), runs: $RUNS, cpus: $(nproc)"

HYPERFINE=${HYPERFINE-hyperfine}
if [ -n "$HYPERFINE" ] && command -v "$HYPERFINE" >/dev/null 2>&1; then
    "$HYPERFINE" -N --warmup 200 --runs "$RUNS" \
        "$TRUE" \
        "$BIN -- $TRUE" \
        "$BIN --plan $PLAN -- $TRUE"
else
    echo "hyperfine not used; bash loop with date +%s%N"
    loop() { # label, command...
        local label=$1 i start end
        shift
        for ((i = 0; i < 200; i++)); do "$@"; done # warm-up
        start=$(date +%s%N)
        for ((i = 0; i < RUNS; i++)); do "$@"; done
        end=$(date +%s%N)
        printf '%-40s %8.1f us/run\n' "$label" "$(((end - start) / RUNS))e-3"
    }
    for round in 1 2 3; do
        echo "round $round"
        loop "/bin/true" "$TRUE"
        loop "ovlaunch-rank -- /bin/true" "$BIN" -- "$TRUE"
        loop "ovlaunch-rank --plan srun -- /bin/true" "$BIN" --plan "$PLAN" -- "$TRUE"
    done
fi

if [ -x /usr/bin/time ]; then
    rss() { # label, command...
        local label=$1
        shift
        local kb
        kb=$( { /usr/bin/time -v "$@" >/dev/null; } 2>&1 | awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}')
        printf '%-40s %6s KiB max RSS\n' "$label" "$kb"
    }
    rss "/bin/true" "$TRUE"
    rss "ovlaunch-rank --version (no exec)" "$BIN" --version
    rss "ovlaunch-rank --plan srun -- /bin/true" "$BIN" --plan "$PLAN" -- "$TRUE"
else
    echo "/usr/bin/time not found; RSS not measured"
fi

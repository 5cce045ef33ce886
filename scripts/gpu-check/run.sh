#!/usr/bin/env bash
# The GPU check: real Megatron-Bridge training on one GPU, started by ovlaunch.
#
# Usage, on a machine with one NVIDIA GPU, Python 3.12 with PyTorch (torchrun on PATH) and the
# bundle built by scripts/gpu-check/bundle.sh at .gpu/ (or OVL_GPU_BUNDLE):
#   bash scripts/gpu-check/run.sh [RESULTS_DIR]       (default: $OUT, else gpu-results/)
#
# Every job is `ovlaunch torchrun` of Bridge's Llama 3 8B pretraining recipe, cut to a few layers
# with `--set`, on mock data, through the rank runtime and Bridge's own runner:
#   train    20 steps, a checkpoint at the end into the job directory
#   resume   the same job again with 30 steps: it loads the step-20 checkpoint and goes on
#   preempt  a long run; SIGTERM to the rank after a few steps (what Slurm's --signal does for the
#            preemption plugin, which needs Slurm); the trainer's exit handler saves and stops
#   grid     step time and peak memory for depth, width, micro batch, sequence and recompute:
#            the jobs start together and take turns on the GPU
# then compares Bridge's own record of the config it trained with (run_config.yaml in the
# checkpoint) with `ovlaunch plan -o json`, and the trainer's environment with `ovlaunch env`
# (compare.py). Results: summary.txt (this output), gpu-measurements.csv, logs.tar.gz.
# Stand-ins (named in the output): sitecustomize.py, for want of Transformer Engine.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
BUNDLE=${OVL_GPU_BUNDLE:-$ROOT/.gpu}
RES=${1:-${OUT:-$ROOT/gpu-results}}
WORK=${OVL_GPU_WORK:-/tmp/ovlaunch-gpu-check}
BUDGET=${OVL_GPU_BUDGET_S:-400}   # a grid job whose turn on the GPU has not come by then is not run
STAGES=${OVL_GPU_STAGES:-train resume preempt grid}
want() { case " $STAGES " in *" $1 "*) return 0 ;; esac; return 1; }
mkdir -p "$RES"
rm -rf "$WORK"
mkdir -p "$WORK/logs"
exec > >(tee "$RES/summary.txt") 2>&1

say() { echo "[gpu-check +${SECONDS}s] $*"; }
die() { say "FAILED: $*"; pack; exit 1; }
pack() {
  cp -r "$WORK/dump" "$WORK/logs/dump" 2>/dev/null
  find "$WORK/jobs" -name run_config.yaml 2>/dev/null | while read -r f; do
    rel=${f#"$WORK"/jobs/}; cp "$f" "$WORK/logs/${rel//\//__}"
  done
  tar -C "$WORK" -czf "$RES/logs.tar.gz" logs 2>/dev/null || true
}

say "bundle $BUNDLE, work $WORK, results $RES"
[ -x "$BUNDLE/bin/ovlaunch" ] || die "no bundle at $BUNDLE (scripts/gpu-check/bundle.sh builds it)"

# --- the software -------------------------------------------------------------------------------
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" \
  "$BUNDLE"/wheels/*.whl > "$WORK/logs/pip.log" 2>&1 || die "installing the wheels (logs/pip.log)"
# Bridge's initialization runs `make -C megatron/core/datasets` (compile_helpers); the wheel ships
# the compiled helper but not the Makefile: a Makefile whose one target is that helper, built
helpers=$(find "$WORK/site/megatron/core/datasets" -maxdepth 1 -name 'helpers_cpp*.so' | head -1)
[ -n "$helpers" ] || die "the megatron-core wheel has no compiled dataset helper"
printf 'all:\n\t@test -f %s\n' "$(basename "$helpers")" > "$WORK/site/megatron/core/datasets/Makefile"
say "stand-in: megatron/core/datasets/Makefile (the wheel's prebuilt $(basename "$helpers") as the only target)"
export PYTHONPATH="$ROOT/scripts/gpu-check:$WORK/site"
export HF_HUB_CACHE="$BUNDLE/hf" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PYDIR=$(dirname "$(readlink -f "$(command -v python3)")")
mkdir -p "$WORK/bin"
command -v python > /dev/null 2>&1 || ln -s "$(command -v python3)" "$WORK/bin/python"
export PATH="$BUNDLE/bin:$WORK/bin:$PATH:$PYDIR"
command -v torchrun > /dev/null || die "torchrun not on PATH"

GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
VERSIONS=$(python3 - <<'EOF' 2> "$WORK/logs/versions.err"
import importlib.metadata as m, torch
v = {p: m.version(p) for p in ("torch", "megatron-core", "megatron-bridge", "transformers")}
v["cuda"] = torch.version.cuda
v["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
print(" ".join(f"{k}={x}" for k, x in v.items()))
EOF
) || die "the packages do not import (logs/versions.err)"
say "gpu: $GPU_NAME, driver $DRIVER; $VERSIONS"
case "$GPU_NAME" in
  *H100*) KIND=h100 ;;
  *H200*) KIND=h200 ;;
  *) die "no ovlaunch GPU kind for '$GPU_NAME'" ;;
esac
TORCH_VER=$(python3 -c 'import torch; print(torch.__version__.split("+")[0])')
nvidia-smi > "$WORK/logs/nvidia-smi.txt" 2>&1
ovlaunch --version > "$WORK/logs/ovlaunch-version.txt" 2>&1

# --- the jobs -----------------------------------------------------------------------------------
# What every job shares: the recipe cut to a small model, one GPU, no Transformer Engine (the plan
# turns off what needs it: gradient-accumulation and cross-entropy fusion, the TE-only optimizer).
BRIDGE_ROOT="$BUNDLE/bridge"
# shellcheck source=scripts/gpu-check/jobs.sh
source "$ROOT/scripts/gpu-check/jobs.sh"
CKPT="$WORK/jobs/train/checkpoints"

# render NAME ARGS...: `ovlaunch torchrun` writes the job directory and prints its script
render() {
  local name=$1; shift
  local torchrun=(ovlaunch torchrun "${COMMON[@]}" "$@" --jobs-root "$WORK/jobs" --job-dir "$WORK/jobs/$name")
  if ! "${torchrun[@]}" > "$WORK/logs/$name.script.sh" 2> "$WORK/logs/$name.ovlaunch.txt"; then
    # ovlaunch reads configuration and code only from files no other user could have written,
    # every directory up to / included (docs/security.md). Where this machine's copy of the
    # repository sits under a directory that fails that rule, the check says so and trusts it.
    if [ -n "${OVLAUNCH_SAFE_DIRECTORY:-}" ] || ! grep -q OVLAUNCH_SAFE_DIRECTORY "$WORK/logs/$name.ovlaunch.txt"; then
      die "ovlaunch torchrun for $name (logs/$name.ovlaunch.txt): $(tail -3 "$WORK/logs/$name.ovlaunch.txt")"
    fi
    say "ovlaunch refused a file of this machine's copy: $(head -1 "$WORK/logs/$name.ovlaunch.txt")"
    say "  the check trusts it (OVLAUNCH_SAFE_DIRECTORY='*'): one user, root, on this machine"
    export OVLAUNCH_SAFE_DIRECTORY='*'
    "${torchrun[@]}" > "$WORK/logs/$name.script.sh" 2> "$WORK/logs/$name.ovlaunch.txt" \
      || die "ovlaunch torchrun for $name (logs/$name.ovlaunch.txt): $(tail -3 "$WORK/logs/$name.ovlaunch.txt")"
  fi
  ovlaunch plan "${COMMON[@]}" "$@" -o json > "$WORK/logs/$name.plan.json" 2>/dev/null
  ovlaunch env "${COMMON[@]}" "$@" --format json > "$WORK/logs/$name.env.json" 2>/dev/null
  ovlaunch estimate "${COMMON[@]}" "$@" -o json > "$WORK/logs/$name.estimate.json" 2>/dev/null
  printf '%s\n' "${COMMON[@]}" "$@" > "$WORK/logs/$name.args"
}
# launch NAME TIMEOUT: run the job's script with the trainer's environment and memory recorded
launch() {
  local name=$1 limit=$2 rc
  OVL_CHECK_DUMP="$WORK/dump/$name" timeout "$limit" bash "$WORK/jobs/$name/launch.sh" \
    > "$WORK/logs/$name.log" 2>&1
  rc=$?
  say "$name: exit $rc"
  return $rc
}
# failure NAME: the end of a failed job's log, without the noise of warnings
failure() {
  grep -iE 'error|exception|assert|exit' "$WORK/logs/$1.log" | grep -vE 'FP8GlobalStateManager|UserWarning|ChildFailedError' \
    | head -12 | sed 's/^/  | /'
  grep -vE '^(INFO|WARNING|DEBUG)|UserWarning|warnings\.warn|^\s*$' "$WORK/logs/$1.log" | tail -8 | sed 's/^/  | /'
}
iters() { grep -o 'iteration *[0-9]*/ *[0-9]* |.*lm loss: [0-9.E+-]*' "$WORK/logs/$1.log" \
  | sed -E 's/iteration *([0-9]+)\/ *[0-9]+ \|.*elapsed time per iteration \(ms\): ([0-9.]+).*lm loss: ([0-9.E+-]+)/\1 \2 \3/'; }

if want train; then
say "== train: 20 steps, a checkpoint at 20 in the job directory"
mapfile -t TRAIN < <(train_args "$CKPT")
render train "${TRAIN[@]}"
launch train 240
if [ -z "$(iters train)" ]; then
  failure train
  die "the first job trained no step: the rest would fail the same way"
fi
iters train | awk '{printf "  step %s  %s ms  loss %s\n", $1, $2, $3}'
grep -E 'saved checkpoint|successfully saved' "$WORK/logs/train.log" | tail -2 | sed 's/^/  /'
find "$CKPT" -mindepth 1 -maxdepth 1 -printf '  checkpoints: %f\n' 2>/dev/null | sort
fi

if want resume; then
say "== resume: the same job again, 30 steps"
# shellcheck disable=SC2046
render resume $(shape) --set train.train_iters=30 --set "checkpoint.save=$CKPT" --set "checkpoint.load=$CKPT" \
  --set checkpoint.save_interval=30
launch resume 240 || failure resume
grep -iE 'loading checkpoint|loaded checkpoint|successfully loaded' "$WORK/logs/resume.log" | tail -2 | sed 's/^/  /'
iters resume | head -3 | awk '{printf "  step %s  %s ms  loss %s\n", $1, $2, $3}'
say "  last step of train vs first of resume: $(iters train | tail -1 | cut -d' ' -f1,3) -> $(iters resume | head -1 | cut -d' ' -f1,3)"
fi

if want preempt; then
say "== preempt: SIGTERM to the rank after step 6 (train.exit_signal_handler, as the preemption plugin sets it)"
PCKPT="$WORK/jobs/preempt/checkpoints"
# shellcheck disable=SC2046
render preempt $(shape) --set train.train_iters=5000 --set "checkpoint.save=$PCKPT" --set checkpoint.save_interval=1000 \
  --set train.exit_signal_handler=true
OVL_CHECK_DUMP="$WORK/dump/preempt" timeout 240 bash "$WORK/jobs/preempt/launch.sh" > "$WORK/logs/preempt.log" 2>&1 &
JOB=$!
for _ in $(seq 1 180); do
  iters preempt 2>/dev/null | awk '$1 >= 6 {found=1} END {exit !found}' && break
  kill -0 "$JOB" 2>/dev/null || break
  sleep 1
done
TRAINER=$(pgrep -f '^[^ ]+ [^ ]+/run_recipe\.py' | head -1)
if [ -n "$TRAINER" ]; then
  say "  SIGTERM to the trainer (pid $TRAINER) at step $(iters preempt | tail -1 | cut -d' ' -f1)"
  kill -TERM "$TRAINER"
else
  say "  no trainer process found"
fi
wait "$JOB"
say "preempt: exit $?"
grep -E 'exiting program|saved checkpoint|successfully saved' "$WORK/logs/preempt.log" | tail -3 | sed 's/^/  /'
find "$PCKPT" -mindepth 1 -maxdepth 1 -printf '  checkpoints: %f\n' 2>/dev/null | sort
fi

if want grid; then
say "== grid: step time and peak memory, one job at a time on the GPU"
# The jobs start together and take turns on the GPU (sitecustomize.py, part 3): their imports and
# configuration overlap, their steps do not. No checkpoint (save_interval=0: no final save).
GRID=(
  "base|"
  "depth8|model.num_layers=8"
  "depth16|model.num_layers=16"
  "seq4096|dataset.seq_length=4096 model.seq_length=4096"
  "seq8192|dataset.seq_length=8192 model.seq_length=8192"
  "width4096|model.hidden_size=4096 model.ffn_hidden_size=14336 model.num_attention_heads=32"
  "mbs2|train.micro_batch_size=2"
  "mbs4|train.micro_batch_size=4"
  "recompute|model.recompute_granularity=full model.recompute_method=uniform model.recompute_num_layers=1"
)
# OVL_GPU_GRID=check: configurations none of the others holds, whose memory the estimator
# predicted before they ran (results/gpu-2026-11-26-h200/README.md)
[ "${OVL_GPU_GRID:-}" = check ] && GRID=(
  "v_depth12_mbs2|model.num_layers=12 train.micro_batch_size=2"
  "v_w2560_s4096|model.hidden_size=2560 model.num_attention_heads=32 dataset.seq_length=4096 model.seq_length=4096"
  "v_ffn11008_h32_mbs4|model.ffn_hidden_size=11008 model.num_attention_heads=32 train.micro_batch_size=4"
  "v_w3072_d6_recompute|model.hidden_size=3072 model.num_attention_heads=24 model.num_layers=6 model.recompute_granularity=full model.recompute_method=uniform model.recompute_num_layers=1"
  "v_seq6144|dataset.seq_length=6144 model.seq_length=6144"
  "v_depth24|model.num_layers=24"
)
# OVL_GPU_GRID=more: a second set, each shape term varied apart from the first's
[ "${OVL_GPU_GRID:-}" = more ] && GRID=(
  "depth2|model.num_layers=2"
  "depth8_mbs4|model.num_layers=8 train.micro_batch_size=4"
  "width3072|model.hidden_size=3072 model.num_attention_heads=24"
  "ffn16384|model.ffn_hidden_size=16384"
  "mbs8|train.micro_batch_size=8"
  "seq4096_mbs2|dataset.seq_length=4096 model.seq_length=4096 train.micro_batch_size=2"
  "selective|model.recompute_granularity=selective"
  "heads32|model.num_attention_heads=32"
  "width4096_depth8|model.num_layers=8 model.hidden_size=4096 model.ffn_hidden_size=14336 model.num_attention_heads=32"
)
# OVL_GPU_GRID=moe: a mixture-of-experts layer (jobs.sh: COMMON_MOE), its weights (the optimizer's
# step) and its activations: routed top-k, expert FFN width, selective recompute of the MoE block
SHAPE=shape
if [ "${OVL_GPU_GRID:-}" = moe ]; then
  COMMON=("${COMMON_MOE[@]}")
  SHAPE=moe_shape
  D="model.num_layers=6 model.num_attention_heads=8 train.micro_batch_size=8"
  GRID=(
    "moe_base|"
    "moe_e64|model.num_moe_experts=64"
    "moe_d6h8|$D"
    "moe_d6h8_top2|$D model.moe_router_topk=2"
    "moe_d6h8_top4|$D model.moe_router_topk=4"
    "moe_d6h8_e16_f1536|$D model.num_moe_experts=16 model.moe_ffn_hidden_size=1536"
    "moe_d6h8_rc_moe|$D model.recompute_granularity=selective model.recompute_modules=[moe]"
    "moe_d6h8_rc_moe_act|$D model.recompute_granularity=selective model.recompute_modules=[moe_act]"
    "moe_d6h8_s4096|model.num_layers=6 model.num_attention_heads=8 train.micro_batch_size=4 dataset.seq_length=4096 model.seq_length=4096"
  )
fi
# OVL_GPU_GRID=moe_check: MoE shapes none of the others holds, whose memory the estimator
# predicted before they ran (results/gpu-2026-11-27-h100-moe/predictions.txt)
if [ "${OVL_GPU_GRID:-}" = moe_check ]; then
  COMMON=("${COMMON_MOE[@]}")
  SHAPE=moe_shape
  GRID=(
    "mc_d5h16_k6_e24_f1024_mbs8|model.num_layers=5 model.num_attention_heads=16 model.moe_router_topk=6 model.num_moe_experts=24 model.moe_ffn_hidden_size=1024 train.micro_batch_size=8"
    "mc_d8h8_f512_mbs8|model.num_layers=8 model.num_attention_heads=8 model.moe_ffn_hidden_size=512 train.micro_batch_size=8"
    "mc_d4h8_s8192_mbs2|model.num_layers=4 model.num_attention_heads=8 dataset.seq_length=8192 model.seq_length=8192 train.micro_batch_size=2"
    "mc_d3h4_k1_e8_mbs8|model.num_layers=3 model.num_attention_heads=4 model.moe_router_topk=1 model.num_moe_experts=8 train.micro_batch_size=8"
    "mc_d8h16_rc_moe_mbs8|model.num_layers=8 model.num_attention_heads=16 train.micro_batch_size=8 model.recompute_granularity=selective model.recompute_modules=[moe]"
  )
fi
# OVL_GPU_GRID=users: what users bring (jobs.sh: COMMON_USERS, USERS_GRID); their memory and
# step time were predicted before they ran (results/gpu-users-pending/predictions.txt)
if [ "${OVL_GPU_GRID:-}" = users ]; then
  COMMON=("${COMMON_USERS[@]}")
  SHAPE=as_given
  GRID=("${USERS_GRID[@]}")
fi
export OVL_GPU_LOCK="$WORK/gpu.lock" OVL_GPU_JOBS=${#GRID[@]} OVL_GPU_SETTLE_S=${OVL_GPU_SETTLE_S:-150}
export OVL_GPU_DEADLINE=$(( $(date +%s) + BUDGET - SECONDS ))
PIDS=()
for row in "${GRID[@]}"; do
  name=${row%%|*}
  # shellcheck disable=SC2046,SC2086
  render "$name" $($SHAPE ${row#*|}) --set train.train_iters=10 --set checkpoint.save_interval=0
  launch "$name" $(( BUDGET + ${OVL_GPU_JOB_S:-120} - SECONDS )) &
  PIDS+=("$!")
done
i=0
for row in "${GRID[@]}"; do
  name=${row%%|*}
  wait "${PIDS[$i]}" || failure "$name"
  grep -h '^\[gpu-check\] ' "$WORK/logs/$name.log" | sed "s/^/  $name: /"
  i=$((i + 1))
done
unset OVL_GPU_LOCK
say "fp8: not run (Transformer Engine, which Megatron-Core's FP8 needs, is not on this machine)"
fi

say "== compare: plan vs Bridge's run_config.yaml, ovlaunch env vs the trainer's environment; the CSV"
python3 "$ROOT/scripts/gpu-check/compare.py" --work "$WORK" --csv "$RES/gpu-measurements.csv" \
  --gpu "$GPU_NAME" --driver "$DRIVER" --versions "$VERSIONS" || say "compare.py failed"
pack
say "done"

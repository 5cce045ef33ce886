#!/usr/bin/env bash
# What the GPU check carries, checked on a CPU machine (CI runs it): the wheels download for the
# GPU machine's Python (CPython 3.12, x86-64), install, import without Transformer Engine,
# ModelOpt or nvidia-resiliency-ext (with the check's stand-ins), and Bridge's own code builds the
# check's training job from the plan's trainer overrides (cpu-check.py says what is checked).
#
# Usage: scripts/gpu-check/cpu-check.sh [WORK_DIR]
#   OVLAUNCH_BRIDGE_PYTHON  a Python 3.12 with PyTorch (.ci/bridge-venv.sh prints one)
#   needs target/release/ovlaunch (cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${OVLAUNCH_BRIDGE_PYTHON:?set OVLAUNCH_BRIDGE_PYTHON to a Python 3.12 with PyTorch (.ci/bridge-venv.sh)}
WORK=${1:-$(mktemp -d)}
[ -x target/release/ovlaunch ] || { echo "cpu-check: build target/release/ovlaunch first" >&2; exit 2; }

bash scripts/gpu-check/bundle.sh --wheels-only --out "$WORK/bundle" > /dev/null
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" "$WORK/bundle"/wheels/*.whl

KIND=h100 TORCH_VER=2.11.0 BRIDGE_ROOT=/opt/Megatron-Bridge
# shellcheck source=scripts/gpu-check/jobs.sh
source scripts/gpu-check/jobs.sh
mapfile -t TRAIN < <(train_args "$WORK/checkpoints")
target/release/ovlaunch plan "${COMMON[@]}" "${TRAIN[@]}" -o json > "$WORK/plan.json" 2> /dev/null
# an MoE grid job (run.sh, OVL_GPU_GRID=moe), the one with the most settings of its own
# shellcheck disable=SC2046
target/release/ovlaunch plan "${COMMON_MOE[@]}" $(moe_shape model.num_layers=6 model.num_attention_heads=8 \
  train.micro_batch_size=8 model.recompute_granularity=selective "model.recompute_modules=[moe]") \
  --set train.train_iters=10 --set checkpoint.save_interval=0 -o json > "$WORK/plan-moe.json" 2> /dev/null

# the users' jobs (run.sh, OVL_GPU_GRID=users): Bridge library functions and a user's recipe file
users=()
for row in "${USERS_GRID[@]}"; do
  name=${row%%|*}
  # shellcheck disable=SC2086
  target/release/ovlaunch plan "${COMMON_USERS[@]}" ${row#*|} --set train.train_iters=10 \
    --set checkpoint.save_interval=0 -o json > "$WORK/plan-$name.json" 2> /dev/null
  users+=("$WORK/plan-$name.json")
done

PYTHONPATH="$PWD/scripts/gpu-check:$WORK/site" OVL_CHECK_DUMP="$WORK/dump" HF_HUB_CACHE="$WORK/bundle/hf" HF_HUB_OFFLINE=1 \
  TRANSFORMERS_OFFLINE=1 "$PY" scripts/gpu-check/cpu-check.py "$WORK/plan.json" "$WORK/plan-moe.json" "${users[@]}" 2> "$WORK/cpu-check.err" \
  || { tail -30 "$WORK/cpu-check.err" >&2; exit 1; }
echo "cpu-check: ok"

#!/usr/bin/env bash
# Build what the GPU check carries to its machine: a folder (default .gpu/, ignored by git) that
# scripts/gpu-check/run.sh reads there. Runs on an x86-64 Linux build machine with the Rust
# toolchain, pip and a registry.
#
# Usage: scripts/gpu-check/bundle.sh --bridge-src DIR [--out DIR]
#        scripts/gpu-check/bundle.sh --wheels-only [--out DIR]     (what cpu-check.sh needs)
#   --bridge-src  a Megatron-Bridge checkout at its r0.6.0 branch (Bridge's runner, scripts/training
#                 and scripts/common, lives in its repository, not in its package)
#   --out         the bundle folder (default .gpu)
#   --wheels-only only wheels/ and hf/
#
# It holds:
#   bin/ovlaunch, bin/ovlaunch-rank-x86_64   this tree's release build, the rank runtime static
#   wheels/                                  scripts/gpu-check/requirements.txt, for CPython 3.12 x86-64
#   bridge/scripts/{training,common}/        Bridge's runner (the trainer's --bridge-root), and the
#   bridge/src/.../perf_recipes/ index       package's benchmark-recipe index the runner reads
#   hf/                                      an offline Hugging Face cache of the config.json fixtures
#                                            (tests/bridge/hf) the recipe reads
# and prints its size: one call of the check carries at most 64 MiB with the repository.
set -euo pipefail
cd "$(dirname "$0")/../.."

OUT=.gpu
SRC=
WHEELS_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --bridge-src) SRC=$2; shift 2 ;;
    --wheels-only) WHEELS_ONLY=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "bundle: unknown argument: $1 (--bridge-src DIR, --out DIR)" >&2; exit 2 ;;
  esac
done
[ -n "$SRC" ] || [ "$WHEELS_ONLY" = 1 ] || { echo "bundle: --bridge-src DIR is required (a Megatron-Bridge checkout, r0.6.0)" >&2; exit 2; }
[ "$WHEELS_ONLY" = 1 ] || [ -f "$SRC/scripts/training/run_recipe.py" ] || { echo "bundle: $SRC/scripts/training/run_recipe.py not found" >&2; exit 2; }
[ "$(uname -m)" = x86_64 ] || { echo "bundle: build on x86-64 (the GPU machine's architecture)" >&2; exit 2; }

log() { echo "[gpu-bundle] $*" >&2; }
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/wheels" "$OUT/bridge/scripts" "$OUT/hf"

if [ "$WHEELS_ONLY" = 0 ]; then
  log "ovlaunch (release) and the static rank runtime"
  cargo build --release --quiet --bin ovlaunch
  cp target/release/ovlaunch "$OUT/bin/ovlaunch"
  bash scripts/build-rank-runtime.sh --out "$OUT/bin" x86_64 >&2
fi

log "wheels (CPython 3.12, manylinux x86-64, no dependencies)"
REQS=$(grep -v '^#' scripts/gpu-check/requirements.txt | grep -v '^$')
# shellcheck disable=SC2046
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$OUT/wheels" $(echo "$REQS" | grep -v '^antlr4-python3-runtime==') >&2
# antlr4-python3-runtime 4.9.3 (what omegaconf 2.3 pins) is published only as a source archive of
# pure Python: build its wheel here
python3 -m pip wheel -q --no-deps -w "$OUT/wheels" "$(echo "$REQS" | grep '^antlr4-python3-runtime==')" >&2

if [ "$WHEELS_ONLY" = 0 ]; then
log "Bridge's runner from $SRC"
cp -r "$SRC/scripts/training" "$SRC/scripts/common" "$OUT/bridge/scripts/"
git -C "$SRC" rev-parse HEAD > "$OUT/bridge/REVISION" 2>/dev/null || echo unknown > "$OUT/bridge/REVISION"
# The runner tells a benchmark recipe from a library one by reading the names the checkout's
# src/megatron/bridge/perf_recipes/**/__init__.py export: give it those of the package that runs.
python3 - "$OUT/wheels" "$OUT/bridge/src" <<'EOF'
import glob, sys, zipfile
wheel = glob.glob(f"{sys.argv[1]}/megatron_bridge-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("megatron/bridge/perf_recipes/") and name.endswith("__init__.py"):
            z.extract(name, sys.argv[2])
EOF
fi

log "offline Hugging Face cache"
ZERO=0000000000000000000000000000000000000000
# a fixture's config.json, or a Diffusers checkpoint's per component (transformer/config.json)
for d in tests/bridge/hf/*/*/; do
  d=${d%/}; org=$(basename "$(dirname "$d")"); name=$(basename "$d")
  repo="$OUT/hf/models--$org--$name"
  mkdir -p "$repo/snapshots/$ZERO" "$repo/refs"
  (cd "$d" && find . -name config.json) | while read -r f; do
    mkdir -p "$(dirname "$repo/snapshots/$ZERO/$f")"
    cp "$d/$f" "$repo/snapshots/$ZERO/$f"
  done
  printf '%s' "$ZERO" > "$repo/refs/main"
done

# A recipe that pins a checkpoint commit (`_MODEL_REVISION` beside its `_MODEL_ID` in Bridge's
# recipe module) asks the cache for that commit's snapshot: the fixture answers for it too
python3 - "$OUT/wheels" "$OUT/hf" "$ZERO" <<'PYEOF'
import glob, os, re, sys, zipfile
wheel, hf, zero = glob.glob(f"{sys.argv[1]}/megatron_bridge-*.whl")[0], sys.argv[2], sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if not (name.startswith("megatron/bridge/recipes/") and name.endswith(".py")):
            continue
        text = z.read(name).decode()
        ids = dict(re.findall(r'^(\w+)_MODEL_ID = "([^"]+)"', text, re.M))
        for prefix, rev in re.findall(r'^(\w+)_MODEL_REVISION = "([0-9a-f]{40})"', text, re.M):
            repo = os.path.join(hf, "models--" + ids.get(prefix, "").replace("/", "--"))
            if prefix in ids and os.path.isdir(os.path.join(repo, "snapshots", zero)):
                link = os.path.join(repo, "snapshots", rev)
                if not os.path.lexists(link):
                    os.symlink(zero, link)
PYEOF
du -sh "$OUT" >&2
echo "$OUT"

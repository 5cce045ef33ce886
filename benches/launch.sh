#!/usr/bin/env bash
# Whole-process benchmarks of the release binaries:
#  1. `ovlaunch --recipe llama70b --gpus h100x64 --dry-run` (plan + render + print);
#  2. `ovlaunch-rank -- /bin/true` against `/bin/true` (the rank runtime's added cost);
# plus maximum resident memory of each. Uses hyperfine when installed, else a timed loop.
# Usage: benches/launch.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
ov=target/release/ovlaunch
rk=target/release/ovlaunch-rank

dry=("$ov" --recipe llama70b --gpus h100x64 --dry-run --job-dir /jobs/bench --rank-runtime ovlaunch-rank)

if command -v hyperfine >/dev/null 2>&1; then
  hyperfine -N --warmup 20 --runs 300 "${dry[*]}" "$rk -- /bin/true" "/bin/true"
else
  loop() { # name, command...
    local name=$1; shift
    local t0 t1
    t0=$(date +%s%N)
    for _ in $(seq 300); do "$@" >/dev/null; done
    t1=$(date +%s%N)
    echo "$name: $(( (t1 - t0) / 300 / 1000 )) us per run (mean of 300)"
  }
  loop "dry run" "${dry[@]}"
  loop "ovlaunch-rank -- /bin/true" "$rk" -- /bin/true
  loop "/bin/true" /bin/true
fi

if [ -x /usr/bin/time ]; then
  for cmd in "${dry[*]}" "$rk -- /bin/true" "/bin/true"; do
    # shellcheck disable=SC2086
    rss=$(/usr/bin/time -f %M $cmd 2>&1 >/dev/null | tail -n 1)
    echo "max RSS ${rss} KiB: $cmd"
  done
else
  echo "(GNU time not installed: no RSS figures)"
fi

#!/usr/bin/env bash
# Coverage-guided fuzzing of the input parsers (fuzz/: recipe, hardware, plugin, profile,
# rankplan, hostlist)
# with libFuzzer, on the stable toolchain: rustc's LLVM sanitizer-coverage pass instruments
# the code (what cargo-fuzz does, without its nightly-only address sanitizer), libfuzzer-sys
# links libFuzzer (built from its bundled C++ sources, so g++ is needed).
#
# Usage: .ci/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 60 s, every target)
# Each target starts from a seed corpus of the shipped data files; a crash, panic, timeout
# (10 s per input) or memory blow-up (2 GiB) fails the run and leaves the input in
# fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

secs=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(recipe hardware plugin profile rankplan hostlist)
fi

export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
# An explicit --target keeps the instrumentation off build scripts and proc macros.
host=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --quiet --bins --target "$host"

seed() { # target dir: copy the seed inputs for a target into its corpus
  local t=$1 dir=$2
  case $t in
    recipe) cp ../recipes/*.yaml ../tests/fixtures/tiny.yaml "$dir"/ ;;
    hardware) cp ../hardware/*.yaml "$dir"/ ;;
    plugin) cp ../plugins/*.yaml "$dir"/
            printf 'nsys:profile_step_start=5,nsys_trace=nvtx,cuda' > "$dir/spec1"
            printf 'wandb:project=p,api_key=x' > "$dir/spec2" ;;
    profile) printf 'default_profile: eos\nprofiles:\n  eos:\n    account: a\n    partition: p\n    jobs_root: /j\n    env: {X: "1", HF_TOKEN: t}\n    sbatch_args: [--reservation=r]\n' > "$dir/p1"
             printf 'profiles: {x: {time: "1-00:00:00", jobs_root_shared: group, container_mounts: [a:b]}}\n' > "$dir/p2" ;;
    rankplan)
              printf '{"schema": 1, "launch_mode": "srun", "master_port": 29500, "strict": false, "env": {"A": "1"}, "invariants": [{"var": "A", "equals": "1", "reason": "x"}], "affinity": {"policy": "static", "gpus_per_numa": 4, "membind": false}}' > "$dir/r1" ;;
    hostlist) printf 'gpu[001-004,010]' > "$dir/h1"; printf 'a1,b[2-3]' > "$dir/h2"
              printf 'rack[1-2]-n[01-02]' > "$dir/h3"; printf 'Et*4|(t*4|)*14tmL' > "$dir/l1" ;;
  esac
}

for t in "${targets[@]}"; do
  corpus=corpus/$t
  mkdir -p "$corpus" "artifacts/$t"
  seed "$t" "$corpus"
  echo "fuzz: $t for ${secs}s"
  ./target/"$host"/release/"$t" "$corpus" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="artifacts/$t/" -print_final_stats=1 2>"artifacts/$t.log" \
    || { tail -n 40 "artifacts/$t.log"; echo "fuzz: $t FAILED"; exit 1; }
  grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' "artifacts/$t.log" | sed "s/^/fuzz: $t /"
done
echo "fuzz: ok"

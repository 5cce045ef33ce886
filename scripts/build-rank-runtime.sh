#!/usr/bin/env bash
# Build the rank runtime (ovlaunch-rank) as a statically linked binary for each given
# architecture, so that it runs in any container image and on nodes of that architecture.
#
# Usage: scripts/build-rank-runtime.sh [--out DIR] [--debug] ARCH...
#   ARCH    x86_64 or aarch64 (default: this machine's)
#   --out   where the binaries go (default target/rank-runtime): DIR/ovlaunch-rank-ARCH
#   --debug build without optimisations (faster to build; for tests)
#
# How:
#   x86_64   the glibc target with `-C target-feature=+crt-static` (a static-pie binary
#            with no program interpreter); needs only the Rust toolchain.
#   aarch64  cross-built with Debian's Rust (packages rustc-web, cargo-web and the
#            multiarch standard library libstd-rust-web-dev:arm64) and the GNU cross
#            linker (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross);
#            .ci/install.sh rank-cross installs them. Check it with qemu-aarch64-static.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=target/rank-runtime
PROFILE=release
ARCHES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --out=*) OUT=${1#*=}; shift ;;
    --debug) PROFILE=debug; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    x86_64|aarch64) ARCHES+=("$1"); shift ;;
    *) echo "build-rank-runtime: unknown argument: $1 (x86_64, aarch64, --out DIR, --debug)" >&2; exit 2 ;;
  esac
done
[ ${#ARCHES[@]} -gt 0 ] || ARCHES=("$(uname -m)")
mkdir -p "$OUT"

# The rank runtime is its own package once the workspace has one, else a binary of the root.
if [ -f crates/ovlaunch-rank/Cargo.toml ]; then
  SELECT=(-p ovlaunch-rank --bin ovlaunch-rank)
else
  SELECT=(--bin ovlaunch-rank)
fi
FLAGS=()
[ "$PROFILE" = release ] && FLAGS+=(--release)

for arch in "${ARCHES[@]}"; do
  triple=$arch-unknown-linux-gnu
  target_dir=target/rank-runtime-build
  case "$arch" in
    x86_64)
      cargo=cargo
      env_extra=()
      ;;
    aarch64)
      for b in /usr/bin/cargo /usr/bin/rustc aarch64-linux-gnu-gcc; do
        command -v "$b" >/dev/null 2>&1 || {
          echo "build-rank-runtime: $b not found; run .ci/install.sh rank-cross" >&2
          exit 1
        }
      done
      [ -d /usr/lib/rustlib/aarch64-unknown-linux-gnu ] || {
        echo "build-rank-runtime: no aarch64 Rust standard library; run .ci/install.sh rank-cross" >&2
        exit 1
      }
      # Debian's toolchain has its own build directory: its artifacts are not rustup's.
      cargo=/usr/bin/cargo
      target_dir=target/rank-runtime-build-debian
      env_extra=(RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc)
      ;;
  esac
  # RUSTFLAGS apply to the target's artifacts only (build scripts stay dynamic) because
  # --target is given.
  env "${env_extra[@]}" RUSTFLAGS="-C target-feature=+crt-static" \
    "$cargo" build --quiet "${FLAGS[@]}" --locked "${SELECT[@]}" \
    --target "$triple" --target-dir "$target_dir"
  cp "$target_dir/$triple/$PROFILE/ovlaunch-rank" "$OUT/ovlaunch-rank-$arch.tmp"
  mv "$OUT/ovlaunch-rank-$arch.tmp" "$OUT/ovlaunch-rank-$arch"
  echo "$OUT/ovlaunch-rank-$arch"
done

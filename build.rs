//! A release build also builds the rank runtime as a static binary for this machine's
//! architecture and puts it next to the launcher (`target/release/ovlaunch-rank-ARCH`, where
//! `backend::rankbin` looks first), so a plain `cargo build --release` gives a rank runtime
//! that runs in any container image (the same build as `scripts/build-rank-runtime.sh`,
//! which also cross-builds other architectures). `OVLAUNCH_STATIC_RANK=0` skips it. (The
//! shipped data is embedded by the core's own build script, `crates/ovlaunch-core/build.rs`.)

use std::path::{Path, PathBuf};

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    static_rank_runtime(&out);
}

/// Builds `ovlaunch-rank` with `+crt-static` for the host (release builds only) in its own
/// target directory and copies it to `target/release/ovlaunch-rank-ARCH`. A failure is a
/// warning: the launcher still builds, and says what to do when a job needs the binary.
fn static_rank_runtime(out: &Path) {
    println!("cargo:rerun-if-changed=crates/ovlaunch-rank");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-env-changed=OVLAUNCH_STATIC_RANK");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    if env("PROFILE") != "release" || env("OVLAUNCH_STATIC_RANK") == "0" {
        return;
    }
    let (target, host) = (env("TARGET"), env("HOST"));
    let arch = target.split('-').next().unwrap_or("").to_string();
    if target != host
        || !target.ends_with("-unknown-linux-gnu")
        || !["x86_64", "aarch64"].contains(&arch.as_str())
    {
        return;
    }
    // OUT_DIR is TARGET_DIR/release/build/ovlaunch-HASH/out.
    let Some(profile_dir) = out.ancestors().nth(3).filter(|d| d.ends_with("release")) else {
        return;
    };
    let Some(target_root) = profile_dir.parent() else {
        return;
    };
    let build_dir = target_root.join("rank-runtime-build");
    let manifest = Path::new(&env("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let status = std::process::Command::new(env("CARGO"))
        .args(["build", "--release", "--locked", "--offline", "--quiet"])
        .args([
            "-p",
            "ovlaunch-rank",
            "--bin",
            "ovlaunch-rank",
            "--target",
            &target,
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&build_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+crt-static")
        .status();
    let built = build_dir
        .join(&target)
        .join("release")
        .join("ovlaunch-rank");
    match status {
        Ok(s) if s.success() && built.is_file() => {
            let dest = profile_dir.join(format!("ovlaunch-rank-{arch}"));
            let tmp = profile_dir.join(format!(".ovlaunch-rank-{arch}.tmp"));
            if let Err(e) = std::fs::copy(&built, &tmp).and_then(|_| std::fs::rename(&tmp, &dest)) {
                println!(
                    "cargo:warning=cannot copy the static rank runtime to {}: {e}",
                    dest.display()
                );
            }
        }
        Ok(s) => println!(
            "cargo:warning=the static rank runtime did not build ({s}); scripts/build-rank-runtime.sh builds it"
        ),
        Err(e) => println!(
            "cargo:warning=cannot run cargo for the static rank runtime ({e}); scripts/build-rank-runtime.sh builds it"
        ),
    }
}

//! The rank runtime binary a job uses: found, checked against the nodes' CPU architecture,
//! and copied into the job directory so that a rebuild never swaps it under a queued job and
//! a container that mounts the job directory can run it.
//!
//! Contract:
//! - [`inspect`] reads an ELF header (pure, on bytes): machine and whether it asks for a
//!   program interpreter (dynamically linked) or not (static, runs in any image).
//! - [`locate`] picks the file: an explicit path, else the first of `ovlaunch-rank-ARCH` and
//!   `ovlaunch-rank` next to the running launcher, then the same two names on PATH, that is
//!   a regular file of at most [`MAX_BYTES`] built for the nodes' architecture (the others
//!   are read for their header only, never run). When none is, the refusal names each one
//!   there that is for another architecture or no Linux program at all (a Mac's own build).
//! - An explicit path (`--rank-runtime`, `OVLAUNCH_RANK_RUNTIME`, a profile's `rank_runtime`)
//!   is read as configuration is (`input::read_trusted_bytes`: a regular file of at most
//!   [`MAX_BYTES`] that no other user could have written), and copied within that bound.
//! - The one found is held to the same trust rule (`input::untrusted_at`, with
//!   `OVLAUNCH_SAFE_DIRECTORY`), and refused with the same words and fix when it fails, not
//!   passed over for the next candidate: the next one is not the binary the lookup names
//!   (what `which` shows), and a place another user can write is the user's to fix. When the
//!   one next to the launcher is refused and the launcher itself fails the rule too, the
//!   refusal says so.
//! - A binary for another architecture is refused (exit 2) before anything is written:
//!   it could only end in `Exec format error` on every rank.
//! - A dynamically linked binary is accepted with a warning when a container is used (the
//!   image's C library must be new enough).

use std::path::{Path, PathBuf};

use crate::catalog::hardware::CpuArch;
use crate::error::{Error, Result};

/// The rank runtime's file name inside a job directory, and next to the launcher.
pub const FILE: &str = crate::layout::RANK_RUNTIME;

/// What an ELF header says about a binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfInfo {
    /// `None` for a machine ovlaunch does not run on (the raw `e_machine` is in `machine`).
    pub arch: Option<CpuArch>,
    pub machine: u16,
    /// No `PT_INTERP` program header: the kernel runs it without a dynamic loader.
    pub is_static: bool,
}

/// ELF `e_machine` values (System V ABI, and the x86-64 / AArch64 supplements).
const EM_X86_64: u16 = 62;
const EM_AARCH64: u16 = 183;
/// Program header type of the interpreter request (the dynamic loader's path).
const PT_INTERP: u32 = 3;

/// The first four bytes of a macOS program: Mach-O, 64- and 32-bit as written on a
/// little-endian Mac, and a universal ("fat") binary (`<mach-o/loader.h>`, `<mach-o/fat.h>`).
const MACH_O_MAGICS: [[u8; 4]; 3] = [
    [0xcf, 0xfa, 0xed, 0xfe],
    [0xce, 0xfa, 0xed, 0xfe],
    [0xca, 0xfe, 0xba, 0xbe],
];

/// What [`inspect`] says of a macOS program.
const MACH_O: &str = "a macOS (Mach-O) program, not a Linux one";

/// Parses a 64-bit little-endian ELF file's header and program headers.
pub fn inspect(bytes: &[u8]) -> std::result::Result<ElfInfo, String> {
    if bytes.len() >= 4 && MACH_O_MAGICS.iter().any(|m| bytes[..4] == m[..]) {
        // What `cargo build` on a Mac puts next to the launcher: ranks run on Linux.
        return Err(MACH_O.into());
    }
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF executable".into());
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err("not a 64-bit little-endian ELF file".into());
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap_or([0; 8]));
    let machine = u16_at(18);
    let phoff = usize::try_from(u64_at(32)).map_err(|_| "bad program header offset")?;
    let phentsize = usize::from(u16_at(54));
    let phnum = usize::from(u16_at(56));
    let mut is_static = true;
    for i in 0..phnum {
        let at = phoff
            .checked_add(i.checked_mul(phentsize).ok_or("bad program header size")?)
            .ok_or("bad program header offset")?;
        if at.checked_add(4).is_none_or(|end| end > bytes.len()) {
            return Err("truncated program headers".into());
        }
        if u32_at(at) == PT_INTERP {
            is_static = false;
        }
    }
    let arch = match machine {
        EM_X86_64 => Some(CpuArch::X86_64),
        EM_AARCH64 => Some(CpuArch::Aarch64),
        _ => None,
    };
    Ok(ElfInfo {
        arch,
        machine,
        is_static,
    })
}

/// A rank runtime chosen for a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub path: PathBuf,
    pub info: ElfInfo,
}

/// Where a found rank runtime was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Next to the running launcher.
    Launcher,
    /// On `PATH`.
    Path,
}

impl Place {
    /// What names the found file in a refusal, in place of the flag an explicit one has.
    fn label(self) -> &'static str {
        match self {
            Place::Launcher => "the rank runtime next to ovlaunch",
            Place::Path => "the rank runtime found on PATH",
        }
    }
}

/// Where the default search looks, in order.
fn candidates(arch: CpuArch) -> Vec<(PathBuf, Place)> {
    let mut out = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        out.push((dir.join(format!("{FILE}-{}", arch.name())), Place::Launcher));
        out.push((dir.join(FILE), Place::Launcher));
    }
    if let Ok(p) = which::which(format!("{FILE}-{}", arch.name())) {
        out.push((p, Place::Path));
    }
    if let Ok(p) = which::which(FILE) {
        out.push((p, Place::Path));
    }
    out
}

/// Holds the rank runtime found at `p` to the trust rule of configuration and code
/// (`input::untrusted_at`): its refusal names where it was found and `--rank-runtime`;
/// for one next to the launcher, whether the launcher itself fails the rule too.
fn check_found(p: &Path, place: Place) -> Result<()> {
    let label = place.label();
    let Some(mut u) = crate::input::untrusted_at(p, label)? else {
        return Ok(());
    };
    // The fix ends in copying the file and giving its path: given with the flag.
    u.fix
        .push_str(" with --rank-runtime (or a profile's rank_runtime)");
    let mut e = u.refusal(p, label);
    if place == Place::Launcher
        && let Ok(exe) = std::env::current_exe()
        && let Ok(Some(own)) = crate::input::untrusted_at(&exe, label)
    {
        let help = e.help.take().unwrap_or_default();
        e = e.help(format!(
            "{help}; ovlaunch itself is exposed the same way ({} {}): install it where only you or root can write",
            exe.display(),
            own.why
        ));
    }
    Err(e)
}

/// Finds and checks the rank runtime for nodes of `arch`. `explicit` is `--rank-runtime`
/// (or the profile's `rank_runtime`); `origin` names where it came from for messages, and
/// `nodes` the nodes ("the nodes", or where their architecture was read).
pub fn locate(explicit: Option<&Path>, origin: &str, arch: CpuArch, nodes: &str) -> Result<Chosen> {
    if let Some(p) = explicit {
        // A program every rank runs: read only when trusted, within its bound, never
        // blocking (`input::read_trusted_bytes`).
        let bytes = crate::input::read_trusted_bytes(p, origin, MAX_BYTES)?;
        let info = inspect(&bytes).map_err(|why| {
            Error::usage(format!("rank runtime {}: {why}", p.display()))
                .at_flag(origin.to_string())
                .help("give the path of an ovlaunch-rank binary (scripts/build-rank-runtime.sh builds static ones)")
        })?;
        check_arch(p, &info, origin, arch, nodes)?;
        return Ok(Chosen {
            path: p.to_path_buf(),
            info,
        });
    }
    let tried = candidates(arch);
    let mut wrong = Vec::new();
    let mut tried_mac_build = false;
    for (p, place) in &tried {
        // A file that is not there (or not readable) is passed over unnamed; one that is
        // there but no Linux program for any architecture (a Mac's own build) is named.
        let Ok(bytes) = crate::input::read_bytes(p, "--rank-runtime", MAX_BYTES) else {
            continue;
        };
        let info = match inspect(&bytes) {
            Ok(info) => info,
            Err(why) => {
                tried_mac_build |= why == MACH_O;
                wrong.push(format!("{} is {why}", p.display()));
                continue;
            }
        };
        if info.arch == Some(arch) {
            check_found(p, *place)?;
            return Ok(Chosen {
                path: p.clone(),
                info,
            });
        }
        wrong.push(format!("{} is {}", p.display(), arch_label(&info)));
    }
    let looked: Vec<String> = tried.iter().map(|(p, _)| p.display().to_string()).collect();
    let mut msg = format!(
        "no {} rank runtime found for {nodes} (looked for {})",
        arch.name(),
        if looked.is_empty() {
            format!("{FILE}-{} and {FILE}", arch.name())
        } else {
            looked.join(", ")
        }
    );
    if !wrong.is_empty() {
        msg.push_str(&format!("; {}", wrong.join("; ")));
    }
    let help = if tried_mac_build {
        // A Mac cannot link a Linux program with the script below: built where ranks run.
        format!(
            "the ranks run on Linux: build the rank runtime on a Linux machine (on the login node, `cargo build --release` writes target/release/{FILE}-{}), copy it here and pass --rank-runtime PATH (or set rank_runtime in a profile), or launch without it (--no-rank-runtime)",
            arch.name()
        )
    } else {
        format!(
            "build a static one with `scripts/build-rank-runtime.sh {}` and pass --rank-runtime PATH (or set rank_runtime in a profile), or put it next to ovlaunch as {FILE}-{}",
            arch.name(),
            arch.name()
        )
    };
    Err(Error::usage(msg).at_flag("--rank-runtime").help(help))
}

fn arch_label(info: &ElfInfo) -> String {
    match info.arch {
        Some(a) => a.name().to_string(),
        None => format!("ELF machine {}", info.machine),
    }
}

fn check_arch(p: &Path, info: &ElfInfo, origin: &str, arch: CpuArch, nodes: &str) -> Result<()> {
    if info.arch == Some(arch) {
        return Ok(());
    }
    Err(Error::usage(format!(
        "rank runtime {} is built for {}, but {nodes} are {}: every rank would fail with `Exec format error`",
        p.display(),
        arch_label(info),
        arch.name()
    ))
    .at_flag(origin.to_string())
    .help(format!(
        "build a static {} rank runtime with `scripts/build-rank-runtime.sh {}` and pass it with --rank-runtime",
        arch.name(),
        arch.name()
    )))
}

/// The largest rank runtime read and copied into a job.
pub const MAX_BYTES: u64 = crate::input::MAX_BINARY_BYTES;

/// The warning for a dynamically linked rank runtime started inside a container image.
pub fn dynamic_warning(c: &Chosen) -> Option<String> {
    (!c.info.is_static).then(|| {
        format!(
            "rank runtime {} is dynamically linked: it runs only in images whose C library is at least as new as this machine's; a static build (scripts/build-rank-runtime.sh) runs in any image",
            c.path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(machine: u16, interp: bool) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 2 * 56];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&2u16.to_le_bytes());
        b[64..68].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
        let second: u32 = if interp { PT_INTERP } else { 1 };
        b[120..124].copy_from_slice(&second.to_le_bytes());
        b
    }

    #[test]
    fn reads_machine_and_linking() {
        let i = inspect(&header(EM_AARCH64, false)).unwrap();
        assert_eq!(i.arch, Some(CpuArch::Aarch64));
        assert!(i.is_static);
        let i = inspect(&header(EM_X86_64, true)).unwrap();
        assert_eq!(i.arch, Some(CpuArch::X86_64));
        assert!(!i.is_static);
        assert_eq!(inspect(&header(40, false)).unwrap().arch, None);
    }

    #[test]
    fn rejects_non_elf_and_truncated_files() {
        assert!(inspect(b"#!/bin/sh\necho hi\n").is_err());
        let mut h = header(EM_X86_64, false);
        h.truncate(100);
        assert!(inspect(&h).unwrap_err().contains("truncated"));
    }

    #[test]
    fn the_running_test_binary_is_this_machines_arch() {
        use std::io::Read;
        // Its headers only: a test binary with debug information is larger than a rank
        // runtime may be (`MAX_BYTES`).
        let me = std::env::current_exe().unwrap();
        let mut head = Vec::new();
        std::fs::File::open(&me)
            .unwrap()
            .take(1 << 16)
            .read_to_end(&mut head)
            .unwrap();
        let info = inspect(&head).unwrap();
        assert_eq!(info.arch, Some(CpuArch::host()));
    }
}

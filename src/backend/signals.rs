//! Deferring SIGINT, SIGTERM and SIGHUP across a step that must not be cut in half
//! (writing a job directory, `sbatch` and recording its answer): while a [`Deferred`] guard
//! lives, those signals are noted instead of ending the process; the caller asks
//! [`Deferred::caught`] at safe points and decides (stop before submitting, or finish
//! recording a job that Slurm has already queued). A signal ignored when the guard is
//! installed (`nohup`'s SIGHUP, SIGINT in a script's background job) stays ignored.
//!
//! Files staged on this machine for a later step (the `--package` archive, kept from its build
//! until the job directory is uploaded) are removed when such a signal ends the process
//! between the steps that defer it: while a [`RemovedOnSignal`] guard lives, the signal removes
//! the guard's paths, then ends the process as it would have (its default action, raised
//! again). A signal this process ignores (a `nohup`'s SIGHUP) stays ignored.

use std::ffi::CString;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

static CAUGHT: AtomicI32 = AtomicI32::new(0);

extern "C" fn note(sig: nix::libc::c_int) {
    // Only an atomic store: async-signal-safe.
    CAUGHT.store(sig, Ordering::SeqCst);
}

const DEFERRED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// While alive, SIGINT/SIGTERM/SIGHUP are recorded, not acted on.
pub struct Deferred {
    previous: Vec<(Signal, SigAction)>,
}

impl Deferred {
    pub fn install() -> Self {
        CAUGHT.store(0, Ordering::SeqCst);
        let action = SigAction::new(
            SigHandler::Handler(note),
            SaFlags::SA_RESTART,
            SigSet::empty(),
        );
        let mut previous = Vec::new();
        for sig in DEFERRED {
            // SAFETY: the handler only stores into an atomic.
            if let Ok(prev) = unsafe { sigaction(sig, &action) } {
                if matches!(prev.handler(), SigHandler::SigIgn) {
                    // Ignored when ovlaunch started (`nohup`'s SIGHUP, a script's background
                    // job's SIGINT): it would not have stopped the step, so it does not now.
                    // SAFETY: restores the action that was in place.
                    let _ = unsafe { sigaction(sig, &prev) };
                } else {
                    previous.push((sig, prev));
                }
            }
        }
        Self { previous }
    }

    /// The signal that arrived since [`Deferred::install`], if any.
    pub fn caught(&self) -> Option<Signal> {
        Signal::try_from(CAUGHT.load(Ordering::SeqCst)).ok()
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        for (sig, prev) in &self.previous {
            // SAFETY: restores the action that was in place before.
            let _ = unsafe { sigaction(*sig, prev) };
        }
    }
}

/// The paths each live [`RemovedOnSignal`] guard removes, read by the handler: a slot holds a
/// list no one frees (a handler on another thread may be reading it as its guard ends).
static REMOVED: [AtomicPtr<Vec<CString>>; 8] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 8];

/// How many guards live, and the actions their handler replaced (restored by the last).
static GUARDS: Mutex<(usize, Vec<(Signal, SigAction)>)> = Mutex::new((0, Vec::new()));

extern "C" fn remove_then_end(sig: nix::libc::c_int) {
    // Only unlink, rmdir, signal and raise: async-signal-safe.
    for slot in &REMOVED {
        let p = slot.load(Ordering::SeqCst);
        if p.is_null() {
            continue;
        }
        // SAFETY: a slot's list is never freed (`REMOVED`).
        for path in unsafe { &*p } {
            // SAFETY: NUL-terminated paths; a file is unlinked, a directory (emptied by the
            // paths before it) removed.
            unsafe {
                if nix::libc::unlink(path.as_ptr()) != 0 {
                    nix::libc::rmdir(path.as_ptr());
                }
            }
        }
    }
    // SAFETY: the default action, raised again: delivered once this handler returns.
    unsafe {
        nix::libc::signal(sig, nix::libc::SIG_DFL);
        nix::libc::raise(sig);
    }
}

/// While alive, SIGINT/SIGTERM/SIGHUP that would end the process remove its paths first
/// (files, then the directory they were in: in the order given). A [`Deferred`] guard
/// installed on top of it defers them as before, and gives this one back when it ends.
pub struct RemovedOnSignal {
    slot: Option<usize>,
}

impl RemovedOnSignal {
    pub fn install(paths: &[PathBuf]) -> Self {
        use std::os::unix::ffi::OsStrExt;
        let list: Vec<CString> = paths
            .iter()
            .filter_map(|p| CString::new(p.as_os_str().as_bytes()).ok())
            .collect();
        let mut guards = GUARDS.lock().unwrap_or_else(|e| e.into_inner());
        let free = REMOVED
            .iter()
            .position(|s| s.load(Ordering::SeqCst).is_null());
        let Some(slot) = free else {
            return Self { slot: None };
        };
        REMOVED[slot].store(Box::into_raw(Box::new(list)), Ordering::SeqCst);
        if guards.0 == 0 {
            let action = SigAction::new(
                SigHandler::Handler(remove_then_end),
                SaFlags::SA_RESTART,
                SigSet::empty(),
            );
            for sig in DEFERRED {
                // SAFETY: the handler is async-signal-safe (`remove_then_end`).
                if let Ok(prev) = unsafe { sigaction(sig, &action) } {
                    if matches!(prev.handler(), SigHandler::SigDfl) {
                        guards.1.push((sig, prev));
                    } else {
                        // Ignored (or handled) before: left as it was.
                        // SAFETY: restores the action that was in place.
                        let _ = unsafe { sigaction(sig, &prev) };
                    }
                }
            }
        }
        guards.0 += 1;
        Self { slot: Some(slot) }
    }
}

impl Drop for RemovedOnSignal {
    fn drop(&mut self) {
        let Some(slot) = self.slot else { return };
        let mut guards = GUARDS.lock().unwrap_or_else(|e| e.into_inner());
        // The list is left allocated: see `REMOVED`.
        REMOVED[slot].store(std::ptr::null_mut(), Ordering::SeqCst);
        guards.0 -= 1;
        if guards.0 == 0 {
            for (sig, prev) in guards.1.drain(..) {
                // SAFETY: restores the action that was in place before the first guard.
                let _ = unsafe { sigaction(sig, &prev) };
            }
        }
    }
}

/// A signal's name without `SIG` (`USR1`): how `scancel --signal` and `cancel -o json` name it.
pub fn name(s: Signal) -> &'static str {
    s.as_str().trim_start_matches("SIG")
}

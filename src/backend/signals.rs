//! Deferring SIGINT, SIGTERM and SIGHUP across a step that must not be cut in half
//! (writing a job directory, `sbatch` and recording its answer): while a [`Deferred`] guard
//! lives, those signals are noted instead of ending the process; the caller asks
//! [`Deferred::caught`] at safe points and decides (stop before submitting, or finish
//! recording a job that Slurm has already queued).

use std::sync::atomic::{AtomicI32, Ordering};

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
                previous.push((sig, prev));
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

/// A signal's name without `SIG` (`USR1`): how `scancel --signal` and `cancel -o json` name it.
pub fn name(s: Signal) -> &'static str {
    s.as_str().trim_start_matches("SIG")
}

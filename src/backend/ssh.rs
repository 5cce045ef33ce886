//! A login node reached with the system's `ssh`: the [`Host`] behind `--host USER@LOGIN`.
//!
//! Contract:
//! - One multiplexed connection per target: `ControlMaster=auto`, `ControlPersist`, and a
//!   `ControlPath` in a private directory (mode 0700, owned by this user, not a symlink;
//!   anything else there is refused). The user's own ssh configuration and options apply
//!   (`~/.ssh/config`, agents, jump hosts); host keys are checked as ssh checks them
//!   (`BatchMode=yes`: an unknown or changed key is an error, never a prompt, and nothing
//!   here weakens `StrictHostKeyChecking`); a `RemoteCommand` there is not used (each
//!   command is ovlaunch's own). A login node that does not answer fails each
//!   command within [`CONNECT_TIMEOUT`] (ssh's `ConnectTimeout`, where the user's
//!   configuration sets none, as `ssh -G` reads it), not after the kernel's minutes of TCP
//!   retries or a command's whole time limit.
//! - Every remote command line is built with `render::shell::quote`, the one escaping path,
//!   and handed to `sh -c` as `render::shell::login_word` quotes it: a POSIX shell runs it
//!   whatever the login shell. A word `quote` would write in bash's `$'...'`
//!   (`shell::bash_only`: a control character), which that shell reads as other text, is
//!   refused, never sent ([`Host::check_text`]: every path and argument of a remote line).
//! - Every remote command prints [`BEGIN`] first, and only what follows it on stdout is its
//!   output: a login shell's start-up file that prints a greeting (`.bashrc`, which bash
//!   reads for a command sshd runs; `.cshrc`) comes before it and is left out
//!   ([`after_begin`], [`skip_begin`] for a stream).
//! - A name is present when anything stands there, a symbolic link not followed
//!   ([`Host::present`]: POSIX `test -e || test -L`, as dash has it), as `lstat` tells here.
//! - A command run in a directory (`sbatch`) records its exit code and output in that
//!   directory on the login node and ignores SIGHUP/SIGPIPE there; when the connection drops
//!   while it runs, a new connection waits for that record, so a dropped connection never
//!   loses the answer, and the command is never run twice. Only when the command is known
//!   not to have started is the outcome "not run".
//! - A job directory is written by streaming a tar archive into a hidden partial sibling
//!   on the login node that is renamed into place only when complete (`mv -T`): a connection
//!   cut mid-transfer leaves no job directory (the partial is removed; one left by a killed
//!   shell is removed by a later upload once it is an hour old). The partial is named for
//!   the upload and holds its mark (`.ovlaunch-upload-TOKEN`) until the upload is known to be
//!   in place, so a connection lost as it was moved into place is read back by a new one
//!   ([`Ssh::landed`]): a directory holding the mark is this upload's and the submission goes
//!   on with it (never written again under the next name); one whose outcome cannot be read
//!   back is `Failed::Unknown`, an error saying what may be there and what to do. A login
//!   node that fails the upload itself, the connection holding (no write permission, a full
//!   filesystem), is an error quoting its reason and pointing at the place, not the link.
//! - Before a job directory or an experiment directory is created there, its path is held to
//!   the rule `backend::trust` holds local paths to ([`Ssh::check_path`]): every directory
//!   from `/`, as given and as resolved (`realpath`), a trusted entry for the login node's
//!   user (`stat` there), the experiment directories that user's own, with ids for names;
//!   the login user's private group there is read there (`getent`, [`FACTS`]), no other
//!   group counts as private. A shell
//!   checks and then creates, so unlike the local walk through descriptors a directory
//!   swapped between the two is not caught. A file on the path, or a directory `mkdir` cannot
//!   make there, is a usage error naming the path on the login node and
//!   `--remote-jobs-root`, as the local walk's are (not a lost connection).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::host::{self, Chunk, Host, Listing, Ran, Seen, Stat};
use super::jobdir::{self, Asset, Sharing};
use super::{Sink, tail};
use crate::error::{Error, Result};
use crate::layout::JobFile;
use crate::printer::Printer;
use crate::shell::quote;

/// A login node and the control directory of its connection.
pub struct Ssh {
    target: String,
    /// A short hash of `target` for the control socket's name.
    alias: String,
    control: PathBuf,
    home: OnceLock<String>,
    ids: OnceLock<(u32, u32)>,
    /// The login user's private group there ([`FACTS`]), once read.
    private: OnceLock<Option<u32>>,
    /// `-o ConnectTimeout=...` where the user's configuration sets none.
    connect: Option<String>,
    /// Set once the note that the login node has no `getfacl` is printed.
    no_getfacl_noted: OnceLock<()>,
}

/// The fix for a directory on the login node that cannot be created there.
const NOT_CREATABLE: &str = "give a directory on the login node that you can create and write (--remote-jobs-root, or --job-dir)";

/// How long a connection stays open after the last command (seconds).
const PERSIST: &str = "ControlPersist=600";
/// How long ssh waits for the login node to answer a new connection (seconds), where the
/// user's ssh configuration says nothing (ssh's own default waits as long as TCP does).
const CONNECT_TIMEOUT: u32 = 20;
/// ssh's own exit status for "the connection failed or was lost".
const SSH_FAILED: i32 = 255;
/// An upload larger than this prints its progress on stderr.
const PROGRESS_FROM: u64 = 32 << 20;

/// Checks a `--host` value: `[USER@]HOST` or `ssh://[USER@]HOST[:PORT]` (ssh's own forms;
/// a `Host` alias of `~/.ssh/config` is a HOST).
pub fn check_target(target: &str) -> std::result::Result<(), String> {
    let rest = target.strip_prefix("ssh://").unwrap_or(target);
    let ok = !rest.is_empty()
        && !rest.starts_with(['-', '@', ':'])
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "@._-:[]".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not an ssh destination: give USER@LOGIN, a Host alias from ~/.ssh/config, or ssh://USER@LOGIN:PORT",
            target.escape_debug()
        ))
    }
}

impl Ssh {
    pub fn new(target: &str) -> Result<Ssh> {
        check_target(target).map_err(|m| Error::usage(m).at_flag("--host"))?;
        let alias = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            target.hash(&mut h);
            format!("{:016x}", h.finish())
        };
        let control = control_dir()?;
        clear_stale(&control.join(&alias));
        Ok(Ssh {
            target: target.to_string(),
            alias,
            control,
            home: OnceLock::new(),
            ids: OnceLock::new(),
            private: OnceLock::new(),
            connect: connect_option(target),
            no_getfacl_noted: OnceLock::new(),
        })
    }

    /// `ssh` with the connection-sharing options, the target and one remote command line.
    fn ssh(&self, remote: &str) -> Command {
        let mut c = Command::new("ssh");
        c.args([
            "-o",
            "ControlMaster=auto",
            "-o",
            // One socket per destination as given (two aliases of one endpoint keep their
            // own options, known_hosts included); a short name, since ssh adds a 17-byte
            // suffix while creating it and a socket path holds at most `SOCKET_PATH_MAX` bytes.
            &format!("ControlPath={}/{}", self.control.display(), self.alias),
            "-o",
            PERSIST,
            "-o",
            "BatchMode=yes",
            "-o",
            "ServerAliveInterval=15",
            // Every command is ovlaunch's own: a `RemoteCommand` of the user's Host entry (a
            // shell or tmux for interactive logins) would make ssh refuse both.
            "-o",
            "RemoteCommand=none",
        ]);
        if let Some(o) = &self.connect {
            c.args(["-o", o]);
        }
        c.args([
            "-T",
            "--",
            &self.target,
            &remote_line(&format!("printf '%s\\n' {BEGIN}; {remote}")),
        ]);
        c
    }

    /// Runs one remote shell command line, capturing its output, within `limit`.
    fn sh(&self, remote: &str, limit: Duration) -> Result<std::process::Output> {
        let cmd = duct::cmd("ssh", self.ssh(remote).get_args())
            .stdin_null()
            .stdout_capture()
            .stderr_capture()
            .unchecked();
        host::wait(
            cmd,
            &format!("ssh {}", self.target),
            limit,
            &self.no_answer(),
        )
        .map(after_begin)
    }

    /// The fix for a command that did not finish within its time limit there.
    fn no_answer(&self) -> String {
        format!(
            "the connection to the login node hung: check that `ssh {t} true` answers; if it does, a command there is stuck (for Slurm's tools, `ssh {t} scontrol ping` tells whether slurmctld is up)",
            t = self.target
        )
    }

    /// [`Ssh::sh`], with a lost connection as an error.
    fn sh_ok(&self, remote: &str, limit: Duration) -> Result<std::process::Output> {
        let out = self.sh(remote, limit)?;
        if out.status.code() == Some(SSH_FAILED) {
            return Err(self.lost(&out.stderr));
        }
        Ok(out)
    }

    fn lost(&self, stderr: &[u8]) -> Error {
        let why = String::from_utf8_lossy(stderr);
        Error::runtime(format!(
            "ssh {} failed: {}",
            self.target,
            why.trim().lines().last().unwrap_or("no message")
        ))
        .help(format!(
            "check that `ssh {} true` answers without a prompt: the login node reachable from here (its name, the network, a VPN), key authentication, and its host key in known_hosts",
            self.target
        ))
    }

    /// Holds `dir` on the login node to the rule local paths are held to (`backend::trust`):
    /// every directory from `/` to it, as given and as resolved, must be a trusted entry for
    /// the login node's user (with `sharing`), and its last `own` components, where they
    /// exist, that user's own and no symbolic link. Missing directories are left to the
    /// caller to create. A refusal is a usage error naming the directory, why and a fix.
    fn check_path(&self, dir: &Path, own: usize, sharing: Sharing, what: &str) -> Result<()> {
        let d = sh_text(dir)?;
        if !dir.is_absolute() {
            // the walk counts components from `/` (`Host::absolute` makes every remote path so)
            return Err(Error::runtime(format!(
                "internal error: {d} on {} is not absolute",
                self.target
            )));
        }
        let out = self.sh_ok(&walk_command(d), Duration::from_secs(60))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let (Some(walk), true) = (Walk::read(&text), out.status.success()) else {
            return Err(Error::runtime(format!(
                "cannot check the path {d} on {}: {}",
                self.target,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        };
        if walk.no_getfacl && self.no_getfacl_noted.set(()).is_ok() {
            Printer::new().note(&format!(
                "{} has no getfacl: directories there that their group can write are checked by their mode, not their ACL (a POSIX ACL's grant to another user is not seen)",
                self.target
            ));
        }
        // A file where a directory is needed: nothing can be created under it (the local
        // walk's `ENOTDIR`).
        if let Some(path) = walk.not_a_directory() {
            return Err(Error::usage(format!(
                "{what}: {path} on {} is not a directory",
                self.target
            ))
            .help(NOT_CREATABLE));
        }
        let depth = dir.components().count().saturating_sub(1);
        match walk.problem(depth, own, sharing) {
            Some((path, why, on_path)) => Err(Error::usage(format!(
                "{what}: {path} on {} {}; ovlaunch does not use what another user could have written or could replace",
                self.target,
                why.why(crate::input::writers::Names::Ids)
            ))
            .help(super::trust::fix(why, path, on_path))),
            None => Ok(()),
        }
    }

    fn home(&self) -> Result<&str> {
        if let Some(h) = self.home.get() {
            return Ok(h);
        }
        let out = self.sh_ok("printf %s \"$HOME\"", Duration::from_secs(60))?;
        let h = String::from_utf8_lossy(&out.stdout).into_owned();
        if !h.starts_with('/') {
            return Err(Error::runtime(format!(
                "the login directory on {} is not an absolute path: `{h}`",
                self.target
            )));
        }
        Ok(self.home.get_or_init(|| h))
    }

    /// The run-in-a-directory wrapper: records `.ovlaunch-run-TOKEN.{started,out,err,rc}`.
    fn recorded(dir: &str, token: &str, command: &str) -> String {
        let m = quote(&format!(".ovlaunch-run-{token}"));
        format!(
            "cd -- {dir} || exit 97; trap '' HUP PIPE; : > {m}.started; {command} > {m}.out 2> {m}.err < /dev/null; echo $? > {m}.rct && mv -f {m}.rct {m}.rc; cat {m}.out; cat {m}.err >&2; exit \"$(cat {m}.rc)\"",
            dir = quote(dir),
        )
    }

    /// After a lost connection: waits (within `limit`) for the outcome the wrapper records.
    fn outcome(&self, dir: &str, token: &str, limit: Duration) -> Result<Ran> {
        let m = quote(&format!(".ovlaunch-run-{token}"));
        let ask = format!(
            "cd -- {} 2>/dev/null || exit 93; [ -e {m}.started ] || exit 94; [ -e {m}.rc ] || exit 95; cat {m}.out; cat {m}.err >&2; exit \"$(cat {m}.rc)\"",
            quote(dir)
        );
        clear_stale(&self.control.join(&self.alias));
        let start = Instant::now();
        let mut not_started_since: Option<Instant> = None;
        let mut last_err = String::new();
        while start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(500));
            let Ok(out) = self.sh(&ask, Duration::from_secs(30)) else {
                continue;
            };
            match out.status.code() {
                Some(SSH_FAILED) => last_err = String::from_utf8_lossy(&out.stderr).into_owned(),
                Some(93) => {
                    return Err(Error::runtime(format!("{dir} vanished on {}", self.target)));
                }
                // The command line may still be on its way to the shell: "not started" only
                // counts once it has held for two seconds.
                Some(94) => {
                    let since = *not_started_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_secs(2) {
                        return Ok(Ran {
                            ok: false,
                            signalled: false,
                            stdout: String::new(),
                            stderr: format!(
                                "the connection to {} was lost before the command started",
                                self.target
                            ),
                        });
                    }
                }
                Some(95) => {}
                code => {
                    return Ok(Ran {
                        ok: code == Some(0),
                        signalled: false,
                        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                    });
                }
            }
        }
        // Whether it ran is unknown: the caller reconciles (the Slurm backend asks squeue).
        Ok(Ran {
            ok: false,
            signalled: true,
            stdout: String::new(),
            stderr: format!(
                "the connection to {} was lost and its outcome could not be read back: {}",
                self.target,
                last_err.trim()
            ),
        })
    }

    /// Streams the tar archive of `local` (a complete job directory here) into `dir` there.
    /// The archive goes into a hidden partial sibling named for this upload (`token`), which
    /// gets this upload's mark (`.ovlaunch-upload-TOKEN`) and is then renamed into place; the
    /// mark is removed once the upload is known to be in place. A connection lost on the way
    /// is read back ([`Ssh::landed`]): the directory this upload put in place is its own, one
    /// it did not is not, and one it cannot tell is [`Failed::Unknown`].
    fn upload(
        &self,
        local: &Path,
        dir: &Path,
        recorded: bool,
    ) -> std::result::Result<(), super::Failed> {
        let d = sh_text(dir)?;
        let parent = sh_text(dir.parent().unwrap_or(Path::new("/")))?;
        let token = token();
        let script = upload_script(d, parent, &token);
        let total = tree_size(local);
        let mut tar = host::tar()
            .args(["-C"])
            .arg(local)
            .args(["-cf", "-", "."])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot run tar: {e}")))?;
        let mut ssh = self
            .ssh(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot run ssh: {e}")))?;
        let mut from = tar.stdout.take().expect("piped");
        let mut to = ssh.stdin.take().expect("piped");
        let mut buf = vec![0u8; 1 << 16];
        let (mut sent, mut shown) = (0u64, 0u64);
        let show = total >= PROGRESS_FROM;
        let copied = loop {
            let n = match from.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) => break Err(e),
            };
            if let Err(e) = to.write_all(&buf[..n]) {
                break Err(e);
            }
            sent += n as u64;
            if show && (sent - shown >= total / 10 || sent == total) {
                shown = sent;
                Printer::new().status(&format!(
                    "uploading the job directory to {}: {} of {} MiB",
                    self.target,
                    sent >> 20,
                    total.max(sent) >> 20
                ));
            }
        };
        drop(to);
        // tar may still be writing (the connection was cut): it must not wait on a pipe
        // nobody reads.
        drop(from);
        if copied.is_err() {
            let _ = tar.kill();
        }
        let tar_ok = tar.wait().map(|s| s.success()).unwrap_or(false);
        let mut err = String::new();
        if let Some(mut e) = ssh.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let status = ssh
            .wait()
            .map_err(|e| Error::runtime(format!("ssh failed: {e}")))?;
        let mark_path = format!("{d}/{}", mark(&token));
        match status.code() {
            Some(0) if tar_ok && copied.is_ok() => {
                // In place: the mark has done its work (one left by a lost connection is
                // harmless).
                let _ = self.sh(
                    &format!("rm -f -- {}", quote(&mark_path)),
                    Duration::from_secs(60),
                );
                Ok(())
            }
            // In place, but this machine's tar failed: what arrived may be short of the job.
            Some(0) => {
                self.remove_tree(dir);
                Err(Error::runtime(format!(
                    "the job directory could not be archived here for {}: nothing was submitted and no job directory was left there",
                    self.target
                ))
                .help("check that the files given to the job (--package, the rank runtime) are readable")
                .into())
            }
            Some(17) => Err(Error::usage(format!(
                "job directory {d} already exists on {}",
                self.target
            ))
            .at_flag("--job-dir")
            .help("choose another --job-name or --job-dir, or remove the old directory")
            .into()),
            // The job directory's parent cannot be made there: the path, not the connection.
            Some(18) => Err(Error::usage(format!(
                "cannot create {parent} on {}: {}",
                self.target,
                err.trim().lines().last().unwrap_or("mkdir failed")
            ))
            .help(NOT_CREATABLE)
            .into()),
            // The login node's own failure (its partial directory could not be made or
            // filled there), the connection holding: this machine's archive was read to its
            // end, or the login node stopped reading it.
            Some(1) if copied.is_err() || tar_ok => Err(self.not_written(d, parent, &err).into()),
            code => {
                let last = err.trim().lines().last();
                let why = last.unwrap_or("the connection was cut").to_string();
                let lost = last.map(|l| format!(" ({l})")).unwrap_or_default();
                // A failure there removed the partial; a lost connection is read back.
                let landed = match code {
                    Some(1) => Landed::No,
                    _ => self.landed(d, parent, &token, Duration::from_secs(30)),
                };
                match landed {
                    Landed::Yes => {
                        Printer::new().note(&format!(
                            "the connection to {} was lost{lost} once the job directory {d} was in place there; it is this command's, and it goes on with it",
                            self.target
                        ));
                        Ok(())
                    }
                    Landed::No => Err(Error::runtime(format!(
                        "the upload of the job directory to {} failed ({why}): nothing was submitted and no job directory was left there",
                        self.target,
                    ))
                    .help("submit again once `ssh` to the login node works")
                    .into()),
                    Landed::Unknown(last) => Err(super::Failed::Unknown(
                        self.not_known(d, recorded, &lost, &last),
                    )),
                }
            }
        }
    }

    /// The error of an upload the login node failed, the connection holding (exit 1 of
    /// [`upload_script`]: the partial directory under `p` could not be made or filled there,
    /// e.g. no write permission, a full filesystem or quota): the last of its words that says
    /// why (tar's summary line says nothing of it), and what to check there.
    fn not_written(&self, d: &str, p: &str, err: &str) -> Error {
        let why = err
            .lines()
            .map(str::trim)
            .rfind(|l| {
                !l.is_empty() && !l.ends_with("Exiting with failure status due to previous errors")
            })
            .unwrap_or("no message");
        Error::runtime(format!(
            "{} could not write the job directory {d}: {why}; nothing was submitted and no job directory was left there",
            self.target
        ))
        .help(format!(
            "check that you can write to {p} there and that its filesystem has space and quota left (`ssh {} df -h {}`), or give another --remote-jobs-root",
            self.target,
            quote(p)
        ))
    }

    /// After a connection lost during an upload (`token`, of `d` under `p`): whether the
    /// directory at `d` there is the one this upload put in place. Its partial directory still
    /// there means the login node is still at it (or its shell was killed): asked again
    /// within `limit`. Once it is gone, the directory at `d` is this upload's when it is a
    /// directory of the login user holding this upload's mark (which is removed then); else
    /// nothing of this upload is there, once that has held for two seconds (the command may
    /// still have been on its way to the shell).
    fn landed(&self, d: &str, p: &str, token: &str, limit: Duration) -> Landed {
        let ask = landed_script(d, p, token);
        clear_stale(&self.control.join(&self.alias));
        let start = Instant::now();
        let mut absent_since: Option<Instant> = None;
        let mut last = String::from("no answer");
        while start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(500));
            let out = match self.sh(&ask, Duration::from_secs(30)) {
                Ok(out) => out,
                Err(e) => {
                    last = e.message;
                    continue;
                }
            };
            match out.status.code() {
                Some(0) => return Landed::Yes,
                Some(94) => {
                    let since = *absent_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_secs(2) {
                        return Landed::No;
                    }
                }
                Some(95) => {
                    absent_since = None;
                    last = format!("its partial directory {} is still there", partial(p, token));
                }
                _ => {
                    absent_since = None;
                    last = String::from_utf8_lossy(&out.stderr).trim().to_string();
                }
            }
        }
        Landed::Unknown(last)
    }

    /// The error of an upload whose outcome is unknown ([`Landed::Unknown`]): what may be at
    /// `d` there and what to do either way (`recorded`: the directory holds a submission
    /// record, which says `submitting` and keeps `ovlaunch submit DIR` from taking it).
    fn not_known(&self, d: &str, recorded: bool, lost: &str, last: &str) -> Error {
        let t = &self.target;
        let there = if recorded {
            format!(
                "it holds this job and a record saying `submitting`, and nothing was queued: remove it (`ssh {t} rm -r -- {}`) and run this command again",
                quote(d)
            )
        } else {
            format!(
                "it is this job as rendered: `ovlaunch submit {}` on the login node submits it",
                quote(d)
            )
        };
        Error::runtime(format!(
            "the connection to {t} was lost{lost} while the job directory {d} was being moved into place there, and whether it is there could not be read back ({last}); nothing was submitted"
        ))
        .help(format!(
            "once `ssh {t}` works, look: if {d} is there, {there}; if it is not, run this command again"
        ))
    }
}

/// What a connection lost during an upload left ([`Ssh::landed`]).
enum Landed {
    /// The directory at the path is this upload's.
    Yes,
    /// Nothing of this upload is there.
    No,
    /// Not known; the last answer (or why none came).
    Unknown(String),
}

/// A name no other command of this user on any machine takes at the same moment: this
/// process and the clock's nanoseconds (the ssh run wrapper's records, the upload's partial
/// directory and mark).
fn token() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// The remote half of [`Ssh::upload`] `token` of job directory `d` (parent `p`): exit 17 when
/// anything is at `d`, 18 when `p` cannot be made, 0 once the archive on stdin is in place
/// there with the upload's mark, 1 (its partial removed) when it is not. HUP and PIPE are
/// ignored, so a lost connection does not stop it half-way.
fn upload_script(d: &str, p: &str, token: &str) -> String {
    format!(
        "trap '' HUP PIPE; umask 077; d={}; p={}; t={}; m={}; if {there}; then exit 17; fi; mkdir -p -- \"$p\" || exit 18; mkdir -- \"$t\" || exit 1; find \"$p\" -maxdepth 1 -name '.ovlaunch-partial-*' -mmin +60 -exec rm -rf {{}} + 2>/dev/null; if tar -x -p --no-same-owner -f - -C \"$t\" && : > \"$t/$m\" && mv -T -- \"$t\" \"$d\"; then exit 0; fi; rm -rf -- \"$t\"; exit 1",
        quote(d),
        quote(p),
        quote(&partial(p, token)),
        quote(&mark(token)),
        there = present("d"),
    )
}

/// The remote half of [`Ssh::landed`]: exit 95 while upload `token`'s partial directory is
/// there; then 0 when `d` is a directory of the login user holding the upload's mark (the
/// mark removed), else 94.
fn landed_script(d: &str, p: &str, token: &str) -> String {
    format!(
        "d={}; t={}; m={}; if {partial}; then exit 95; fi; if [ -d \"$d\" ] && [ ! -L \"$d\" ] && [ -f \"$d/$m\" ] && [ ! -L \"$d/$m\" ] && [ \"$(stat -c %u -- \"$d\")\" = \"$(id -u)\" ]; then rm -f -- \"$d/$m\"; exit 0; fi; exit 94",
        quote(d),
        quote(&partial(p, token)),
        quote(&mark(token)),
        partial = present("t"),
    )
}

/// The partial directory of upload `token` under the jobs root `p` ([`Ssh::upload`]).
fn partial(p: &str, token: &str) -> String {
    format!("{}/.ovlaunch-partial-{token}", p.trim_end_matches('/'))
}

/// The mark upload `token` leaves in its directory until it is known to be in place.
fn mark(token: &str) -> String {
    format!(".ovlaunch-upload-{token}")
}

impl Ssh {
    /// Runs `body` with the shell function `one DIR`, which prints DIR's owner, group and mode and
    /// the files `names` in it (base64, at most [`host::SMALL_FILE`] bytes each), and reads
    /// the answer back as [`Listing`]s.
    fn listing(&self, body: &str, names: &[&str]) -> Result<Vec<Listing>> {
        let names: Vec<String> = names.iter().map(|n| quote(n)).collect();
        let line = format!(
            "one() {{ d=$1; if [ -L \"$d\" ] || [ ! -d \"$d\" ]; then return 0; fi; \
             printf 'D %s ' \"$(stat -c '%u %g %a' -- \"$d\")\"; printf %s \"$d\" | base64 -w0; echo; \
             for n in {names}; do p=$d/$n; \
               if [ -L \"$p\" ]; then echo \"L $n\"; \
               elif [ -f \"$p\" ]; then printf 'F %s %s ' \"$n\" \"$(stat -c '%u %g %a' -- \"$p\")\"; head -c {limit} -- \"$p\" | base64 -w0; echo; \
               elif [ -e \"$p\" ]; then echo \"S $n\"; fi; \
             done; }}; {body}",
            names = names.join(" "),
            limit = host::SMALL_FILE,
        );
        let out = self.sh_ok(&line, Duration::from_secs(120))?;
        if !out.status.success() {
            return Err(Error::runtime(format!(
                "cannot read the job directories on {}: {}",
                self.target,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        parse_listing(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| {
            Error::runtime(format!(
                "cannot read the job directories on {}: an answer that is not a listing",
                self.target
            ))
        })
    }
}

/// The answer of [`Ssh::listing`]: `D UID GID MODE PATH64`, then `F NAME UID GID MODE BYTES64`,
/// `L NAME` or `S NAME` per file.
fn parse_listing(text: &str) -> Option<Vec<Listing>> {
    let mut out: Vec<Listing> = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let w: Vec<&str> = line.split(' ').collect();
        let id = |s: &str| s.parse::<u32>().ok();
        let mode = |s: &str| u32::from_str_radix(s, 8).ok();
        match w[..] {
            ["D", uid, gid, m, path] => out.push(Listing {
                dir: PathBuf::from(String::from_utf8(base64(path)?).ok()?),
                uid: id(uid)?,
                gid: id(gid)?,
                mode: mode(m)?,
                files: Vec::new(),
            }),
            ["F", name, uid, gid, m, bytes] => {
                out.last_mut()?.files.push((
                    name.to_string(),
                    Seen::File {
                        uid: id(uid)?,
                        gid: id(gid)?,
                        mode: mode(m)?,
                        bytes: base64(bytes)?,
                    },
                ));
            }
            ["F", name, uid, gid, m] => out.last_mut()?.files.push((
                name.to_string(),
                Seen::File {
                    uid: id(uid)?,
                    gid: id(gid)?,
                    mode: mode(m)?,
                    bytes: Vec::new(),
                },
            )),
            ["L", name] => out.last_mut()?.files.push((name.to_string(), Seen::Link)),
            ["S", name] => out
                .last_mut()?
                .files
                .push((name.to_string(), Seen::Special)),
            _ => return None,
        }
    }
    Some(out)
}

/// Decodes standard base64 (what `base64 -w0` prints); `None` for anything else.
fn base64(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let body = text.trim_end_matches('=');
    if !text.len().is_multiple_of(4) || text.len() - body.len() > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for group in body.as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, c) in group.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..group.len()]);
    }
    Some(out)
}

impl Host for Ssh {
    fn remote(&self) -> Option<&str> {
        Some(&self.target)
    }

    fn has_tool(&self, program: &str) -> bool {
        let line = format!("command -v {} >/dev/null 2>&1", quote(program));
        match self.sh(&line, Duration::from_secs(60)) {
            // A lost connection is reported by the command that follows.
            Ok(out) => out.status.success() || out.status.code() == Some(SSH_FAILED),
            Err(_) => true,
        }
    }

    fn run(
        &self,
        program: &str,
        args: &[&str],
        dir: Option<&Path>,
        limit: Duration,
    ) -> Result<Ran> {
        let mut words = Vec::with_capacity(args.len() + 1);
        for w in std::iter::once(&program).chain(args) {
            check_text(&format!("`{program}`'s argument"), w)?;
            words.push(quote(w));
        }
        let command = words.join(" ");
        let Some(dir) = dir else {
            let out = self.sh_ok(&command, limit)?;
            return Ok(ran(&out));
        };
        let dir = sh_text(dir)?;
        let token = token();
        let cmd = duct::cmd(
            "ssh",
            self.ssh(&Self::recorded(dir, &token, &command)).get_args(),
        )
        .stdin_null()
        .stdout_capture()
        .stderr_capture()
        .unchecked();
        let out = host::wait(
            host::in_own_group(cmd),
            &format!("ssh {}", self.target),
            limit,
            &self.no_answer(),
        )
        .map(after_begin);
        match out {
            Ok(out) if out.status.code() != Some(SSH_FAILED) => Ok(ran(&out)),
            Ok(out) => {
                Printer::new().note(&format!(
                    "the connection to {} was lost while `{program}` ran ({}); reconnecting to read its outcome",
                    self.target,
                    String::from_utf8_lossy(&out.stderr)
                        .trim()
                        .lines()
                        .last()
                        .unwrap_or("")
                ));
                self.outcome(dir, &token, limit)
            }
            Err(e) => Err(e),
        }
    }

    fn write_tree(
        &self,
        dir: &Path,
        files: &[JobFile<'_>],
        assets: &[Asset],
        sharing: Sharing,
    ) -> std::result::Result<(), super::Failed> {
        let parent = dir.parent().unwrap_or(Path::new("/"));
        self.check_path(
            parent,
            0,
            sharing,
            &format!("the job directory {}", dir.display()),
        )?;
        // Written here first with the exact modes, then streamed as one archive.
        let stage = super::jobdir::private_temp_dir("upload")?;
        let local = stage.join("job");
        let recorded = files.iter().any(|f| f.name == crate::layout::SUBMISSION);
        let result = jobdir::create_with(&local, files, assets, Sharing::Private)
            .map_err(super::Failed::from)
            .and_then(|()| self.upload(&local, dir, recorded));
        let _ = std::fs::remove_dir_all(&stage);
        result
    }

    fn write_file(&self, dir: &Path, name: &str, contents: &str) -> Result<()> {
        let d = sh_text(dir)?;
        let line = format!(
            "cd -- {} && umask 022 && cat > {tmp} && mv -f -- {tmp} {}",
            quote(d),
            quote(name),
            tmp = quote(&format!(".{name}.tmp"))
        );
        let mut child = self
            .ssh(&line)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot run ssh: {e}")))?;
        let wrote = child
            .stdin
            .take()
            .expect("piped")
            .write_all(contents.as_bytes());
        let out = child
            .wait_with_output()
            .map_err(|e| Error::runtime(format!("ssh failed: {e}")))?;
        if wrote.is_err() || !out.status.success() {
            return Err(Error::runtime(format!(
                "cannot write {d}/{name} on {}: {}",
                self.target,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    fn make_dir(&self, base: &Path, own: &[&str], sharing: Sharing, what: &str) -> Result<()> {
        let dir = own.iter().fold(base.to_path_buf(), |d, o| d.join(o));
        self.check_path(&dir, own.len(), sharing, what)?;
        let d = sh_text(&dir)?;
        let out = self.sh_ok(
            &format!("umask 077 && mkdir -p -- {}", quote(d)),
            Duration::from_secs(60),
        )?;
        if !out.status.success() {
            // The connection held (`sh_ok`): the path cannot be made there.
            return Err(Error::usage(format!(
                "{what}: cannot create {d} on {}: {}",
                self.target,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
            .help(NOT_CREATABLE));
        }
        Ok(())
    }

    fn remove_tree(&self, dir: &Path) {
        if let Ok(d) = sh_text(dir) {
            let _ = self.sh(&format!("rm -rf -- {}", quote(d)), Duration::from_secs(60));
        }
    }

    fn read_from(&self, path: &Path, offset: u64) -> Result<Option<Chunk>> {
        let p = sh_text(path)?;
        let line = format!(
            "f={}; [ -f \"$f\" ] || exit 3; wc -c < \"$f\"; tail -c +{} -- \"$f\"",
            quote(p),
            offset + 1
        );
        let out = self.sh_ok(&line, Duration::from_secs(60))?;
        match out.status.code() {
            Some(3) => return Ok(None),
            Some(0) => {}
            _ => {
                return Err(Error::runtime(format!(
                    "cannot read {p} on {}: {}",
                    self.target,
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
        }
        let nl = out.stdout.iter().position(|&b| b == b'\n').unwrap_or(0);
        let len: u64 = String::from_utf8_lossy(&out.stdout[..nl])
            .trim()
            .parse()
            .map_err(|_| {
                Error::runtime(format!("cannot read the size of {p} on {}", self.target))
            })?;
        let bytes = if len < offset {
            Vec::new()
        } else {
            out.stdout[(nl + 1).min(out.stdout.len())..].to_vec()
        };
        Ok(Some(Chunk { len, bytes }))
    }

    fn stat(&self, path: &Path) -> Result<Option<Stat>> {
        let p = sh_text(path)?;
        let out = self.sh_ok(
            &format!(
                "stat -L -c '%F|%u|%g' -- {} 2>/dev/null || exit 3",
                quote(p)
            ),
            Duration::from_secs(60),
        )?;
        if !out.status.success() {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let parts: Vec<&str> = text.trim().split('|').collect();
        let [kind, uid, gid] = parts[..] else {
            return Ok(None);
        };
        Ok(Some(Stat {
            is_dir: kind == "directory",
            is_file: kind.contains("regular"),
            uid: uid.parse().unwrap_or(u32::MAX),
            gid: gid.parse().unwrap_or(u32::MAX),
        }))
    }

    fn present(&self, path: &Path) -> Result<bool> {
        let line = format!("p={}; {}", quote(sh_text(path)?), present("p"));
        let out = self.sh_ok(&line, Duration::from_secs(60))?;
        Ok(out.status.success())
    }

    fn renamable_by_others(&self, dir: &Path) -> Option<(PathBuf, crate::input::writers::Reason)> {
        let d = sh_text(dir).ok()?;
        let out = self
            .sh_ok(&walk_command(d), Duration::from_secs(60))
            .ok()
            .filter(|o| o.status.success())?;
        let text = String::from_utf8_lossy(&out.stdout);
        let walk = Walk::read(&text)?;
        let depth = dir.components().count().saturating_sub(1);
        walk.problem(depth, 0, Sharing::Private)
            .map(|(path, why, _)| (PathBuf::from(path), why))
    }

    fn check_job_path(&self, key: &Path) -> Result<()> {
        let k = sh_text(key)?;
        let out = self.sh_ok(
            &format!("set -- {}; {LINKS}", quote(k)),
            Duration::from_secs(60),
        )?;
        let private = |uid: u32, gid: u32| self.private_group(uid, gid);
        let text = String::from_utf8_lossy(&out.stdout);
        let Some((me, met, real)) = links_met(&text, &private).filter(|_| out.status.success())
        else {
            return Err(Error::runtime(format!(
                "cannot check the path {k} on {}: {}",
                self.target,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        };
        super::trust::job_path_refusal(
            key,
            met,
            me,
            &private,
            crate::input::writers::Names::Ids,
            real.as_deref(),
            &format!(" on {}", self.target),
        )
    }

    fn list_dir(&self, dir: &Path, names: &[&str]) -> Result<Option<Listing>> {
        let d = sh_text(dir)?;
        let out = self.listing(&format!("one {}", quote(d)), names)?;
        Ok(out.into_iter().next())
    }

    fn list_dirs(&self, root: &Path, names: &[&str]) -> Result<Vec<Listing>> {
        let r = sh_text(root)?;
        let mut out = self.listing(
            &format!("for d in {}/*; do one \"$d\"; done", quote(r)),
            names,
        )?;
        out.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(out)
    }

    fn follow(&self) -> Box<dyn tail::Follow + '_> {
        Box::new(RemoteTail {
            ssh: self,
            id: None,
            seen: tail::Progress::default(),
        })
    }

    fn fs_type(&self, path: &Path) -> Option<String> {
        let p = sh_text(path).ok()?;
        let line = format!(
            "p={}; while [ ! -e \"$p\" ]; do p=$(dirname -- \"$p\"); done; findmnt -n -o FSTYPE -T \"$p\"",
            quote(p)
        );
        let out = self.sh_ok(&line, Duration::from_secs(60)).ok()?;
        let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !t.is_empty()).then_some(t)
    }

    fn noexec(&self, path: &Path) -> Option<bool> {
        let p = sh_text(path).ok()?;
        let line = format!(
            "command -v findmnt >/dev/null 2>&1 || {{ echo nofindmnt; exit 0; }}; p={}; while [ ! -e \"$p\" ]; do p=$(dirname -- \"$p\"); done; findmnt -n -o OPTIONS -T \"$p\"",
            quote(p)
        );
        let out = self.sh_ok(&line, Duration::from_secs(60)).ok()?;
        let t = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if t == "nofindmnt" {
            Printer::new().note(&format!(
                "{} has no findmnt: whether the job directory's filesystem is mounted noexec there is not checked",
                self.target
            ));
            return None;
        }
        (out.status.success() && !t.is_empty()).then(|| t.split(',').any(|o| o == "noexec"))
    }

    fn ids(&self) -> Result<(u32, u32)> {
        if let Some(ids) = self.ids.get() {
            return Ok(*ids);
        }
        let out = self.sh_ok("id -u; id -g", Duration::from_secs(60))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text.split_whitespace().map(str::parse::<u32>);
        match (it.next(), it.next()) {
            (Some(Ok(u)), Some(Ok(g))) => Ok(*self.ids.get_or_init(|| (u, g))),
            _ => Err(Error::runtime(format!(
                "cannot read the user and group ids on {}",
                self.target
            ))),
        }
    }

    fn private_group(&self, uid: u32, gid: u32) -> bool {
        let mine = self.private.get_or_init(|| {
            self.sh_ok(FACTS, Duration::from_secs(60))
                .ok()
                .filter(|out| out.status.success())
                .and_then(|out| remote_private_group(&String::from_utf8_lossy(&out.stdout)))
        });
        self.ids().is_ok_and(|(me, _)| me == uid) && *mine == Some(gid)
    }

    /// Asks the login node for `true` at once, then every 2 s within `limit` once it did not
    /// answer (saying so, once, on stderr).
    fn reconnected(&self, limit: Duration) -> bool {
        let answers = || {
            clear_stale(&self.control.join(&self.alias));
            self.sh_ok("true", Duration::from_secs(30))
                .is_ok_and(|o| o.status.success())
        };
        if answers() {
            return false;
        }
        Printer::new().note(&format!(
            "the connection to {} was lost; trying again for up to {} s",
            self.target,
            limit.as_secs()
        ));
        let start = Instant::now();
        while start.elapsed() < limit {
            std::thread::sleep(Duration::from_secs(2));
            if answers() {
                Printer::new().note(&format!("connected to {} again", self.target));
                return true;
            }
        }
        false
    }

    /// The login node's CPU architecture (`uname -m`).
    fn machine(&self) -> Result<String> {
        let out = self.sh_ok("uname -m", Duration::from_secs(60))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn absolute(&self, p: &Path) -> Result<PathBuf> {
        if p.is_absolute() {
            return Ok(p.to_path_buf());
        }
        Ok(Path::new(self.home()?).join(p))
    }

    fn check_text(&self, what: &str, text: &str) -> Result<()> {
        check_text(what, text)
    }
}

/// A growing output file on the login node ([`Host::follow`]): each read is one command over
/// the shared connection that streams the file from the last position on, passed on in
/// [`tail::CHUNK`]-byte pieces (memory bounded whatever the file's size). The bytes just
/// before that position come first and are compared with those read there: a file
/// truncated (or truncated and written again past that point) is read again from its
/// start. A file rotated away (its inode no longer at the path) is read to its end where it
/// now is in the same directory (found by its inode), then the new one from its start. A
/// symbolic link, a FIFO or a device at the path is refused, never opened.
struct RemoteTail<'a> {
    ssh: &'a Ssh,
    /// `DEV:INO` of the file being read, once opened.
    id: Option<String>,
    seen: tail::Progress,
}

/// What one read of the remote file did.
enum Polled {
    /// Done for now; whether the file exists.
    Done(bool),
    /// The file changed under the read (rotated, rewritten): read again.
    Again,
}

impl RemoteTail<'_> {
    /// The remote side of one read: a header line, then the bytes from `from` on.
    fn script(path: &str, want: &str, from: u64) -> String {
        format!(
            "f={}; want={}; from={from}; \
             if [ -L \"$f\" ]; then echo L; exit 0; fi; \
             if [ -e \"$f\" ] && [ ! -f \"$f\" ]; then echo S; exit 0; fi; \
             now=-; if [ -e \"$f\" ]; then now=$(stat -c %d:%i -- \"$f\") || exit 1; fi; \
             if [ \"$want\" != - ] && [ \"$now\" != \"$want\" ]; then \
               old=$(find \"$(dirname -- \"$f\")\" -maxdepth 1 -type f -inum \"${{want#*:}}\" -print 2>/dev/null | head -n 1); \
               if [ -n \"$old\" ] && [ \"$(stat -c %d:%i -- \"$old\")\" = \"$want\" ]; then \
                 exec 3< \"$old\" || exit 1; echo O; tail -c +$((from + 1)) <&3; exit 0; \
               fi; echo G; exit 0; \
             fi; \
             if [ \"$now\" = - ]; then echo N; exit 0; fi; \
             exec 3< \"$f\" || exit 1; echo \"F $(stat -L -c %d:%i /dev/fd/3)\"; tail -c +$((from + 1)) <&3",
            quote(path),
            quote(want),
        )
    }

    fn poll(&mut self, path: &Path, out: Sink<'_>) -> Result<Polled> {
        let p = sh_text(path)?;
        let want = self.id.clone().unwrap_or_else(|| "-".into());
        let mut child = self
            .ssh
            .ssh(&Self::script(p, &want, self.seen.mark_start()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::runtime(format!("cannot run ssh: {e}")))?;
        let mut from =
            std::io::BufReader::with_capacity(tail::CHUNK, child.stdout.take().expect("piped"));
        let mut header = Vec::new();
        if skip_begin(&mut from) {
            let _ = std::io::BufRead::read_until(
                &mut std::io::Read::take(&mut from, 128),
                b'\n',
                &mut header,
            );
        }
        let header = String::from_utf8_lossy(&header).trim().to_string();
        let polled = match header.split_once(' ').unwrap_or((&header, "")) {
            ("L" | "S", _) => Err(Error::runtime(format!(
                "{p} on {} is not a regular file (a FIFO, a link, a device or a directory): ovlaunch reads only a plain output file",
                self.ssh.target
            ))
            .help("Slurm writes the job's output as a plain file; remove what stands at that path")),
            ("N", _) => Ok(Polled::Done(false)),
            ("G", _) => {
                // Rotated away and not in the same directory: its rest cannot be read.
                self.seen.flush(out)?;
                self.seen.reset();
                self.id = None;
                Ok(Polled::Again)
            }
            ("O", _) => {
                self.stream(&mut from, out)?;
                self.seen.flush(out)?;
                self.seen.reset();
                self.id = None;
                Ok(Polled::Again)
            }
            ("F", id) if self.id.as_deref().is_some_and(|w| w != id) => Ok(Polled::Again),
            ("F", id) => {
                self.id = Some(id.to_string());
                if self.stream(&mut from, out)? {
                    Ok(Polled::Done(true))
                } else {
                    self.seen.reset();
                    Ok(Polled::Again)
                }
            }
            _ => Ok(Polled::Done(false)),
        };
        drop(from);
        let _ = child.kill();
        let mut err = Vec::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_end(&mut err);
        }
        let status = child
            .wait()
            .map_err(|e| Error::runtime(format!("ssh failed: {e}")))?;
        if header.is_empty() {
            return Err(if status.code() == Some(SSH_FAILED) {
                self.ssh.lost(&err)
            } else {
                Error::runtime(format!(
                    "cannot read {p} on {}: {}",
                    self.ssh.target,
                    String::from_utf8_lossy(&err).trim()
                ))
            });
        }
        polled
    }

    /// Checks the mark and passes on the rest; `false` when the bytes before the position
    /// are no longer the ones read there (the file was rewritten).
    fn stream(&mut self, from: &mut impl Read, out: Sink<'_>) -> Result<bool> {
        let fail =
            |e: std::io::Error| Error::runtime(format!("reading from {}: {e}", self.ssh.target));
        let mut mark = vec![0u8; self.seen.mark.len()];
        let mut got = 0;
        while got < mark.len() {
            match from.read(&mut mark[got..]).map_err(fail)? {
                0 => return Ok(false),
                n => got += n,
            }
        }
        if mark != self.seen.mark {
            return Ok(false);
        }
        let mut buf = vec![0u8; tail::CHUNK];
        loop {
            match from.read(&mut buf).map_err(fail)? {
                0 => return Ok(true),
                n => self.seen.take(&buf[..n], out)?,
            }
        }
    }
}

impl tail::Follow for RemoteTail<'_> {
    fn read(&mut self, path: &Path, out: Sink<'_>) -> Result<bool> {
        // The old file's rest, then the new one; a rewritten file once more from its start.
        for _ in 0..4 {
            if let Polled::Done(found) = self.poll(path, out)? {
                return Ok(found);
            }
        }
        Ok(true)
    }

    fn flush(&mut self, out: Sink<'_>) -> Result<()> {
        self.seen.flush(out)
    }
}

/// `-o ConnectTimeout=`[`CONNECT_TIMEOUT`] unless the user's ssh configuration for `target`
/// sets one (`ssh -G` prints the options in force, `none` where unset, without connecting).
fn connect_option(target: &str) -> Option<String> {
    let given = Command::new("ssh")
        .args(["-G", "--", target])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("connecttimeout ").map(str::to_string))
        });
    match given.as_deref() {
        Some(t) if t != "none" => None,
        _ => Some(format!("ConnectTimeout={CONNECT_TIMEOUT}")),
    }
}

/// A master that was killed leaves its socket behind: nobody answers there, and ssh would
/// neither use it nor make a new one. Such a socket is removed.
fn clear_stale(socket: &Path) {
    if let Err(e) = std::os::unix::net::UnixStream::connect(socket)
        && e.kind() == std::io::ErrorKind::ConnectionRefused
    {
        let _ = std::fs::remove_file(socket);
    }
}

fn ran(out: &std::process::Output) -> Ran {
    Ran {
        ok: out.status.success(),
        signalled: out.status.code().is_none(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The test whether anything stands at the path in shell variable `var`, a symbolic link too,
/// not followed ([`Host::present`]): POSIX `test`, as dash has it (`-e` follows a link, `-L`
/// is the link itself).
fn present(var: &str) -> String {
    format!(r#"{{ [ -e "${var}" ] || [ -L "${var}" ]; }}"#)
}

/// The line every remote command prints first ([`Ssh::ssh`]): what the login shell printed
/// before it (its start-up files' greetings) is not the command's output.
const BEGIN: &str = "ovlaunch-remote-output-begins";

/// `out` with what its stdout held up to [`BEGIN`]'s line left out (all of it kept where that
/// line is missing: the command never ran, and ssh's own failure is in stderr).
fn after_begin(mut out: std::process::Output) -> std::process::Output {
    let line = format!("{BEGIN}\n");
    if let Some(at) = out
        .stdout
        .windows(line.len())
        .position(|w| w == line.as_bytes())
    {
        out.stdout.drain(..at + line.len());
    }
    out
}

/// Reads a remote command's stream up to and with [`BEGIN`]'s line (at most 1 MiB of what
/// the login shell printed before it); whether that line came.
fn skip_begin(from: &mut impl std::io::BufRead) -> bool {
    let mut left: u64 = 1 << 20;
    let mut line = Vec::new();
    while left > 0 {
        line.clear();
        match std::io::BufRead::read_until(&mut from.by_ref().take(left), b'\n', &mut line) {
            Ok(0) | Err(_) => return false,
            Ok(n) => left = left.saturating_sub(n as u64),
        }
        if line.ends_with(format!("{BEGIN}\n").as_bytes()) {
            return true;
        }
    }
    false
}

/// `remote` as ssh hands it to the login user's shell: one line run by `sh -c`, quoted so that
/// a login shell of either family reads it back unchanged (`shell::login_word`).
fn remote_line(remote: &str) -> String {
    format!("sh -c {}", crate::shell::login_word(remote))
}

/// [`WALK`] of the login node's path `path` (its `$1`).
fn walk_command(path: &str) -> String {
    format!("set -- {}; {WALK}", quote(path))
}

/// What decides whether the login user's primary group is private there (as
/// `input::writers::private_group` reads it on this machine): `user NAME GID`, `group ENTRY`
/// (`getent group`), and `others N`, the other users whose primary group it is (`getent
/// passwd`); a line whose lookup fails is left out, and then no group is private
/// ([`remote_private_group`]). One line, as [`WALK`].
macro_rules! facts {
    () => {
        concat!(
            r#"g=$(id -g) || exit 0; n=$(id -un) || exit 0; printf 'user %s %s\n' "$n" "$g"; "#,
            r#"e=$(getent group "$g") && printf 'group %s\n' "$e"; u=$(id -u); "#,
            r#"pw=$(getent passwd) && printf '%s\n' "$pw" | awk -F: -v g="$g" -v u="$u" '$4 == g && $3 != u { n++ } END { printf "others %d\n", n }'; "#,
            r#"exit 0"#
        )
    };
}
const FACTS: &str = facts!();

/// The shell function `acl "UID GID MODE" PATH` of [`WALK`] and [`LINKS`]: for an entry
/// whose group bits (an ACL's mask, when it has one) let write and that is no symbolic link,
/// its ACL on one line, `A ENTRIES` (`getfacl -cnE`), or `noacl` where the login node has no
/// `getfacl`.
macro_rules! acl_fn {
    () => {
        concat!(
            r#"acl() { set -- $1 "$2"; [ $(( 0x$3 & 16 )) -ne 0 ] && [ ! -L "$4" ] || return 0; "#,
            r#"command -v getfacl >/dev/null 2>&1 || { echo noacl; return 0; }; "#,
            r#"a=$(getfacl -cnE -- "$4" 2>/dev/null) && printf 'A %s\n' "$(printf '%s' "$a" | tr '\n' ' ')"; return 0; }; "#
        )
    };
}

/// The remote half of [`Ssh::check_job_path`]: the user's id, then the path `$1` resolved
/// as the kernel resolves it and as `input::links_on` walks it (each component from `/`; a
/// link's target read in its place, from `/` when absolute; `..` from where the walk really
/// is; at most 40 links; the walk stops at what does not exist): every symbolic link met,
/// `K UID GID MODE PATH64`, then the directory holding it and each one above it up to `/`,
/// `H UID GID MODE PATH64` (`stat`, MODE in hex, the path in base64), each with its ACL where
/// its group bits let write (`acl`); last `R PATH64`, the directory's own path (`realpath`).
/// One line, as [`WALK`].
const LINKS: &str = concat!(
    r#"set -f; printf 'me %s\n' "$(id -u)" || exit 1; "#,
    r#"b64() { printf '%s' "$1" | base64 -w0; }; "#,
    acl_fn!(),
    r#"at=; rest=$1; n=0; "#,
    r#"while :; do while [ "${rest#/}" != "$rest" ]; do rest=${rest#/}; done; [ -n "$rest" ] || break; "#,
    r#"part=${rest%%/*}; rest=${rest#"$part"}; "#,
    r#"case $part in .) continue;; ..) at=${at%/*}; continue;; esac; next=$at/$part; "#,
    r#"if [ -L "$next" ]; then n=$((n + 1)); [ "$n" -le 40 ] || break; "#,
    r#"s=$(stat -c '%u %g %f' -- "$next") || break; t=$(readlink -- "$next"; echo .) || break; t=${t%.}; t=${t%?}; "#,
    r#"printf 'K %s %s\n' "$s" "$(b64 "$next")"; d=$at; "#,
    r#"while :; do s=$(stat -c '%u %g %f' -- "${d:-/}") || exit 1; printf 'H %s %s\n' "$s" "$(b64 "${d:-/}")"; acl "$s" "${d:-/}"; [ -n "$d" ] || break; d=${d%/*}; done; "#,
    r#"case $t in /*) at=;; esac; rest=$t/$rest; "#,
    r#"elif [ -e "$next" ]; then at=$next; else break; fi; done; "#,
    r#"r=$(realpath -e -- "$1" 2>/dev/null) && printf 'R %s\n' "$(b64 "$r")"; exit 0"#
);

/// [`links_met`]'s answer: the login user's id, the entries met, the directory's own path.
type LinksMet = (
    u32,
    Vec<(PathBuf, crate::input::writers::Entry)>,
    Option<PathBuf>,
);

/// What [`LINKS`] printed: the login user's id, the links met and the directories holding
/// them (each once, its ACL's grant of write applied, `private` deciding private groups),
/// links first, and the directory's own path when it resolves. `None` for an answer that
/// does not start with the user's id.
fn links_met(text: &str, private: &dyn Fn(u32, u32) -> bool) -> Option<LinksMet> {
    use crate::input::writers::{Entry, acl_entries_in_text, acl_writer_in};
    let mut lines = text.lines();
    let me: u32 = lines.next()?.strip_prefix("me ")?.trim().parse().ok()?;
    let (mut links, mut holding, mut real) = (Vec::new(), Vec::<(PathBuf, Entry)>::new(), None);
    // where an `A` line goes: the `H` entry just read (by its index), if any
    let mut last: Option<usize> = None;
    for line in lines {
        let w: Vec<&str> = line.splitn(5, ' ').collect();
        let path = |b: &str| {
            base64(b)
                .and_then(|b| String::from_utf8(b).ok())
                .map(PathBuf::from)
        };
        match w[..] {
            [tag @ ("K" | "H"), uid, gid, mode, p] => {
                let e = Entry::new(
                    uid.parse().ok()?,
                    gid.parse().ok()?,
                    u32::from_str_radix(mode, 16).ok()?,
                );
                let p = path(p)?;
                last = None;
                if tag == "K" {
                    links.push((p, e));
                } else if !holding.iter().any(|(d, _)| *d == p) {
                    holding.push((p, e));
                    last = Some(holding.len() - 1);
                }
            }
            ["A", ..] => {
                if let Some(i) = last {
                    let acl = acl_entries_in_text(line.strip_prefix("A ").unwrap_or_default());
                    let e = holding[i].1;
                    let writer = acl_writer_in(&acl, e.uid, me, private);
                    holding[i].1 = e.with_acl_writer(writer);
                }
            }
            ["R", p] => real = Some(path(p)?),
            _ => {}
        }
    }
    links.extend(holding);
    Some((me, links, real))
}

/// The remote half of [`Ssh::check_path`]: the user's id, then for every prefix of the path
/// as given (`L`) and as `realpath -m` resolves it (`C`), from `/`, `TAG UID GID MODE PATH`
/// (`stat`, not following a last link; MODE in hex) or `TAG missing PATH` for the first that
/// does not exist, each directory whose group bits (an ACL's mask, when it has one) let
/// write followed by its ACL, `A ENTRIES` (`getfacl -cnE`, on one line; `noacl` where the
/// login node has no `getfacl`); then, where an entry its group can write has the user's
/// primary group, [`FACTS`]. `$1` is the path ([`walk_command`]). One line, as every remote
/// command ([`remote_line`]: `shell::login_word` takes no line break).
const WALK: &str = concat!(
    r#"set -f; printf 'me %s\n' "$(id -u)" || exit 1; g=$(id -g) || exit 1; gw=; "#,
    r#"seen() { set -- $1; [ "$2" = "$g" ] && [ $(( 0x$3 & 16 )) -ne 0 ] && gw=1; return 0; }; "#,
    acl_fn!(),
    r#"walk() { p=; s=$(stat -c '%u %g %f' -- /) || exit 1; seen "$s"; printf '%s %s /\n' "$1" "$s"; acl "$s" /; old=$IFS; IFS=/; "#,
    r#"for part in $2; do IFS=$old; [ -n "$part" ] || { IFS=/; continue; }; p="$p/$part"; "#,
    r#"if [ -e "$p" ] || [ -L "$p" ]; then s=$(stat -c '%u %g %f' -- "$p") || exit 1; seen "$s"; printf '%s %s %s\n' "$1" "$s" "$p"; acl "$s" "$p"; "#,
    r#"else printf '%s missing %s\n' "$1" "$p"; break; fi; IFS=/; done; IFS=$old; }; "#,
    r#"walk L "$1"; c=$(realpath -m -- "$1") || exit 1; walk C "$c"; "#,
    r#"[ -n "$gw" ] || exit 0; "#,
    facts!()
);

/// The facts [`FACTS`] prints, as read: `user NAME GID`, `group ENTRY`, `others N`.
#[derive(Default)]
struct GroupLines<'a> {
    user: Option<&'a str>,
    group: Option<&'a str>,
    others: Option<&'a str>,
}

impl<'a> GroupLines<'a> {
    /// Takes `line` when it is one of [`FACTS`]' lines; whether it was.
    fn take(&mut self, line: &'a str) -> bool {
        let Some((tag, rest)) = line.split_once(' ') else {
            return false;
        };
        let slot = match tag {
            "user" => &mut self.user,
            "group" => &mut self.group,
            "others" => &mut self.others,
            _ => return false,
        };
        *slot = Some(rest);
        true
    }

    /// The user's private group on the login node: `None` where a fact is missing or the
    /// group is not private (`writers::GroupFacts`).
    fn private_group(&self) -> Option<u32> {
        let (user, primary) = self.user?.split_once(' ')?;
        let primary: u32 = primary.trim().parse().ok()?;
        // name:password:gid:member,member
        let mut group = self.group?.split(':');
        let (name, _, gid, members) = (group.next()?, group.next()?, group.next()?, group.next()?);
        let members: Vec<&str> = members.split(',').filter(|m| !m.is_empty()).collect();
        let others: u32 = self.others?.trim().parse().ok()?;
        let facts = crate::input::writers::GroupFacts {
            user,
            primary,
            group: name,
            members: &members,
        };
        (gid.parse() == Ok(primary) && others == 0 && facts.private(primary)).then_some(primary)
    }
}

/// The user's private group on the login node, from the output of [`FACTS`] alone
/// ([`GroupLines::private_group`]).
fn remote_private_group(text: &str) -> Option<u32> {
    let mut facts = GroupLines::default();
    for line in text.lines() {
        facts.take(line);
    }
    facts.private_group()
}

/// One entry of [`WALK`]'s output: its tag (`L` as given, `C` as resolved), the entry at the
/// path (`None`: missing), and the path.
type Walked<'a> = (&'a str, Option<crate::input::writers::Entry>, &'a str);

/// [`WALK`]'s output, read in one pass: the login user's id, the entries walked in order,
/// the ACL entries read for some of them (by their index in `entries`), whether the login
/// node had no `getfacl` to read them, and that user's private group there (from the
/// [`FACTS`] lines that follow).
struct Walk<'a> {
    me: u32,
    entries: Vec<Walked<'a>>,
    acls: Vec<(usize, Vec<crate::input::writers::AclEntry>)>,
    no_getfacl: bool,
    private: Option<u32>,
}

impl<'a> Walk<'a> {
    /// `None` when the output does not start with the user's id (`me UID`).
    fn read(text: &'a str) -> Option<Walk<'a>> {
        let mut lines = text.lines();
        let me = lines.next()?.strip_prefix("me ")?.trim().parse().ok()?;
        let mut facts = GroupLines::default();
        let mut entries = Vec::new();
        let (mut acls, mut no_getfacl) = (Vec::new(), false);
        for line in lines {
            if line == "noacl" {
                no_getfacl = true;
            } else if let Some(acl) = line.strip_prefix("A ") {
                // the ACL of the entry walked just before
                if let Some(last) = entries.len().checked_sub(1) {
                    acls.push((last, crate::input::writers::acl_entries_in_text(acl)));
                }
            } else if !facts.take(line)
                && let Some(e) = walked(line)
            {
                entries.push(e);
            }
        }
        Some(Walk {
            me,
            entries,
            acls,
            no_getfacl,
            private: facts.private_group(),
        })
    }

    /// The first path walked that is a file (where a directory is needed).
    fn not_a_directory(&self) -> Option<&'a str> {
        use crate::input::writers::Kind;
        self.entries
            .iter()
            .find(|(_, e, _)| e.is_some_and(|e| e.kind == Kind::File))
            .map(|(_, _, path)| *path)
    }

    /// The first entry walked (a path of `depth` components below `/`) that another user
    /// could have written: every directory a trusted entry with `sharing`
    /// (`backend::trust::path_problem`), the given path's last `own` components that user's
    /// own and no symbolic link (`own_problem`; the resolved walk holds them as trusted
    /// entries, the given one having held them as own). The user's private group there is
    /// private; no other group is (another user's private group is not looked up: a
    /// directory of theirs on the path is refused as theirs, or accepted with its group's
    /// writes under `jobs_root_shared: group`). With the path, the reason, and whether it
    /// was held as a directory on the path.
    fn problem(
        &self,
        depth: usize,
        own: usize,
        sharing: Sharing,
    ) -> Option<(&'a str, crate::input::writers::Reason, bool)> {
        use super::trust::{own_problem, path_problem};
        use crate::input::writers::{Kind, Reason};
        let me = self.me;
        let private = |uid: u32, gid: u32| uid == me && Some(gid) == self.private;
        // an entry with the write grant its ACL gives, if any
        let with_acl = |at: usize, e: crate::input::writers::Entry| {
            let acl =
                self.acls.iter().find(|(i, _)| *i == at).and_then(|(_, a)| {
                    crate::input::writers::acl_writer_in(a, e.uid, me, &private)
                });
            e.with_acl_writer(acl)
        };
        for tag in ["L", "C"] {
            let walk = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, (t, _, _))| *t == tag);
            for (i, (at, (_, e, path))) in walk.enumerate() {
                let Some(e) = e.map(|e| with_acl(at, e)) else {
                    continue;
                };
                let own_here = tag == "L" && i + own > depth;
                let why = match (own_here, e.kind) {
                    (true, Kind::Link) => Some(Reason::Link),
                    (true, _) => own_problem(e, me, &private),
                    (false, _) => path_problem(e, me, sharing, &private),
                };
                if let Some(why) = why {
                    return Some((path, why, !own_here));
                }
            }
        }
        None
    }
}

/// What a line of [`WALK`]'s output says: the entry at a path, or that the path is missing.
fn walked(line: &str) -> Option<Walked<'_>> {
    let (tag, rest) = line.split_once(' ')?;
    if let Some(path) = rest.strip_prefix("missing ") {
        return Some((tag, None, path));
    }
    let mut f = rest.splitn(4, ' ');
    let (uid, gid, mode, path) = (f.next()?, f.next()?, f.next()?, f.next()?);
    let e = crate::input::writers::Entry::new(
        uid.parse().ok()?,
        gid.parse().ok()?,
        u32::from_str_radix(mode, 16).ok()?,
    );
    Some((tag, Some(e), path))
}

/// `p` as text a remote line can hold: UTF-8, and no character [`check_text`] refuses.
fn sh_text(p: &Path) -> Result<&str> {
    let text = p
        .to_str()
        .ok_or_else(|| Error::usage(format!("{} is not UTF-8", p.display())))?;
    check_text("the path", text)?;
    Ok(text)
}

/// Refuses `text` (`what`: a path, a flag's value) where `shell::quote` would write it in
/// bash's `$'...'` form (a newline, an escape or another character that ends a line,
/// `shell::bash_only`): the login node's `sh -c` (dash, whatever the login shell) reads that
/// as other text, so the command would act on another path there. A usage error saying which
/// character; the caller names the flag the value came from.
fn check_text(what: &str, text: &str) -> Result<()> {
    if !crate::shell::bash_only(text) {
        return Ok(());
    }
    let c = text
        .chars()
        .find(|c| crate::shell::bash_only(c.encode_utf8(&mut [0; 4])))
        .unwrap_or('\n');
    Err(Error::usage(format!(
        "{what} `{}` holds a control character ({}): the login node's commands run under `sh`, which cannot be handed it as one word",
        text.escape_debug(),
        c.escape_unicode()
    ))
    .help("give it without control characters (newlines, escapes, ...)"))
}

/// The bytes of the regular files under `dir` (for upload progress).
fn tree_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// The most bytes a Unix socket's path holds, its NUL left out: `sockaddr_un`'s `sun_path`
/// less one, 107 on Linux, 103 on macOS (whose `sun_path` is 104 bytes).
const SOCKET_PATH_MAX: usize = std::mem::size_of::<nix::libc::sockaddr_un>()
    - std::mem::offset_of!(nix::libc::sockaddr_un, sun_path)
    - 1;

/// The directory of the connection sockets: `$XDG_RUNTIME_DIR/ovlaunch-ssh`, else
/// `TMPDIR/ovlaunch-ssh-UID` (`/tmp` for a `TMPDIR` that is not absolute); created 0700, and
/// refused when it is a symlink, another user's, or open to others. A relative
/// `XDG_RUNTIME_DIR` is ignored, as the XDG Base Directory specification says: the sockets
/// never go under the working directory.
fn control_dir() -> Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let (uid, _) = host::Local.ids()?;
    // A socket path holds at most SOCKET_PATH_MAX bytes: this directory, `/`, 16 bytes of
    // name and ssh's 17-byte temporary suffix.
    let fits = |d: &Path| d.as_os_str().len() + 1 + 16 + 17 <= SOCKET_PATH_MAX;
    let temp = Some(std::env::temp_dir())
        .filter(|t| t.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|r| r.is_absolute())
        .map(|r| r.join("ovlaunch-ssh"))
        .filter(|d| fits(d))
        .unwrap_or_else(|| temp.join(format!("ovlaunch-ssh-{uid}")));
    if !fits(&dir) {
        return Err(Error::runtime(format!(
            "{} is too long a directory for ssh's connection socket",
            dir.display()
        ))
        .help("set TMPDIR or XDG_RUNTIME_DIR to a shorter directory"));
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(Error::runtime(format!(
                "cannot create {}: {e}",
                dir.display()
            )));
        }
    }
    let m = std::fs::symlink_metadata(&dir)
        .map_err(|e| Error::runtime(format!("cannot read {}: {e}", dir.display())))?;
    if !m.file_type().is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        return Err(Error::runtime(format!(
            "{} is not a private directory of this user (a symlink, another user's, or open to others): ssh's connection sockets are not put there",
            dir.display()
        ))
        .help("remove it (or set XDG_RUNTIME_DIR to a private directory) and try again"));
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ssh's socket at the longest path the limit allows is one this machine's kernel
    /// binds, and a byte more is one it cannot hold (Linux's 107 bytes, macOS's 103).
    #[test]
    fn the_socket_path_limit_is_this_machines() {
        let d = tempfile::tempdir().unwrap();
        let at = |len: usize| {
            let dir = d.path().as_os_str().len() + 1;
            d.path().join("s".repeat(len - dir))
        };
        let longest = at(SOCKET_PATH_MAX);
        assert_eq!(longest.as_os_str().len(), SOCKET_PATH_MAX);
        std::os::unix::net::UnixListener::bind(&longest).unwrap();
        assert!(std::os::unix::net::UnixListener::bind(at(SOCKET_PATH_MAX + 1)).is_err());
        #[cfg(target_os = "linux")]
        assert_eq!(SOCKET_PATH_MAX, 107);
        #[cfg(target_os = "macos")]
        assert_eq!(SOCKET_PATH_MAX, 103);
    }

    /// `WALK` as ssh hands it to a login shell that is dash (`/bin/sh`), not bash: it runs
    /// and prints the walk (before: "Syntax error", on every `--host` submit).
    #[test]
    fn the_walk_runs_under_a_posix_login_shell() {
        let line = remote_line(&walk_command("/tmp"));
        let out = Command::new("dash").args(["-c", &line]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.starts_with("me ") && text.contains("L 0 0 43ff /tmp"),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // a directory its group can write, of the user's primary group: the group facts
        // follow the walk, and they run alone too
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o775),
        )
        .unwrap();
        let path = dir.path().join("jobs");
        for line in [
            remote_line(&walk_command(path.to_str().unwrap())),
            remote_line(FACTS),
        ] {
            let out = Command::new("dash").args(["-c", &line]).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success()
                    && ["user ", "group ", "others "]
                        .iter()
                        .all(|tag| text.lines().any(|l| l.starts_with(tag))),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// The login node's walk of a job's path, run by dash as a login shell runs it, meets
    /// the links and the directories holding them that the local walk (`input::links_on`)
    /// meets on the same tree, in the same order: a relative link, an absolute one, a link
    /// to a link, `..` after a link (taken from where the walk is), a name with a space and
    /// one with a trailing newline in a link's target, a link that leads nowhere; and its
    /// answer names the directory's own path.
    #[test]
    fn the_login_nodes_walk_of_a_job_path_meets_what_the_local_one_meets() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let real = base.join("real dir/jobs");
        std::fs::create_dir_all(real.join("job")).unwrap();
        std::fs::create_dir_all(base.join("nl\n")).unwrap();
        std::fs::create_dir_all(base.join("nl/job")).unwrap();
        symlink("real dir", base.join("rel")).unwrap();
        symlink(base.join("rel/jobs"), base.join("abs")).unwrap();
        symlink("abs", base.join("chain")).unwrap();
        std::fs::create_dir_all(base.join("real dir/sub")).unwrap();
        symlink(base.join("real dir/sub"), base.join("up")).unwrap();
        symlink("nl\n", base.join("newline")).unwrap();
        symlink("/nonexistent/x", base.join("nowhere")).unwrap();
        let none = |_: u32, _: u32| false;
        for path in [
            "chain/job",
            "up/../jobs/job",
            "rel/./jobs/job",
            "newline/job",
            "nowhere/job",
            "real dir/jobs/job",
        ] {
            let path = base.join(path);
            let line = remote_line(&format!(
                "set -- {}; {LINKS}",
                quote(path.to_str().unwrap())
            ));
            let out = Command::new("dash").args(["-c", &line]).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let (me, met, resolved) = links_met(&text, &none).unwrap();
            assert_eq!(me, nix::unistd::geteuid().as_raw());
            let (links, holding) = crate::input::links_on(&path, &crate::input::look);
            let local: Vec<(PathBuf, u32, u32, u32)> = links
                .into_iter()
                .map(|(p, e)| (p, e.uid, e.gid, e.mode))
                .chain(holding.into_iter().map(|d| {
                    let e = crate::input::writers::Entry::at(&d, me).unwrap();
                    (d, e.uid, e.gid, e.mode)
                }))
                .collect();
            let there: Vec<(PathBuf, u32, u32, u32)> = met
                .into_iter()
                .map(|(p, e)| (p, e.uid, e.gid, e.mode))
                .collect();
            assert_eq!(there, local, "{}: {text}", path.display());
            assert_eq!(resolved, path.canonicalize().ok(), "{}", path.display());
        }
    }

    /// A directory whose ACL lets another user write it, walked by dash as a login shell
    /// runs `WALK`: its ACL follows its line (where `setfacl` and ACLs exist here), and the
    /// grant is refused as the local check refuses it; a mask without write, or no ACL line,
    /// leaves the mode's word; `noacl` says the login node has no `getfacl`.
    #[test]
    fn the_login_nodes_acls_are_held_to_the_local_rule() {
        use crate::input::writers::{Grantee, Reason};
        // the group bits show the mask; the group is the user's private one
        let t = |acl: &str| {
            format!(
                "me 0\nL 0 0 41ed /\nL 0 0 41ed /w\nL 0 0 41fd /w/jobs\n{acl}user root 0\ngroup root:x:0:\nothers 0\n"
            )
        };
        let check = |t: &str| {
            let walk = Walk::read(t).expect("the user's id first");
            (
                walk.problem(2, 0, Sharing::Private)
                    .map(|(p, w, _)| (p.to_string(), w)),
                walk.no_getfacl,
            )
        };
        let granted = "A user::rwx user:1001:rwx group::r-x mask::rwx other::r-x \n";
        assert_eq!(
            check(&t(granted)),
            (
                Some(("/w/jobs".into(), Reason::Acl(Grantee::User(1001)))),
                false
            )
        );
        let masked = "A user::rwx user:1001:rwx group::r-x mask::r-x other::r-x \n";
        assert_eq!(check(&t(masked)).0, None, "the mask takes write away");
        assert_eq!(check(&t("noacl\n")), (None, true));
        // dash runs it; the grant is read there
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("jobs");
        std::fs::create_dir(&jobs).unwrap();
        let set = Command::new("setfacl")
            .args(["-m", "u:4000001:rwx"])
            .arg(&jobs)
            .output();
        if !set.is_ok_and(|o| o.status.success()) {
            eprintln!("skipped the walk's ACL half: no setfacl, or no ACLs here");
            return;
        }
        let line = remote_line(&walk_command(jobs.to_str().unwrap()));
        let out = Command::new("dash").args(["-c", &line]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let walk = Walk::read(&text).expect("the user's id first");
        let depth = jobs.components().count() - 1;
        // the mask gives the group write: refused as the group's where it is not the user's
        // private group (the same database here and there), else as the ACL's grant
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&jobs).unwrap();
        let why = if crate::input::writers::private_group(m.uid(), m.gid()) {
            Reason::Acl(Grantee::User(4_000_001))
        } else {
            Reason::Group(m.gid())
        };
        assert_eq!(
            walk.problem(depth, 0, Sharing::Private)
                .map(|(p, w, _)| (p.to_string(), w)),
            Some((jobs.display().to_string(), why)),
            "{text}"
        );
        assert!(text.contains("user:4000001:rwx"), "{text}");
    }

    /// The login node's walk is held to the local rule: what `WALK` prints for a path of
    /// `/tmp/x/jobs/experiments/NAME` (user 0) and which entry is refused, and why.
    #[test]
    fn the_login_nodes_walk_is_held_to_the_local_rule() {
        use crate::input::writers::Reason;
        let walk = |modes: [&str; 5], resolved: &str| {
            let paths = [
                "/",
                "/tmp",
                "/tmp/x",
                "/tmp/x/jobs",
                "/tmp/x/jobs/experiments",
            ];
            let mut t = String::from("me 0\n");
            for (m, p) in modes.iter().zip(paths) {
                t.push_str(&format!("L {m} {p}\n"));
            }
            t.push_str(&format!(
                "L 0 0 41c0 /tmp/x/jobs/experiments/run\n{resolved}"
            ));
            t
        };
        let ok = ["0 0 41ed", "0 0 43ff", "0 0 41ed", "0 0 41ed", "0 0 41c0"];
        let check = |t: &str, sharing| {
            let walk = Walk::read(t).expect("the user's id first");
            assert_eq!(walk.me, 0);
            walk.problem(5, 2, sharing)
                .map(|(p, w, on)| (p.to_string(), w, on))
        };
        assert_eq!(
            check(&walk(ok, ""), Sharing::Private),
            None,
            "/tmp's sticky bit"
        );
        let mut open = ok;
        open[2] = "0 0 41ff";
        assert_eq!(
            check(&walk(open, ""), Sharing::Private),
            Some(("/tmp/x".into(), Reason::EveryUserNoSticky, true))
        );
        let mut team = ok;
        team[3] = "1001 50 41fd";
        assert_eq!(
            check(&walk(team, ""), Sharing::Private),
            Some(("/tmp/x/jobs".into(), Reason::Owner(1001), true))
        );
        assert_eq!(
            check(&walk(team, ""), Sharing::Group),
            None,
            "jobs_root_shared: group"
        );
        let mut grouped = ok;
        grouped[3] = "0 50 41f8";
        assert_eq!(
            check(&walk(grouped, ""), Sharing::Private),
            Some(("/tmp/x/jobs".into(), Reason::Group(50), true)),
            "a group that is not the user's primary one"
        );
        // the user's private group there: primary, named after the user, no other member, no
        // other user's primary group; a fact missing (a lookup that failed) makes it not so
        let mut upg = ok;
        upg[3] = "0 0 41fd";
        let facts = |group: &str, others: &str| format!("user root 0\ngroup {group}\n{others}");
        assert_eq!(
            check(
                &walk(upg, &facts("root:x:0:", "others 0\n")),
                Sharing::Private
            ),
            None,
            "umask 002 under a private group"
        );
        for (group, others, private, why) in [
            (
                "root:x:0:root",
                "others 0\n",
                true,
                "the user named as member",
            ),
            ("root:x:0:alice", "others 0\n", false, "another member"),
            (
                "root:x:0:",
                "others 1\n",
                false,
                "another user's primary group",
            ),
            ("root:x:0:", "", false, "other users unknown"),
            (
                "wheel:x:0:",
                "others 0\n",
                false,
                "not named after the user",
            ),
        ] {
            let expected = (!private).then(|| ("/tmp/x/jobs".into(), Reason::Group(0), true));
            assert_eq!(
                check(&walk(upg, &facts(group, others)), Sharing::Private),
                expected,
                "{why}"
            );
        }
        assert_eq!(
            check(&walk(upg, ""), Sharing::Private),
            Some(("/tmp/x/jobs".into(), Reason::Group(0), true)),
            "nothing looked up"
        );
        let mut theirs = ok;
        theirs[4] = "1001 1001 41c0";
        assert_eq!(
            check(&walk(theirs, ""), Sharing::Group),
            Some(("/tmp/x/jobs/experiments".into(), Reason::Owner(1001), false)),
            "an experiment directory is the user's own, shared jobs root or not"
        );
        let mut linked = ok;
        linked[4] = "0 0 a1ff";
        assert_eq!(
            check(&walk(linked, ""), Sharing::Private),
            Some(("/tmp/x/jobs/experiments".into(), Reason::Link, false))
        );
        // a link on the way that resolves into another user's directory
        let resolved = "C 0 0 41ed /\nC 1001 1001 41ed /home\nC missing /home/x\n";
        assert_eq!(
            check(&walk(ok, resolved), Sharing::Private),
            Some(("/home".into(), Reason::Owner(1001), true))
        );
    }

    /// What every login shell makes of a remote command line as ssh hands it (`sh -c` and
    /// `shell::login_word`): the same words run by `sh`, quotes, `!` (csh's history character,
    /// even in single quotes) and `$` arriving unchanged.
    #[test]
    fn the_login_line_reads_alike_in_every_login_shell() {
        let remote = format!(
            "printf '%s|' {} {} \"$0\"",
            quote("it's a!x $HOME `id` !! \\"),
            quote("!$")
        );
        let line = remote_line(&remote);
        let expected = "it's a!x $HOME `id` !! \\|!$|sh|";
        for shell in ["sh", "dash", "bash", "zsh", "tcsh", "csh"] {
            let Ok(out) = Command::new(shell).args(["-c", &line]).output() else {
                assert!(
                    !matches!(shell, "sh" | "dash" | "bash"),
                    "{shell} is not installed"
                );
                eprintln!("{shell}: not installed, not tried");
                continue;
            };
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                expected,
                "{shell}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// An upload and the reading back of its outcome, as ssh hands them to a login shell that
    /// is dash: the archive lands with the upload's mark, which the reading back recognises
    /// (and removes); a second upload of the same path is refused (17), and a directory
    /// without the mark is not the upload's (94).
    #[test]
    fn an_upload_and_its_outcome_run_under_a_posix_login_shell() {
        let top = tempfile::tempdir().unwrap();
        let src = top.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("launch.sbatch"), "#!/bin/bash\n").unwrap();
        let archive = Command::new("tar")
            .arg("-C")
            .arg(&src)
            .args(["-cf", "-", "."])
            .output()
            .unwrap()
            .stdout;
        let p = top.path().join("jobs it's");
        let (p, d) = (p.to_str().unwrap(), format!("{}/job", p.display()));
        let run = |line: &str, stdin: &[u8]| {
            let mut c = Command::new("dash")
                .args(["-c", &remote_line(line)])
                .stdin(Stdio::piped())
                .spawn()
                .unwrap();
            match c.stdin.take().unwrap().write_all(stdin) {
                // a refused upload ends without reading its archive
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                written => written.unwrap(),
            }
            c.wait().unwrap().code()
        };
        assert_eq!(run(&upload_script(&d, p, "1-2"), &archive), Some(0));
        let job = Path::new(&d);
        assert!(job.join("launch.sbatch").is_file() && job.join(mark("1-2")).is_file());
        assert_eq!(run(&landed_script(&d, p, "1-2"), b""), Some(0));
        assert!(!job.join(mark("1-2")).exists(), "the mark is removed");
        assert_eq!(run(&landed_script(&d, p, "1-2"), b""), Some(94));
        assert_eq!(run(&upload_script(&d, p, "3-4"), &archive), Some(17));
        assert_eq!(run(&landed_script(&d, p, "3-4"), b""), Some(94));
        std::fs::create_dir(partial(p, "5-6")).unwrap();
        assert_eq!(run(&landed_script(&d, p, "5-6"), b""), Some(95));
    }

    #[test]
    fn targets() {
        for ok in ["me@login", "login01", "ssh://me@login:2222", "me@10.0.0.1"] {
            assert!(check_target(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-oProxyCommand=x",
            "me@login;rm",
            "me@lo gin",
            "@x",
            "a\nb",
        ] {
            assert!(check_target(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn decodes_base64_and_listings() {
        assert_eq!(base64("").unwrap(), b"");
        assert_eq!(base64("YQ==").unwrap(), b"a");
        assert_eq!(base64("YWI=").unwrap(), b"ab");
        assert_eq!(base64("YWJj").unwrap(), b"abc");
        assert_eq!(base64("L2ovYSBi").unwrap(), b"/j/a b");
        assert!(base64("YQ=").is_none() && base64("Y!==").is_none());
        let l = parse_listing("D 0 5 750 L2ovYSBi\nF submission.json 0 5 644 e30=\nL plan.json\nS launch.sbatch\nF empty 0 5 600 \n").unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].dir, Path::new("/j/a b"));
        assert_eq!(l[0].mode, 0o750);
        assert_eq!(
            l[0].file("submission.json"),
            Some(&Seen::File {
                uid: 0,
                gid: 5,
                mode: 0o644,
                bytes: b"{}".to_vec()
            })
        );
        assert_eq!(l[0].file("plan.json"), Some(&Seen::Link));
        assert_eq!(l[0].file("launch.sbatch"), Some(&Seen::Special));
        assert_eq!(
            l[0].file("empty"),
            Some(&Seen::File {
                uid: 0,
                gid: 5,
                mode: 0o600,
                bytes: vec![]
            })
        );
        assert!(
            parse_listing("F x 0 5 644 e30=\n").is_none(),
            "a file before its directory"
        );
    }

    #[test]
    fn the_recorded_wrapper_quotes_the_directory() {
        let s = Ssh::recorded("/j/it's here", "1-2", "sbatch --parsable x");
        assert!(s.starts_with("cd -- '/j/it'\\''s here' || exit 97;"), "{s}");
        assert!(s.contains("trap '' HUP PIPE"));
    }
}

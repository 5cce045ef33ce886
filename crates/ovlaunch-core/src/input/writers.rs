//! Who other than this user (and root) could write a file, directory or symbolic link: the
//! one ownership and mode predicate behind every "could another user have written this"
//! check of ovlaunch, with the words and the fix of each refusal.
//!
//! Contract:
//! - [`writers`] answers for one entry (its owner, group, mode and [`Kind`]) and the user
//!   ovlaunch runs as, in the [`Role`] the entry plays, every way another user could write it
//!   (a [`Reason`] each, in this order):
//!
//!   | reason | when | fix named |
//!   |---|---|---|
//!   | [`Reason::Owner`] | it belongs to another user: not to this user, nor to root for a [`Role::Trusted`] entry | the caller's: where to find or make one of this user's |
//!   | [`Reason::EveryUserNoSticky`] | a [`Role::Trusted`] directory every user can write, without the sticky bit | `chmod o-w` (or `chmod +t`, as `/tmp` has it) |
//!   | [`Reason::EveryUser`] | a file, or a [`Role::Own`] directory, every user can write | `chmod o-w` |
//!   | [`Reason::Group`] | its group can write it, and the group is not its owner's private group ([`private_group`]) | `chmod g-w` |
//!   | [`Reason::Acl`] | its POSIX access ACL lets a named user or group write it ([`Entry::acl_writer`]) | `setfacl -x u:UID` (or `g:GID`) |
//!
//!   A [`Role::Trusted`] directory with the sticky bit (like `/tmp`) is safe whatever its write
//!   bits and ACL, when its owner is: others may add entries to it but not rename or remove its
//!   owner's. A symbolic link's mode means nothing: only its owner counts. [`Reason::Link`]
//!   is a caller's refusal of a link where it needs a directory, with its words and fix here.
//! - [`private_group`] is the one decision that a group is a user's private group: the user's
//!   primary group, named after the user, with no other member (what `umask 002` systems
//!   give every user, so their files are 0664 and their directories 0775). Its write bit
//!   lets nobody else write. A group's members are those its member list names and every
//!   user whose primary group it is (the user database's entries, whose primary group the
//!   member list does not repeat): both are read through the C library's name service
//!   (NSS), the user database enumerated once per process and only when a group could be
//!   private. A database that cannot be read (to its end) makes the group not private.
//! - Callers keep their own context: `input::check_trusted` (configuration and code, with
//!   `OVLAUNCH_SAFE_DIRECTORY`), and the launcher's `backend::trust` (job directories,
//!   records, `submit DIR`, with `jobs_root_shared: group` excusing [`Reason::Owner`] and
//!   [`Reason::Group`] on the path).
//! - An ACL's write grant is what the kernel would let write: a named user (`user:UID`) or
//!   named group (`group:GID`) entry with the write bit, while the ACL's mask has it too
//!   (the mask is what `ls -l` shows as the group bits, so `chmod g-w` ends every grant).
//!   The owner, the user ovlaunch runs as and the owner's private group grant nobody else
//!   ([`acl_writer`], the pure reading of the `system.posix_acl_access` attribute's bytes;
//!   [`acl_entries_in_text`] reads the same entries as `getfacl` prints them, for a login
//!   node's ACL, both judged by [`acl_writer_in`]).
//! - No I/O but [`private_group`], [`user_name`] and [`group_name`], which read this
//!   machine's user and group database, and [`acl_writer_fd`] and [`acl_writer_at`],
//!   which read an entry's access ACL (a filesystem without POSIX ACLs has none; off Linux
//!   none is read: macOS's own ACLs are not, the entry is judged by owner and mode).

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Link,
}

impl Kind {
    /// The kind of a `st_mode` with its file-type bits (anything but a directory or a
    /// symbolic link counts as a file).
    pub fn of_mode(mode: u32) -> Kind {
        match mode & 0o170000 {
            0o040000 => Kind::Dir,
            0o120000 => Kind::Link,
            _ => Kind::File,
        }
    }
}

/// The ownership and permissions of a file, directory or symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (file-type bits, when present, are ignored).
    pub mode: u32,
    pub kind: Kind,
    /// Someone else its access ACL lets write it ([`acl_writer`]), when one does.
    pub acl_writer: Option<Grantee>,
}

impl Entry {
    /// The entry `st_mode` (with its file-type bits) describes, without an ACL.
    pub fn new(uid: u32, gid: u32, mode: u32) -> Entry {
        Entry {
            uid,
            gid,
            mode: mode & 0o7777,
            kind: Kind::of_mode(mode),
            acl_writer: None,
        }
    }

    /// The same entry, its ACL letting `writer` write it.
    pub fn with_acl_writer(self, writer: Option<Grantee>) -> Entry {
        Entry {
            acl_writer: writer,
            ..self
        }
    }

    /// The entry metadata describes (as `stat` or `lstat` read it).
    pub fn of(m: &std::fs::Metadata) -> Entry {
        use std::os::unix::fs::MetadataExt;
        Entry::new(m.uid(), m.gid(), m.mode())
    }

    /// What stands at `path` (links followed), with its ACL's write grant as seen by `me`;
    /// `None` where it cannot be read.
    pub fn at(path: &std::path::Path, me: u32) -> Option<Entry> {
        let e = Entry::of(&std::fs::metadata(path).ok()?);
        Some(e.with_acl_writer(acl_writer_at(path, true, e.uid, me)))
    }
}

/// What an entry is to what is done with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Nobody but this user and root may be able to write it: configuration and code read,
    /// and every directory passed on the way to what is used (the sticky bit counts).
    Trusted,
    /// It must be this user's own, with nothing another user added: a record, a job or
    /// experiment directory and what is in it (the sticky bit does not count).
    Own,
}

/// Why another user could write an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// It belongs to this other user.
    Owner(u32),
    /// A directory every user can write, without the sticky bit.
    EveryUserNoSticky,
    /// Every user can write it.
    EveryUser,
    /// This group can write it, and it is not its owner's private group.
    Group(u32),
    /// A symbolic link where a directory of this user's own is needed.
    Link,
    /// Its access ACL lets this user or group write it.
    Acl(Grantee),
}

/// A named entry of a POSIX ACL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grantee {
    User(u32),
    Group(u32),
}

/// How users and groups are named in a reason's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// By this machine's user and group database: `name (uid N)`.
    Local,
    /// By number only (`uid N`): the entry is on another machine.
    Ids,
}

impl Reason {
    /// Why, in words, following the entry's path: `X belongs to alice (uid 1001), not to you`.
    pub fn why(self, names: Names) -> String {
        let user = |uid: u32| match names {
            Names::Local => user_name(uid),
            Names::Ids => format!("uid {uid}"),
        };
        let group = |gid: u32| match names {
            Names::Local => group_name(gid),
            Names::Ids => format!("gid {gid}"),
        };
        match self {
            Reason::Owner(uid) => format!("belongs to {}, not to you", user(uid)),
            Reason::EveryUserNoSticky => {
                "is writable by every user and has no sticky bit".to_string()
            }
            Reason::EveryUser => "is writable by every user".to_string(),
            Reason::Group(gid) => format!(
                "is writable by its group {}, not its owner's private group",
                group(gid)
            ),
            Reason::Link => "is a symbolic link".to_string(),
            Reason::Acl(Grantee::User(uid)) => {
                format!("has an ACL that lets the user {} write it", user(uid))
            }
            Reason::Acl(Grantee::Group(gid)) => {
                format!("has an ACL that lets the group {} write it", group(gid))
            }
        }
    }

    /// The fix for the entry at `path`; `None` for [`Reason::Owner`], whose fix is the
    /// caller's (where to find or make one of this user's own).
    pub fn fix(self, path: &str) -> Option<String> {
        match self {
            Reason::Owner(_) => None,
            Reason::EveryUserNoSticky => Some(format!(
                "`chmod o-w {path}` (or `chmod +t {path}`, as /tmp has it)"
            )),
            Reason::EveryUser => Some(format!("`chmod o-w {path}`")),
            Reason::Group(_) => Some(format!("`chmod g-w {path}`")),
            Reason::Link => Some(format!(
                "remove the symbolic link {path} (ovlaunch creates the directory itself, owner-only)"
            )),
            Reason::Acl(Grantee::User(uid)) => Some(format!("`setfacl -x u:{uid} {path}`")),
            Reason::Acl(Grantee::Group(gid)) => Some(format!("`setfacl -x g:{gid} {path}`")),
        }
    }
}

/// Every way another user than `me` (and root) could write `e` in `role`, in the order of
/// the table in this module's docs; `private(uid, gid)` says whether `gid` is `uid`'s
/// private group ([`private_group`] on this machine).
pub fn writers(
    e: Entry,
    role: Role,
    me: u32,
    private: &dyn Fn(u32, u32) -> bool,
) -> impl Iterator<Item = Reason> {
    let owner_ok = e.uid == me || (e.uid == 0 && role == Role::Trusted);
    let owner = (!owner_ok).then_some(Reason::Owner(e.uid));
    let sticky = role == Role::Trusted && e.kind == Kind::Dir && e.mode & 0o1000 != 0;
    let bits = e.kind != Kind::Link && !sticky;
    let every =
        (bits && e.mode & 0o002 != 0).then_some(if role == Role::Trusted && e.kind == Kind::Dir {
            Reason::EveryUserNoSticky
        } else {
            Reason::EveryUser
        });
    let group =
        (bits && e.mode & 0o020 != 0 && !private(e.uid, e.gid)).then_some(Reason::Group(e.gid));
    let acl = e.acl_writer.filter(|_| bits).map(Reason::Acl);
    [owner, every, group, acl].into_iter().flatten()
}

/// One entry of a POSIX ACL: its tag, permission bits and id, as Linux stores them.
pub type AclEntry = (u16, u16, u32);

const ACL_USER: u16 = 0x02;
const ACL_GROUP: u16 = 0x08;
const ACL_MASK: u16 = 0x10;
const ACL_WRITE: u16 = 0x02;

/// The first named user or group that the access ACL `xattr` (the bytes of the
/// `system.posix_acl_access` attribute, as Linux stores them: a version word, 2, then
/// entries of a 16-bit tag, 16-bit permissions and 32-bit id, little-endian) lets write an
/// entry owned by `owner` ([`acl_writer_in`]). `None` for an ACL that cannot be read as one.
pub fn acl_writer(
    xattr: &[u8],
    owner: u32,
    me: u32,
    private: &dyn Fn(u32, u32) -> bool,
) -> Option<Grantee> {
    let (version, body) = xattr.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*version) != 2 || body.len() % 8 != 0 {
        return None;
    }
    let entries: Vec<AclEntry> = body
        .chunks_exact(8)
        .map(|c| {
            (
                u16::from_le_bytes([c[0], c[1]]),
                u16::from_le_bytes([c[2], c[3]]),
                u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            )
        })
        .collect();
    acl_writer_in(&entries, owner, me, private)
}

/// The first named user or group that the ACL `entries` let write an entry owned by
/// `owner`: a `user:UID` entry (not the owner, not `me`) or a `group:GID` entry (not the
/// owner's private group, by `private`) with the write bit, while the mask has it too.
pub fn acl_writer_in(
    entries: &[AclEntry],
    owner: u32,
    me: u32,
    private: &dyn Fn(u32, u32) -> bool,
) -> Option<Grantee> {
    let mask_writes = entries
        .iter()
        .any(|&(tag, perm, _)| tag == ACL_MASK && perm & ACL_WRITE != 0);
    if !mask_writes {
        return None;
    }
    entries.iter().find_map(|&(tag, perm, id)| {
        if perm & ACL_WRITE == 0 {
            return None;
        }
        match tag {
            ACL_USER if id != owner && id != me => Some(Grantee::User(id)),
            ACL_GROUP if !private(owner, id) => Some(Grantee::Group(id)),
            _ => None,
        }
    })
}

/// The named user and group entries and the mask of an ACL as `getfacl -cnE` prints it
/// (`user:UID:rwx`, `group:GID:r-x`, `mask::rwx`, separated by white space; the owner's,
/// group owner's and others' entries, with no id, are left out, as is what is not an
/// entry): the entries [`acl_writer_in`] reads, for an ACL read on another machine.
pub fn acl_entries_in_text(text: &str) -> Vec<AclEntry> {
    text.split_whitespace()
        .filter_map(|word| {
            let mut f = word.splitn(3, ':');
            let (kind, id, perm) = (f.next()?, f.next()?, f.next()?);
            let bits = if perm.contains('w') { ACL_WRITE } else { 0 };
            match (kind, id) {
                ("mask", "") => Some((ACL_MASK, bits, 0)),
                ("user", id) if !id.is_empty() => Some((ACL_USER, bits, id.parse().ok()?)),
                ("group", id) if !id.is_empty() => Some((ACL_GROUP, bits, id.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

/// The access ACL's bytes of what `read(buf)` (a `getxattr` call: the size it needs when
/// `buf` is empty) reads; `None` when it has none (or its filesystem has no ACLs).
#[cfg(target_os = "linux")]
fn read_acl(read: &dyn Fn(&mut [u8]) -> isize) -> Option<Vec<u8>> {
    for _ in 0..4 {
        let size = usize::try_from(read(&mut [])).ok()?.min(1 << 20);
        let mut buf = vec![0u8; size];
        if let Ok(n) = usize::try_from(read(&mut buf)) {
            buf.truncate(n);
            return Some(buf);
        }
        // ERANGE: it grew meanwhile; anything else: none to read
        if nix::errno::Errno::last() != nix::errno::Errno::ERANGE {
            return None;
        }
    }
    None
}

#[cfg(target_os = "linux")]
const ACL_ACCESS: &std::ffi::CStr = c"system.posix_acl_access";

/// [`acl_writer`] of the file or directory open as `fd`, owned by `owner`, for user `me`
/// on this machine (its private groups by [`private_group`]).
#[cfg(target_os = "linux")]
pub fn acl_writer_fd(fd: std::os::fd::BorrowedFd<'_>, owner: u32, me: u32) -> Option<Grantee> {
    use std::os::fd::AsRawFd;
    let bytes = read_acl(&|buf: &mut [u8]| {
        // SAFETY: `buf` is valid for writes of its length; the name is NUL-terminated.
        unsafe {
            nix::libc::fgetxattr(
                fd.as_raw_fd(),
                ACL_ACCESS.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        }
    })?;
    acl_writer(&bytes, owner, me, &private_group)
}

/// [`acl_writer`] of the entry at `path` (a symbolic link itself when `follow` is false:
/// a link has no ACL), owned by `owner`, for user `me` on this machine.
#[cfg(target_os = "linux")]
pub fn acl_writer_at(path: &std::path::Path, follow: bool, owner: u32, me: u32) -> Option<Grantee> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let bytes = read_acl(&|buf: &mut [u8]| {
        let get = if follow {
            nix::libc::getxattr
        } else {
            nix::libc::lgetxattr
        };
        // SAFETY: `buf` is valid for writes of its length; both names are NUL-terminated.
        unsafe {
            get(
                path.as_ptr(),
                ACL_ACCESS.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        }
    })?;
    acl_writer(&bytes, owner, me, &private_group)
}

/// [`acl_writer_fd`] off Linux: none read. The `system.posix_acl_access` attribute is
/// Linux's; macOS keeps its own ACLs (`chmod +a`), which are not read, so there an entry is
/// judged by its owner and mode alone (docs/security.md says so).
#[cfg(not(target_os = "linux"))]
pub fn acl_writer_fd(_: std::os::fd::BorrowedFd<'_>, _: u32, _: u32) -> Option<Grantee> {
    None
}

/// [`acl_writer_at`] off Linux: none read, as [`acl_writer_fd`].
#[cfg(not(target_os = "linux"))]
pub fn acl_writer_at(_: &std::path::Path, _: bool, _: u32, _: u32) -> Option<Grantee> {
    None
}

/// The first way another user could write `e` ([`writers`]), if there is one.
pub fn writer(e: Entry, role: Role, me: u32, private: &dyn Fn(u32, u32) -> bool) -> Option<Reason> {
    writers(e, role, me, private).next()
}

/// Whether `gid` is user `uid`'s private group on this machine: the user's primary group,
/// named after the user, with no other member: none in the group's member list but the user,
/// and no other user's primary group ([`another_primary`]; root's too: group `root` with no
/// member and no other user in it).
pub fn private_group(uid: u32, gid: u32) -> bool {
    use nix::unistd::{Gid, Group, Uid, User};
    let (Ok(Some(u)), Ok(Some(g))) = (
        User::from_uid(Uid::from_raw(uid)),
        Group::from_gid(Gid::from_raw(gid)),
    ) else {
        return false;
    };
    let members: Vec<&str> = g.mem.iter().map(String::as_str).collect();
    let facts = GroupFacts {
        user: &u.name,
        primary: u.gid.as_raw(),
        group: &g.name,
        members: &members,
    };
    facts.private(gid) && !another_primary(uid, gid, primary_groups())
}

/// What decides whether a group is a user's private one, from a user and a group database
/// (this machine's, [`private_group`]; a login node's, read there with `getent`).
#[derive(Debug, Clone, Copy)]
pub struct GroupFacts<'a> {
    /// The user's name and primary group id.
    pub user: &'a str,
    pub primary: u32,
    /// The group's name and member list.
    pub group: &'a str,
    pub members: &'a [&'a str],
}

impl GroupFacts<'_> {
    /// Whether `gid` is the user's private group as far as these facts go: the user's
    /// primary group, named after the user, with no member but the user. (No other user
    /// may have it as primary group either: the caller's to check.)
    pub fn private(&self, gid: u32) -> bool {
        self.primary == gid
            && self.group == self.user
            && self.members.iter().all(|m| *m == self.user)
    }
}

/// Whether a user other than `uid` (another user id) has `gid` as primary group, by every
/// user's (uid, primary gid) in `users`; `None` (the user database not read to its end)
/// counts as yes.
fn another_primary(uid: u32, gid: u32, users: Option<&[(u32, u32)]>) -> bool {
    users.is_none_or(|all| all.iter().any(|&(u, g)| g == gid && u != uid))
}

/// Every user's (uid, primary gid) in this machine's user database, read once per process;
/// `None` when it could not be read to its end.
fn primary_groups() -> Option<&'static [(u32, u32)]> {
    static USERS: std::sync::OnceLock<Option<Vec<(u32, u32)>>> = std::sync::OnceLock::new();
    USERS.get_or_init(enumerate_users).as_deref()
}

/// The user database through NSS (`setpwent`, `getpwent`, `endpwent`): each entry's uid and
/// primary gid. A null entry ends the list, an error when `errno` says one (glibc also ends
/// it where a source is unavailable, so that source's users are not seen).
fn enumerate_users() -> Option<Vec<(u32, u32)>> {
    use nix::errno::Errno;
    use nix::libc;
    let mut users = Vec::new();
    // SAFETY: the enumeration's state is the C library's; this runs once per process
    // (`primary_groups`), and nothing else in ovlaunch enumerates the user database.
    unsafe { libc::setpwent() };
    let read = loop {
        Errno::clear();
        // SAFETY: no argument; the entry it returns is the C library's, valid until the
        // next call.
        let entry = unsafe { libc::getpwent() };
        if entry.is_null() {
            break matches!(Errno::last_raw(), 0 | libc::ENOENT);
        }
        // SAFETY: a non-null entry is valid until the next getpwent call.
        users.push(unsafe { ((*entry).pw_uid, (*entry).pw_gid) });
    };
    // SAFETY: ends the enumeration begun above.
    unsafe { libc::endpwent() };
    read.then_some(users)
}

/// `name (uid N)` for a user id.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => format!("{} (uid {uid})", u.name),
        _ => format!("uid {uid}"),
    }
}

/// `name (gid N)` for a group id.
pub fn group_name(gid: u32) -> String {
    match nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) {
        Ok(Some(g)) => format!("{} (gid {gid})", g.name),
        _ => format!("gid {gid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;
    const MINE: u32 = 1000; // my private group
    const TEAM: u32 = 2000; // a group with other members

    fn private(uid: u32, gid: u32) -> bool {
        (uid == ME && gid == MINE) || (uid == 0 && gid == 0)
    }

    fn e(uid: u32, gid: u32, mode: u32) -> Entry {
        Entry::new(uid, gid, mode)
    }

    fn first(x: Entry, role: Role) -> Option<Reason> {
        writer(x, role, ME, &private)
    }

    #[test]
    fn kinds_come_from_the_file_type_bits() {
        assert_eq!(e(ME, MINE, 0o40755).kind, Kind::Dir);
        assert_eq!(e(ME, MINE, 0o100644).kind, Kind::File);
        assert_eq!(e(ME, MINE, 0o120777).kind, Kind::Link);
        assert_eq!(e(ME, MINE, 0o40755).mode, 0o755);
    }

    #[test]
    fn trusted_entries() {
        let t = |uid, gid, mode| first(e(uid, gid, mode), Role::Trusted);
        assert_eq!(t(ME, MINE, 0o100644), None);
        assert_eq!(t(0, 0, 0o40755), None, "root's");
        assert_eq!(t(0, 0, 0o41777), None, "/tmp");
        assert_eq!(t(ME, TEAM, 0o41770), None, "my own sticky group directory");
        assert_eq!(t(ME, MINE, 0o100664), None, "my private group (umask 002)");
        assert_eq!(t(ME, MINE, 0o40775), None, "my private group's directory");
        assert_eq!(t(0, 0, 0o40775), None, "root's private group");
        assert_eq!(t(ME, TEAM, 0o100644), None, "a shared group without write");
        assert_eq!(t(1001, 1001, 0o100644), Some(Reason::Owner(1001)));
        assert_eq!(
            t(1001, 1001, 0o41777),
            Some(Reason::Owner(1001)),
            "sticky, but its owner moves entries"
        );
        assert_eq!(t(ME, MINE, 0o100666), Some(Reason::EveryUser));
        assert_eq!(t(ME, MINE, 0o40777), Some(Reason::EveryUserNoSticky));
        assert_eq!(t(ME, TEAM, 0o100664), Some(Reason::Group(TEAM)));
        assert_eq!(t(0, TEAM, 0o40775), Some(Reason::Group(TEAM)));
        assert_eq!(
            t(ME, TEAM, 0o42770),
            Some(Reason::Group(TEAM)),
            "setgid is not sticky"
        );
        assert_eq!(t(ME, MINE, 0o120777), None, "a link's mode means nothing");
        assert_eq!(t(1001, 1001, 0o120777), Some(Reason::Owner(1001)));
    }

    #[test]
    fn own_entries() {
        let o = |uid, gid, mode| first(e(uid, gid, mode), Role::Own);
        assert_eq!(o(ME, MINE, 0o100644), None);
        assert_eq!(o(ME, TEAM, 0o40750), None);
        assert_eq!(o(ME, MINE, 0o40770), None, "my private group (umask 002)");
        assert_eq!(o(ME, MINE, 0o100664), None);
        assert_eq!(
            o(0, 0, 0o100644),
            Some(Reason::Owner(0)),
            "root's is not mine"
        );
        assert_eq!(o(ME, TEAM, 0o100664), Some(Reason::Group(TEAM)));
        assert_eq!(o(ME, TEAM, 0o40770), Some(Reason::Group(TEAM)));
        assert_eq!(
            o(ME, MINE, 0o41777),
            Some(Reason::EveryUser),
            "the sticky bit lets others add entries"
        );
        assert_eq!(o(ME, MINE, 0o120777), None, "my link");
        assert_eq!(o(1001, 1001, 0o120777), Some(Reason::Owner(1001)));
    }

    #[test]
    fn every_way_in_order() {
        let all: Vec<Reason> =
            writers(e(1001, TEAM, 0o40777), Role::Trusted, ME, &private).collect();
        assert_eq!(
            all,
            [
                Reason::Owner(1001),
                Reason::EveryUserNoSticky,
                Reason::Group(TEAM)
            ]
        );
        let all: Vec<Reason> =
            writers(e(1001, TEAM, 0o41777), Role::Trusted, ME, &private).collect();
        assert_eq!(all, [Reason::Owner(1001)], "sticky: only the owner");
    }

    #[test]
    fn words_and_fixes() {
        assert_eq!(
            Reason::Owner(4_000_001).why(Names::Local),
            "belongs to uid 4000001, not to you"
        );
        assert_eq!(
            Reason::Group(7).why(Names::Ids),
            "is writable by its group gid 7, not its owner's private group"
        );
        assert_eq!(Reason::Owner(1).fix("/x"), None);
        assert_eq!(Reason::Group(7).fix("/x").unwrap(), "`chmod g-w /x`");
        assert_eq!(Reason::EveryUser.fix("/x").unwrap(), "`chmod o-w /x`");
        assert!(
            Reason::EveryUserNoSticky
                .fix("/x")
                .unwrap()
                .contains("`chmod +t /x`")
        );
        assert!(
            Reason::Link
                .fix("/x")
                .unwrap()
                .contains("remove the symbolic link /x")
        );
    }

    /// The bytes of an access ACL as Linux stores them: version 2, then (tag, perm, id).
    fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut b = 2u32.to_le_bytes().to_vec();
        for &(tag, perm, id) in entries {
            b.extend(tag.to_le_bytes());
            b.extend(perm.to_le_bytes());
            b.extend(id.to_le_bytes());
        }
        b
    }

    #[test]
    fn an_acl_write_grant_is_a_named_entry_the_mask_lets_write() {
        // tags: user_obj 1, user 2, group_obj 4, group 8, mask 0x10, other 0x20
        let (rw, r, none) = (6u16, 4u16, 0u32);
        let base = |named: (u16, u16, u32), mask: u16| {
            acl(&[
                (1, rw, none),
                named,
                (4, r, none),
                (0x10, mask, none),
                (0x20, r, none),
            ])
        };
        let w = |bytes: Vec<u8>| acl_writer(&bytes, ME, ME, &private);
        assert_eq!(w(base((2, rw, 1001), rw)), Some(Grantee::User(1001)));
        assert_eq!(w(base((8, rw, TEAM), rw)), Some(Grantee::Group(TEAM)));
        assert_eq!(w(base((2, rw, 1001), r)), None, "the mask takes write away");
        assert_eq!(w(base((2, r, 1001), rw)), None, "read only");
        assert_eq!(w(base((2, rw, ME), rw)), None, "the owner named");
        assert_eq!(w(base((8, rw, MINE), rw)), None, "my private group named");
        assert_eq!(
            acl_writer(&base((2, rw, ME), rw), 0, ME, &private),
            None,
            "root's file: me named"
        );
        assert_eq!(
            acl_writer(&base((2, rw, 1001), rw), 0, ME, &private),
            Some(Grantee::User(1001))
        );
        assert_eq!(
            w(acl(&[(1, rw, none), (4, r, none), (0x20, r, none)])),
            None
        );
        assert_eq!(w(vec![2, 0, 0, 0, 1]), None, "cut short");
        assert_eq!(w(vec![]), None);
        // the predicate: in either role, but not in a sticky trusted directory
        let granted = |mode| e(ME, MINE, mode).with_acl_writer(Some(Grantee::User(1001)));
        assert_eq!(
            first(granted(0o100664), Role::Own),
            Some(Reason::Acl(Grantee::User(1001)))
        );
        assert_eq!(
            first(granted(0o40770), Role::Trusted),
            Some(Reason::Acl(Grantee::User(1001)))
        );
        assert_eq!(first(granted(0o41770), Role::Trusted), None, "sticky");
        assert_eq!(
            Reason::Acl(Grantee::User(1001)).fix("/x").unwrap(),
            "`setfacl -x u:1001 /x`"
        );
        assert_eq!(
            Reason::Acl(Grantee::Group(7)).why(Names::Ids),
            "has an ACL that lets the group gid 7 write it"
        );
    }

    #[test]
    fn an_acl_as_getfacl_prints_it_is_read_as_the_kernels() {
        let w = |text: &str| acl_writer_in(&acl_entries_in_text(text), ME, ME, &private);
        let base = "user::rwx group::r-x other::r-x";
        assert_eq!(
            w(&format!("{base} user:1001:rwx mask::rwx")),
            Some(Grantee::User(1001))
        );
        assert_eq!(
            w(&format!("{base} group:{TEAM}:rw- mask::rwx")),
            Some(Grantee::Group(TEAM))
        );
        assert_eq!(
            w(&format!("{base} user:1001:rwx mask::r-x")),
            None,
            "masked"
        );
        assert_eq!(
            w(&format!("{base} user:1001:r-x mask::rwx")),
            None,
            "read only"
        );
        assert_eq!(w(&format!("{base} user:{ME}:rwx mask::rwx")), None, "me");
        assert_eq!(
            w(&format!("{base} group:{MINE}:rwx mask::rwx")),
            None,
            "private"
        );
        assert_eq!(w(base), None, "no named entry");
        assert_eq!(w("user:x:rwx mask::rwx"), None, "not an id");
    }

    #[test]
    fn this_machines_acls_are_read() {
        // A file without an ACL has no grant; with one (where `setfacl` and ACLs exist),
        // the grant is read through the path and through a descriptor.
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, "x").unwrap();
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(acl_writer_at(&f, false, me, me), None);
        let set = std::process::Command::new("setfacl")
            .args(["-m", "u:4000001:rw"])
            .arg(&f)
            .output();
        if !set.is_ok_and(|o| o.status.success()) {
            eprintln!("skipped the ACL half: no setfacl, or no ACLs here");
            return;
        }
        assert_eq!(
            acl_writer_at(&f, false, me, me),
            Some(Grantee::User(4_000_001))
        );
        let file = std::fs::File::open(&f).unwrap();
        use std::os::fd::AsFd;
        assert_eq!(
            acl_writer_fd(file.as_fd(), me, me),
            Some(Grantee::User(4_000_001))
        );
    }

    /// Every (uid, primary gid) of `/etc/passwd`, read as text: a source apart from the
    /// name service calls [`enumerate_users`] makes.
    fn passwd_file() -> Vec<(u32, u32)> {
        std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?))
            })
            .collect()
    }

    #[test]
    fn the_private_group_is_the_users_own_primary_group_without_members() {
        // An unknown user has no private group; root's group is private when it is named
        // root, lists no other member, and no other user has it as primary group.
        assert!(!private_group(4_000_001, 4_000_001));
        let root = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(0))
            .unwrap()
            .unwrap();
        let others_in_root = passwd_file().iter().any(|&(u, g)| g == 0 && u != 0);
        assert_eq!(
            private_group(0, 0),
            root.name == "root" && root.mem.iter().all(|m| m == "root") && !others_in_root
        );
    }

    #[test]
    fn another_users_primary_group_is_a_member() {
        let users = [(ME, MINE), (1001, TEAM), (1002, 1002), (ME, TEAM)];
        assert!(!another_primary(ME, MINE, Some(&users)), "mine alone");
        assert!(
            another_primary(ME, TEAM, Some(&users)),
            "1001's primary group, not listed as its member"
        );
        assert!(
            !another_primary(ME, MINE, Some(&[(ME, MINE), (ME, MINE)])),
            "a second name for my uid is me"
        );
        assert!(
            another_primary(ME, MINE, None),
            "a user database not read to its end"
        );
    }

    #[test]
    fn the_user_database_is_read_to_its_end() {
        // Every entry of /etc/passwd is among those the name service gives (it reads
        // `files` first on the machines this runs on). The file is read first: users are
        // added, never removed, while tests run.
        let file = passwd_file();
        // through the process's one enumeration: the C library's enumeration state is
        // global, and tests run in threads
        let users = primary_groups().expect("the user database is readable");
        for entry in file {
            assert!(users.contains(&entry), "{entry:?} missing from {users:?}");
        }
    }
}

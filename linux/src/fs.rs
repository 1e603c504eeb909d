//! Opening files beneath a directory, with no way out of it: `openat2(2)` with
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` (Linux 5.6 or later).
//!
//! A path is checked and opened by the kernel in one lookup, relative to a directory file
//! descriptor, so nothing can be swapped in between: a directory along the path replaced
//! by a symlink out of the tree (`renameat2(RENAME_EXCHANGE)`) makes the open fail, where
//! "canonicalize, compare the prefix, then open by name" would follow it.
//!
//! ```
//! use keel_linux::fs::{open_beneath, open_dir, Access};
//! use std::path::Path;
//! # fn main() -> std::io::Result<()> {
//! let dir = open_dir(Path::new("/etc"))?;
//! // `..` climbs out of the directory: refused, whether or not the file exists.
//! let err = open_beneath(&dir, Path::new("../etc/hostname"), Access::Read).unwrap_err();
//! assert_eq!(err.raw_os_error(), Some(libc::EXDEV));
//! // So is an absolute path.
//! assert!(open_beneath(&dir, Path::new("/etc/hostname"), Access::Path).is_err());
//! # Ok(()) }
//! ```

use crate::err;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// What [`open_beneath`] opens a file for. Every descriptor it returns is `O_CLOEXEC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `O_PATH`: a handle on the file that does not open the file itself (no device
    /// driver `open`, no wait for a FIFO's writer) and needs no read permission on it.
    /// Good for `fstat` and as the directory of a further [`open_beneath`]; `read` and
    /// `sendfile` on it fail with `EBADF`.
    Path,
    /// `O_RDONLY | O_NONBLOCK | O_NOCTTY`: for reading. `O_NONBLOCK` keeps a FIFO from
    /// blocking the open until a writer comes; `O_NOCTTY`, a terminal from becoming the
    /// controlling one. Reads of regular files ignore `O_NONBLOCK`.
    Read,
}

/// Opens the directory at `path` as a handle for [`open_beneath`]:
/// `open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)`. Symlinks along `path` are followed.
///
/// # Errors
/// The errors of `open(2)`: `ENOENT` (missing), `ENOTDIR` ([`io::ErrorKind::NotADirectory`],
/// `path` or a component of it is not a directory), `EACCES` (a component not searchable),
/// `ELOOP`, ...
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(err)
}

/// Opens `path` relative to the directory `dir` without ever leaving `dir`:
/// `openat2(dir, path, {flags, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS})`, with the
/// flags of `access` and `O_CLOEXEC`.
///
/// Symlinks are followed, the last component's too, as long as resolving them stays
/// beneath `dir` (a relative symlink such as `a -> ../b/c` inside the tree works).
/// Refused, by the kernel, in the same lookup that opens the file:
///
/// - an absolute `path`, and any absolute symlink met on the way, even one pointing back
///   inside `dir` (`EXDEV`);
/// - `..` components, in `path` or in a symlink, that climb above `dir` (`EXDEV`);
/// - "magic links" such as `/proc/self/fd/N` (`ELOOP`).
///
/// Mount points beneath `dir` are crossed.
///
/// # Errors
/// The errors of `openat2(2)`, among them:
///
/// - `EXDEV` or `ELOOP`: the path would leave `dir` (see above), or too many symlinks;
/// - `ENOENT`, `ENOTDIR`, `EACCES`, `ENAMETOOLONG`, `ENXIO` (a socket, with
///   [`Access::Read`]) as for `open(2)`;
/// - `EAGAIN` ([`io::ErrorKind::WouldBlock`]): a rename or a mount raced with a `..`
///   component and the kernel could not prove the lookup stayed beneath `dir`; the caller
///   may retry;
/// - `ENOSYS` ([`io::ErrorKind::Unsupported`]): a kernel before Linux 5.6 (or a seccomp
///   filter that hides `openat2`). There is no fallback: `openat` by name cannot give the
///   same guarantee.
pub fn open_beneath(dir: impl AsFd, path: &Path, access: Access) -> io::Result<OwnedFd> {
    let flags = match access {
        Access::Path => OFlags::PATH,
        Access::Read => OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
    };
    rustix::fs::openat2(
        dir,
        path,
        flags | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(err)
}

/// What tells one version of a file from another: its identity (device and inode), its
/// type, size, and modification and change times (the change time moves with its
/// permissions and links too). Two equal stamps taken at different times mean, for every
/// purpose a file server has, the same unchanged file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    /// The device (`st_dev`, as `makedev` encodes it).
    pub dev: u64,
    /// The inode number.
    pub ino: u64,
    /// Whether it is a regular file.
    pub is_file: bool,
    /// The size in bytes.
    pub size: u64,
    /// The modification time: seconds since the epoch, nanoseconds.
    pub mtime: (i64, u32),
    /// The status change time: seconds since the epoch, nanoseconds.
    pub ctime: (i64, u32),
}

impl FileStamp {
    /// The stamp of `meta` (from `fstat` or `stat`, as `std` gives it).
    pub fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            is_file: meta.is_file(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec() as u32),
            ctime: (meta.ctime(), meta.ctime_nsec() as u32),
        }
    }
}

/// The [`FileStamp`] of what `path` leads to from `dir`, by one `statx(2)` that follows
/// symlinks and triggers no automount. Unlike [`open_beneath`], the lookup is *not* kept
/// beneath `dir`: use the stamp only to tell whether `path` still leads to a file opened
/// before (beneath `dir`) and unchanged since, never to decide what may be opened.
///
/// # Errors
/// The errors of `statx(2)`: `ENOENT`, `ENOTDIR`, `EACCES`, `ELOOP`, ...
pub fn stamp_at(dir: impl AsFd, path: &Path) -> io::Result<FileStamp> {
    use rustix::fs::{AtFlags, FileType, StatxFlags};
    let st = rustix::fs::statx(dir, path, AtFlags::NO_AUTOMOUNT, StatxFlags::BASIC_STATS)
        .map_err(err)?;
    Ok(FileStamp {
        dev: rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
        ino: st.stx_ino,
        is_file: FileType::from_raw_mode(u32::from(st.stx_mode)) == FileType::RegularFile,
        size: st.stx_size,
        mtime: (st.stx_mtime.tv_sec, st.stx_mtime.tv_nsec),
        ctime: (st.stx_ctime.tv_sec, st.stx_ctime.tv_nsec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    /// `base/{outside, root/{file, sub/file, in -> sub/file, up -> ../file, out -> ../outside,
    /// abs -> <absolute path of root/file>}}`, removed when dropped.
    struct Tree(PathBuf);

    impl Tree {
        fn new(tag: &str) -> Tree {
            let base = std::env::temp_dir().join(format!(
                "keel-linux-fs-{tag}-{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos()
            ));
            let root = base.join("root");
            std::fs::create_dir_all(root.join("sub")).unwrap();
            std::fs::write(base.join("outside"), b"outside").unwrap();
            std::fs::write(root.join("file"), b"file").unwrap();
            std::fs::write(root.join("sub/file"), b"sub/file").unwrap();
            symlink("sub/file", root.join("in")).unwrap();
            symlink("../file", root.join("sub/up")).unwrap();
            symlink("../outside", root.join("out")).unwrap();
            symlink(root.join("file"), root.join("abs")).unwrap();
            Tree(base)
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn read(dir: &OwnedFd, path: &str) -> io::Result<String> {
        let mut s = String::new();
        std::fs::File::from(open_beneath(dir, Path::new(path), Access::Read)?)
            .read_to_string(&mut s)?;
        Ok(s)
    }

    #[test]
    fn symlinks_inside_are_followed_and_ways_out_refused() {
        let tree = Tree::new("beneath");
        let dir = open_dir(&tree.0.join("root")).unwrap();
        assert_eq!(read(&dir, "file").unwrap(), "file");
        assert_eq!(read(&dir, "sub/file").unwrap(), "sub/file");
        assert_eq!(read(&dir, "in").unwrap(), "sub/file");
        assert_eq!(read(&dir, "sub/up").unwrap(), "file");
        for way_out in ["out", "../outside", "sub/../../outside", "abs"] {
            let e = read(&dir, way_out).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{way_out}: {e}");
        }
        let abs = tree.0.join("root/file");
        let e = open_beneath(&dir, &abs, Access::Path).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EXDEV));
        let e = read(&dir, "missing").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_path_handle_serves_as_the_next_directory() {
        let tree = Tree::new("handle");
        let dir = open_dir(&tree.0.join("root")).unwrap();
        let sub = open_beneath(&dir, Path::new("sub"), Access::Path).unwrap();
        assert_eq!(read(&sub, "file").unwrap(), "sub/file");
        // Beneath `sub` now: `../file` leaves it.
        let e = read(&sub, "up").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EXDEV));
        let e = open_dir(&tree.0.join("root/file")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotADirectory);
    }

    /// A stamp taken by name equals the stamp of the file opened there, and moves when
    /// the file is written or replaced.
    #[test]
    fn a_stamp_by_name_matches_the_open_file_until_it_changes() {
        let t = Tree::new("stamp");
        let dir = open_dir(&t.0.join("root")).unwrap();
        let f = std::fs::File::from(open_beneath(&dir, Path::new("in"), Access::Read).unwrap());
        let opened = FileStamp::of(&f.metadata().unwrap());
        assert!(opened.is_file);
        assert_eq!(stamp_at(&dir, Path::new("in")).unwrap(), opened);
        assert_eq!(stamp_at(&dir, Path::new("sub/file")).unwrap(), opened);
        assert!(!stamp_at(&dir, Path::new("sub")).unwrap().is_file);
        std::fs::write(t.0.join("root/sub/file"), b"sub/file, longer").unwrap();
        assert_ne!(stamp_at(&dir, Path::new("in")).unwrap(), opened);
        let missing = stamp_at(&dir, Path::new("nope")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
    }
}

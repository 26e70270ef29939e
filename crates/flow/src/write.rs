//! A file written whole or not at all.
//!
//! Weft writes a person's files (flows, pins, the app's settings) by writing a new file beside
//! the old one and renaming it over: a reader, a crash or a full disk mid-write sees the old
//! file or the new one, never an empty or half-written one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Who may read the file written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// As the file was (its permissions are kept); a new file as the process's umask allows.
    AsBefore,
    /// Its owner only (a file that holds keys), whatever it was before.
    OwnerOnly,
}

/// How many links to follow before calling a chain of symlinks a loop (as the kernel's limit).
const MAX_LINKS: usize = 40;

/// Replaces the file at `path` with `bytes`, atomically.
///
/// A symlink is followed: its target is replaced and the link stays. The file keeps its owner
/// and group where this process may give them. A read-only file is refused, as writing it in
/// place would be, and so is anything but a regular file (a folder, or a device or pipe a link
/// points at, which a rename would replace). The new content is on disk before it takes the old
/// one's name.
pub fn replace_file(path: &Path, bytes: &[u8], access: Access) -> std::io::Result<()> {
    let target = follow_links(path)?;
    let before = match std::fs::metadata(&target) {
        Ok(metadata) => Some(metadata),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(error),
    };
    if let Some(metadata) = &before {
        if !metadata.is_file() {
            return Err(crate::read::not_regular(metadata));
        }
        if metadata.permissions().readonly() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                "the file is read-only",
            ));
        }
    }
    // Made readable by its owner only until it has the permissions it is to have, so no one
    // else opens it in between and reads what is written next.
    let owner_only_at_first = access == Access::OwnerOnly || before.is_some();
    let (staged, mut file) = create_beside(&target, owner_only_at_first)?;
    let written = (|| {
        #[cfg(unix)]
        if let Some(metadata) = &before {
            keep_owner(&file, metadata);
        }
        if let (Access::AsBefore, Some(metadata)) = (access, &before) {
            file.set_permissions(metadata.permissions())?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&staged, &target)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&staged);
        return written;
    }
    sync_folder(&target);
    Ok(())
}

/// Gives the new file the old one's owner and group where this process may: as root, so that
/// a flow saved by `sudo weft fmt` stays its owner's and editable by them; a group the saver
/// belongs to, so that a file of a shared folder keeps its group. Where it may not, the file
/// becomes the saver's, as an editor's safe save makes it. Before the permissions are set: a
/// change of owner may clear some of them.
#[cfg(unix)]
fn keep_owner(file: &std::fs::File, before: &std::fs::Metadata) {
    use std::os::unix::fs::{MetadataExt, fchown};
    let Ok(now) = file.metadata() else {
        return;
    };
    if (now.uid(), now.gid()) == (before.uid(), before.gid()) {
        return;
    }
    if fchown(file, Some(before.uid()), Some(before.gid())).is_err() {
        let _ = fchown(file, None, Some(before.gid()));
    }
}

/// The file a chain of symlinks ends at (which may not exist yet).
fn follow_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(folder) => folder.join(link),
                    None => link,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(std::io::Error::other(format!(
        "more than {MAX_LINKS} symlinks in a row"
    )))
}

/// A new file in the target's folder (a rename only replaces atomically within one file
/// system), named so that two writers never share it.
fn create_beside(target: &Path, owner_only: bool) -> std::io::Result<(PathBuf, std::fs::File)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = target
        .file_name()
        .ok_or_else(|| std::io::Error::other("not a file name"))?
        .to_string_lossy();
    loop {
        let staged = target.with_file_name(format!(
            ".{name}.{}-{}.weft-new",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if owner_only {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = owner_only;
        match options.open(&staged) {
            Ok(file) => return Ok((staged, file)),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
}

/// Makes the rename itself durable. Best effort: some file systems cannot sync a folder, and the
/// file is already whole under one name or the other.
fn sync_folder(target: &Path) {
    #[cfg(unix)]
    if let Some(folder) = target.parent() {
        let folder = if folder.as_os_str().is_empty() {
            Path::new(".")
        } else {
            folder
        };
        if let Ok(handle) = std::fs::File::open(folder) {
            let _ = handle.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = target;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(folder: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(folder)
            .expect("list")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_reader_sees_the_old_file_or_the_new_one_never_part_of_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("flow.json");
        let old = "a".repeat(256 * 1024);
        let new = "b".repeat(256 * 1024);
        replace_file(&path, old.as_bytes(), Access::AsBefore).expect("first write");
        let reading = {
            let path = path.clone();
            let (old, new) = (old.clone(), new.clone());
            std::thread::spawn(move || {
                for _ in 0..400 {
                    let text = std::fs::read_to_string(&path).expect("read");
                    assert!(
                        text == old || text == new,
                        "a reader saw {} bytes of a file being written",
                        text.len()
                    );
                }
            })
        };
        for round in 0..200 {
            let text = if round % 2 == 0 { &new } else { &old };
            replace_file(&path, text.as_bytes(), Access::AsBefore).expect("write");
        }
        reading.join().expect("the reader saw only whole files");
        assert_eq!(entries(dir.path()), ["flow.json"], "no staged file left");
    }

    #[cfg(unix)]
    #[test]
    fn the_files_permissions_are_kept_and_a_private_file_stays_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = dir.path().join("flow.json");
        std::fs::write(&shared, "{}").expect("write");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).expect("mode");
        replace_file(&shared, b"{\"nodes\": []}", Access::AsBefore).expect("replace");
        let mode = std::fs::metadata(&shared)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        assert_eq!(
            std::fs::read_to_string(&shared).expect("read"),
            "{\"nodes\": []}"
        );

        let private = dir.path().join("settings.json");
        std::fs::write(&private, "{}").expect("write");
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o644)).expect("mode");
        replace_file(&private, b"{\"key\": 1}", Access::OwnerOnly).expect("replace");
        let mode = std::fs::metadata(&private)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_keeps_its_owner_and_group_when_the_saver_may_give_them() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("flow.json");
        std::fs::write(&path, "{}").expect("write");
        // Only root may give a file to another user: elsewhere there is nothing to show.
        if std::os::unix::fs::chown(&path, Some(12345), Some(12345)).is_err() {
            eprintln!("skipped: this process may not give a file to another user");
            return;
        }
        replace_file(&path, b"{\"nodes\": []}", Access::AsBefore).expect("replace");
        let metadata = std::fs::metadata(&path).expect("stat");
        assert_eq!((metadata.uid(), metadata.gid()), (12345, 12345));
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "{\"nodes\": []}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_stays_and_its_target_is_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("flows")).expect("folder");
        let target = dir.path().join("flows").join("real.json");
        std::fs::write(&target, "old").expect("write");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("flows/real.json", &link).expect("symlink");
        replace_file(&link, b"new", Access::AsBefore).expect("replace");
        assert!(
            std::fs::symlink_metadata(&link)
                .expect("stat")
                .file_type()
                .is_symlink(),
            "the link is still a link"
        );
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "new");
        assert_eq!(entries(&dir.path().join("flows")), ["real.json"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_read_only_file_a_folder_or_a_device_is_refused_and_left_as_it_was() {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let dir = tempfile::tempdir().expect("tempdir");
        let locked = dir.path().join("locked.json");
        std::fs::write(&locked, "kept").expect("write");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o444)).expect("mode");
        let error = replace_file(&locked, b"lost", Access::AsBefore).expect_err("refused");
        assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(std::fs::read_to_string(&locked).expect("read"), "kept");

        let folder = dir.path().join("folder.json");
        std::fs::create_dir(&folder).expect("folder");
        let error = replace_file(&folder, b"x", Access::AsBefore).expect_err("refused");
        assert_eq!(error.to_string(), "not a regular file but a directory");
        assert_eq!(entries(dir.path()), ["folder.json", "locked.json"]);

        // A pins file linked to a device: the device is not replaced by a file.
        let linked = dir.path().join("linked.pins.json");
        std::os::unix::fs::symlink("/dev/null", &linked).expect("symlink");
        let error = replace_file(&linked, b"{}", Access::AsBefore).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "not a regular file but a character device"
        );
        assert!(
            std::fs::metadata("/dev/null")
                .expect("stat")
                .file_type()
                .is_char_device(),
            "/dev/null is still a device"
        );
    }

    #[test]
    fn a_new_file_is_made() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("new.json");
        replace_file(&path, b"{}", Access::AsBefore).expect("write");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "{}");
        assert_eq!(entries(dir.path()), ["new.json"]);
    }
}

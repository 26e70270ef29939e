//! Reading a file a person hands Weft — a flow, a pins file, a tests file and its datasets, a
//! price table (`WEFT_PRICES`), a recording — whole, but only a regular file (a symlink to one is
//! fine) and only up to a limit: a named pipe never blocks Weft and a device such as `/dev/zero`
//! is never read until memory runs out.
//!
//! Every problem is an [`std::io::Error`] whose message says what is wrong (`not a regular file
//! but a named pipe (FIFO)`, `larger than 32 MiB, the most Weft reads of such a file`, `not UTF-8
//! text`), so that each kind of file keeps its own error type, which names the file.

use std::fs::{File, Metadata};
use std::io::{self, Read as _};
use std::path::Path;

/// The most Weft reads of a file handed to it: a flow with thousands of nodes, or a dataset of
/// tens of thousands of rows, is a few MiB.
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// The bytes of the file at `path`, when it is a regular file (or a symlink to one) of at most
/// `limit` bytes. A named pipe is opened without waiting for a writer and refused, as are
/// devices, sockets and directories; a file larger than `limit` is refused before it is read
/// (or, when its size is not known in advance, as soon as `limit` bytes have come).
///
/// The errors: what the system said (the kind [`io::ErrorKind::NotFound`] for a missing file),
/// [`io::ErrorKind::InvalidInput`] for a file that is not a regular file, and
/// [`io::ErrorKind::FileTooLarge`] for one over `limit`.
pub fn read_file(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let (file, metadata) = open_regular(path)?;
    let size = metadata.len();
    if size > limit {
        return Err(too_large(limit));
    }
    // Sized from the start: a large file is not read through a buffer grown step by step. The
    // size is a hint (a file can grow while it is read, a file in /proc says 0): `take` bounds it.
    let mut bytes = Vec::with_capacity(size.min(MAX_FILE_BYTES) as usize + 1);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

/// [`read_file`], as UTF-8 text (else an error of the kind [`io::ErrorKind::InvalidData`]).
pub fn read_text_file(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_file(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// The file at `path`, open for reading, and what it is, when it is a regular file.
fn open_regular(path: &Path) -> io::Result<(File, Metadata)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // A FIFO opened for reading waits for a writer, forever if none comes; without waiting, it
    // opens at once and is refused below. A regular file reads the same either way.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = match options.open(path) {
        Ok(file) => file,
        Err(error) => {
            // A socket cannot be opened at all (and a directory not everywhere): say what it is
            // rather than what the system answered.
            return Err(match std::fs::metadata(path) {
                Ok(metadata) if !metadata.is_file() => not_regular(&metadata),
                _ => error,
            });
        }
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(not_regular(&metadata));
    }
    Ok((file, metadata))
}

pub(crate) fn not_regular(metadata: &Metadata) -> io::Error {
    let file_type = metadata.file_type();
    let what = if file_type.is_dir() {
        "a directory"
    } else {
        other_kind(&file_type)
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file but {what}"),
    )
}

#[cfg(unix)]
fn other_kind(file_type: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if file_type.is_fifo() {
        "a named pipe (FIFO)"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "something else"
    }
}

#[cfg(not(unix))]
fn other_kind(_: &std::fs::FileType) -> &'static str {
    "something else"
}

fn too_large(limit: u64) -> io::Error {
    const MIB: u64 = 1024 * 1024;
    let limit = if limit >= MIB && limit.is_multiple_of(MIB) {
        format!("{} MiB", limit / MIB)
    } else {
        format!("{limit} bytes")
    };
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("larger than {limit}, the most Weft reads of such a file"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::{Duration, Instant};

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().expect("temp dir")
    }

    #[test]
    fn a_regular_file_and_a_symlink_to_one_read_whole() {
        let dir = dir();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "{\"a\": 1}").expect("write");
        assert_eq!(
            read_text_file(&path, MAX_FILE_BYTES).expect("reads"),
            "{\"a\": 1}"
        );
        assert_eq!(
            read_file(&path, 8).expect("exactly the limit"),
            b"{\"a\": 1}"
        );
        #[cfg(unix)]
        {
            let link = dir.path().join("link.json");
            std::os::unix::fs::symlink(&path, &link).expect("symlink");
            assert_eq!(
                read_text_file(&link, MAX_FILE_BYTES).expect("reads"),
                "{\"a\": 1}"
            );
        }
        let empty = dir.path().join("empty.json");
        std::fs::write(&empty, "").expect("write");
        assert_eq!(read_file(&empty, MAX_FILE_BYTES).expect("reads"), b"");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_before_it_is_read() {
        let dir = dir();
        let path = dir.path().join("big.json");
        std::fs::write(&path, "123456789").expect("write");
        let error = read_file(&path, 8).expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            error.to_string(),
            "larger than 8 bytes, the most Weft reads of such a file"
        );
        // Sparse: 1 GiB that takes no disk, refused by its size without reading it.
        let sparse = dir.path().join("sparse.json");
        File::create(&sparse)
            .and_then(|file| file.set_len(1024 * 1024 * 1024))
            .expect("sparse file");
        let started = Instant::now();
        let error = read_file(&sparse, MAX_FILE_BYTES).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "larger than 32 MiB, the most Weft reads of such a file"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn missing_and_non_text_files_say_so() {
        let dir = dir();
        let error =
            read_file(&dir.path().join("missing.json"), MAX_FILE_BYTES).expect_err("missing");
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        let binary = dir.path().join("binary.json");
        std::fs::write(&binary, [0xff, 0xfe, 0x00]).expect("write");
        let error = read_text_file(&binary, MAX_FILE_BYTES).expect_err("not text");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert_eq!(error.to_string(), "not UTF-8 text");
    }

    #[test]
    fn a_directory_is_not_a_file() {
        let dir = dir();
        let error = read_file(dir.path(), MAX_FILE_BYTES).expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(error.to_string(), "not a regular file but a directory");
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_refused_without_reading_them() {
        let dir = dir();
        for device in ["/dev/zero", "/dev/null", "/dev/urandom"] {
            let error = read_file(Path::new(device), MAX_FILE_BYTES).expect_err(device);
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{device}");
            assert_eq!(
                error.to_string(),
                "not a regular file but a character device",
                "{device}"
            );
        }
        let link = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
        let error = read_file(&link, MAX_FILE_BYTES).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "not a regular file but a character device"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_refused_at_once_without_a_writer() {
        let dir = dir();
        let fifo = dir.path().join("pipe.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        // On a thread: if the open blocked, the test would fail by its deadline, not hang.
        let (sender, receiver) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = sender.send(read_file(&path, MAX_FILE_BYTES).map_err(|e| e.to_string()));
        });
        let answer = receiver
            .recv_timeout(Duration::from_secs(10))
            .expect("answered without waiting for a writer");
        assert_eq!(
            answer.expect_err("refused"),
            "not a regular file but a named pipe (FIFO)"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_socket_is_refused_by_what_it_is() {
        let dir = dir();
        let path = dir.path().join("sock.json");
        let _listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let error = read_file(&path, MAX_FILE_BYTES).expect_err("refused");
        assert_eq!(error.to_string(), "not a regular file but a socket");
    }
}

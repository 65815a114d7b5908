//! The `file` scenario: a JSON file read from disk on every lookup.
//!
//! The `file` rung of the benchmark ladder (nth < cache < file < db) measures a request that
//! does real, synchronous file I/O: [`MessageFile::get`] opens `messages.json`, reads it whole,
//! parses the JSON array and scans for the id — **on every call, with no caching**. That is the
//! scenario (as in jksoa-benchmark's `getMessageFromFile`); caching here would turn it into the
//! `cache` scenario. It uses `std::fs` on purpose: the point is to block the calling thread, so
//! the benchmark shows what happens when a handler blocks an I/O thread or a worker thread.
//!
//! [`MessageFile::open`] writes the file with the 10 seed records when it is missing (creating
//! parent directories), via a temporary file and a rename so that a concurrent reader never sees
//! a half-written file. An existing file is left untouched (so it can be edited to try other
//! payloads) but is parsed once, so a corrupt file fails the server start with the path named
//! rather than failing every request.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::error::StoreError;
use crate::store::message::{seed_messages, Message};

/// Conventional file name inside the data directory.
pub const MESSAGE_FILE_NAME: &str = "messages.json";

/// A JSON array of messages on disk, re-read on every [`get`](MessageFile::get).
#[derive(Debug, Clone)]
pub struct MessageFile {
    path: PathBuf,
}

impl MessageFile {
    /// Uses the JSON file at `path` (usually `<data_dir>/messages.json`), writing the 10 seed
    /// records there first when it does not exist. An existing file is not rewritten, only
    /// checked to parse.
    pub fn open(path: impl Into<PathBuf>) -> Result<MessageFile, StoreError> {
        let path = path.into();
        match fs::metadata(&path) {
            Ok(_) => {
                read_messages(&path)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => write_seed_file(&path)?,
            Err(source) => {
                return Err(StoreError::FileIo {
                    path,
                    action: "inspect the message file",
                    source,
                })
            }
        }
        tracing::debug!(path = %path.display(), "benchmark message file ready");
        Ok(MessageFile { path })
    }

    /// The file this store reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads and parses the whole file (every call — no caching), then returns the record with
    /// `id` or [`StoreError::NotFound`]. Blocks the calling thread on disk I/O.
    pub fn get(&self, id: i64) -> Result<Message, StoreError> {
        read_messages(&self.path)?
            .into_iter()
            .find(|m| m.id == id)
            .ok_or(StoreError::NotFound(id))
    }
}

fn read_messages(path: &Path) -> Result<Vec<Message>, StoreError> {
    let bytes = fs::read(path).map_err(|source| StoreError::FileIo {
        path: path.to_path_buf(),
        action: "read the message file",
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| StoreError::FileCorrupt {
        path: path.to_path_buf(),
        source,
    })
}

fn write_seed_file(path: &Path) -> Result<(), StoreError> {
    let io_err = |action: &'static str| {
        move |source| StoreError::FileIo {
            path: path.to_path_buf(),
            action,
            source,
        }
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_err("create the directory for the message file"))?;
    }
    let mut json =
        serde_json::to_vec_pretty(&seed_messages()).map_err(|source| StoreError::FileCorrupt {
            path: path.to_path_buf(),
            source,
        })?;
    json.push(b'\n');

    // Write beside the target and rename, so readers see either no file or the whole file.
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut tmp_name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    tmp_name.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&json)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(io_err("write the message file"))?;
    tracing::info!(path = %path.display(), "wrote benchmark message file with 10 seed records");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::message::{MAX_ID, MIN_ID};
    use crate::store::test_util::TempDir;

    #[test]
    fn created_with_parent_dirs_when_missing() {
        let dir = TempDir::new("file-create");
        let path = dir.path().join("a/b").join(MESSAGE_FILE_NAME);
        let file = MessageFile::open(&path).unwrap();
        assert_eq!(file.path(), path);
        let on_disk: Vec<Message> = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk, seed_messages());
        for id in MIN_ID..=MAX_ID {
            assert_eq!(file.get(id).unwrap(), Message::seed(id));
        }
        assert!(matches!(file.get(11), Err(StoreError::NotFound(11))));
        // no temporary file left behind
        assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    }

    #[test]
    fn existing_file_is_not_rewritten() {
        let dir = TempDir::new("file-existing");
        let path = dir.path().join(MESSAGE_FILE_NAME);
        // a valid file with different content and formatting than the seed
        let custom = vec![Message {
            id: 1,
            from_uid: 7,
            to_uid: 8,
            content: "custom".into(),
        }];
        let text = serde_json::to_string(&custom).unwrap();
        fs::write(&path, &text).unwrap();
        let mtime = fs::metadata(&path).unwrap().modified().unwrap();

        let file = MessageFile::open(&path).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), mtime);
        assert_eq!(file.get(1).unwrap(), custom[0]);
        assert!(file.get(2).unwrap_err().is_not_found());

        // reopening a seeded file also leaves it alone
        let seeded = dir.path().join("seeded.json");
        MessageFile::open(&seeded).unwrap();
        let before = fs::read(&seeded).unwrap();
        let mtime = fs::metadata(&seeded).unwrap().modified().unwrap();
        MessageFile::open(&seeded).unwrap();
        assert_eq!(fs::read(&seeded).unwrap(), before);
        assert_eq!(fs::metadata(&seeded).unwrap().modified().unwrap(), mtime);
    }

    #[test]
    fn every_get_reads_the_disk() {
        let dir = TempDir::new("file-nocache");
        let path = dir.path().join(MESSAGE_FILE_NAME);
        let file = MessageFile::open(&path).unwrap();
        assert_eq!(file.get(3).unwrap(), Message::seed(3));

        let mut changed = seed_messages();
        changed[2].content = "changed on disk".into();
        fs::write(&path, serde_json::to_vec(&changed).unwrap()).unwrap();
        assert_eq!(file.get(3).unwrap().content, "changed on disk");

        fs::remove_file(&path).unwrap();
        let err = file.get(3).unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::FileIo {
                    action: "read the message file",
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn corrupt_file_is_a_clear_error_naming_the_path() {
        let dir = TempDir::new("file-corrupt");
        let path = dir.path().join(MESSAGE_FILE_NAME);

        // corrupt before open: open fails, naming the path
        fs::write(&path, b"[{\"id\": 1, \"from_uid\": ").unwrap();
        let err = MessageFile::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::FileCorrupt { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("delete it"), "{msg}");

        // corrupt after open: get fails the same way
        fs::remove_file(&path).unwrap();
        let file = MessageFile::open(&path).unwrap();
        fs::write(&path, b"{\"not\": \"an array\"}").unwrap();
        let err = file.get(1).unwrap_err();
        assert!(matches!(err, StoreError::FileCorrupt { .. }), "{err}");
        assert!(err.to_string().contains(&path.display().to_string()));
    }

    #[test]
    fn open_on_unwritable_location_names_the_path() {
        let dir = TempDir::new("file-unwritable");
        // a regular file where a directory is needed
        let blocker = dir.path().join("blocker");
        fs::write(&blocker, b"x").unwrap();
        let path = blocker.join(MESSAGE_FILE_NAME);
        let err = MessageFile::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::FileIo { .. }), "{err}");
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }
}

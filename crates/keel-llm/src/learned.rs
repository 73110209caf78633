//! What Keel learned about a model server, remembered per base URL and model so the next run
//! starts right: whether streamed replies work, whether tool results must be sent as user
//! messages (a chat template that drops `role: tool`), the context window the server enforces,
//! and whether the template drops the tools.
//!
//! The facts live in `servers.json` in the user's Keel data directory (`$KEEL_HOME`, never a
//! path from a repository's configuration). The file is small (at most [`MAX_SERVERS`]
//! entries), versioned, and read tolerantly: a missing file is no facts, an unreadable,
//! oversized, malformed or newer-version file is ignored with a notice (never a crash, and a
//! newer file is never overwritten). A fact older than [`RELEARN_AFTER`] is not applied, so a
//! server that changed behaviour (a streamed reply now works, a larger window) is learned again;
//! `keel doctor --ping` re-learns at once.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The file's format version.
pub const VERSION: u32 = 1;
/// The file's name in the Keel data directory.
pub const FILE_NAME: &str = "servers.json";
/// Servers kept; the least recently learned are dropped beyond this.
pub const MAX_SERVERS: usize = 64;
/// A fact older than this is tested again instead of applied.
pub const RELEARN_AFTER: Duration = Duration::from_secs(24 * 3600);
/// Files larger than this are not read.
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// One learned value and when it was learned (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact<T> {
    pub value: T,
    pub learned_at: u64,
}

/// Everything learned about one server + model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Facts {
    /// Whether streamed replies end properly (false: the stream ends before a finish reason, so
    /// replies are requested whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<Fact<bool>>,
    /// Whether tool results must be sent as user messages (the template drops `role: tool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_results_as_user: Option<Fact<bool>>,
    /// The context window the server enforces, in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<Fact<u64>>,
    /// Whether the server's template leaves the tool schemas out of the prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_dropped: Option<Fact<bool>>,
    /// How many of the server's prompt tokens one of Keel's estimated tokens made at most, in
    /// thousandths (its tokenizer may cut finer than Keel's four bytes a token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_mille: Option<Fact<u64>>,
}

impl Facts {
    fn newest(&self) -> u64 {
        [
            self.streams.map(|f| f.learned_at),
            self.tool_results_as_user.map(|f| f.learned_at),
            self.context_window.map(|f| f.learned_at),
            self.tools_dropped.map(|f| f.learned_at),
            self.tokens_per_mille.map(|f| f.learned_at),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
    }

    /// The facts still fresh at `now` (older ones are left out, to be learned again).
    pub fn fresh(&self, now: u64) -> Facts {
        let limit = RELEARN_AFTER.as_secs();
        fn keep<T: Copy>(f: Option<Fact<T>>, now: u64, limit: u64) -> Option<Fact<T>> {
            f.filter(|f| now.saturating_sub(f.learned_at) < limit && f.learned_at <= now + 60)
        }
        Facts {
            streams: keep(self.streams, now, limit),
            tool_results_as_user: keep(self.tool_results_as_user, now, limit),
            context_window: keep(self.context_window, now, limit),
            tools_dropped: keep(self.tools_dropped, now, limit),
            tokens_per_mille: keep(self.tokens_per_mille, now, limit),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    #[serde(default)]
    servers: BTreeMap<String, Facts>,
}

/// The seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The key of a server + model in the file.
pub fn key(base_url: &str, model: &str) -> String {
    format!("{} {model}", base_url.trim_end_matches('/'))
}

/// The learned facts of one server + model, backed by the file (or by nothing, in tests and
/// for providers without a data directory).
#[derive(Debug)]
pub struct ServerMemory {
    path: Option<PathBuf>,
    key: String,
    facts: Mutex<Facts>,
    /// Notices for the user (a bad file), delivered once with the next reply.
    notices: Mutex<Vec<String>>,
}

impl ServerMemory {
    /// The memory of `base_url` + `model` in `dir/servers.json` (`None`: remember for this
    /// process only). Reads the file once; facts past [`RELEARN_AFTER`] are dropped.
    pub fn open(dir: Option<&Path>, base_url: &str, model: &str) -> Self {
        let key = key(base_url, model);
        let path = dir.map(|d| d.join(FILE_NAME));
        let mut notices = Vec::new();
        let facts = match &path {
            Some(p) => match read(p) {
                Ok(file) => file
                    .servers
                    .get(&key)
                    .map(|f| f.fresh(now()))
                    .unwrap_or_default(),
                Err(e) => {
                    notices.push(e);
                    Facts::default()
                }
            },
            None => Facts::default(),
        };
        Self {
            path,
            key,
            facts: Mutex::new(facts),
            notices: Mutex::new(notices),
        }
    }

    /// The facts in force.
    pub fn facts(&self) -> Facts {
        self.facts.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Notices not yet delivered (taken).
    pub fn take_notices(&self) -> Vec<String> {
        self.notices
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default()
    }

    /// Records what `change` sets and saves it (a save that fails becomes a notice; the fact
    /// still holds for this process). Returns whether anything changed.
    pub fn learn(&self, change: impl FnOnce(&mut Facts, u64)) -> bool {
        let Ok(mut facts) = self.facts.lock() else {
            return false;
        };
        let before = facts.clone();
        change(&mut facts, now());
        if *facts == before {
            return false;
        }
        let snapshot = facts.clone();
        drop(facts);
        if let Some(path) = &self.path
            && let Err(e) = save(path, &self.key, &snapshot)
            && let Ok(mut n) = self.notices.lock()
        {
            n.push(e);
        }
        true
    }
}

fn read(path: &Path) -> Result<File, String> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(File::default()),
        Err(e) => return Err(format!("ignored {shown}: {e}")),
    };
    if !meta.is_file() {
        return Err(format!("ignored {shown}: not a regular file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "ignored {shown}: {} bytes, more than the {MAX_FILE_BYTES} a list of learned server facts can take; delete it",
            meta.len()
        ));
    }
    let mut text = String::new();
    // Keel's own data (checked a regular file above, read bounded).
    #[allow(clippy::disallowed_methods)]
    let opened = std::fs::File::open(path);
    opened
        .and_then(|f| f.take(MAX_FILE_BYTES).read_to_string(&mut text))
        .map_err(|e| format!("ignored {shown}: {e}"))?;
    let file: File = serde_json::from_str(&text).map_err(|e| {
        format!("ignored {shown}: not a file of learned server facts ({e}); it will be rewritten")
    })?;
    if file.version != VERSION {
        return Err(format!(
            "ignored {shown}: format version {} (this Keel reads {VERSION})",
            file.version
        ));
    }
    Ok(file)
}

/// Merges `facts` under `key` into the file and writes it atomically.
fn save(path: &Path, key: &str, facts: &Facts) -> Result<(), String> {
    let shown = path.display();
    let mut file = match read(path) {
        Ok(f) => f,
        // A newer format is someone else's: leave it alone.
        Err(e) if e.contains("format version") => return Err(e),
        // A broken file is replaced.
        Err(_) => File::default(),
    };
    file.version = VERSION;
    file.servers.insert(key.to_string(), facts.clone());
    while file.servers.len() > MAX_SERVERS {
        let oldest = file
            .servers
            .iter()
            .filter(|(k, _)| k.as_str() != key)
            .min_by_key(|(_, f)| f.newest())
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => file.servers.remove(&k),
            None => break,
        };
    }
    let text = serde_json::to_string_pretty(&file)
        .map_err(|e| format!("cannot save learned server facts: {e}"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot save learned server facts in {}: {e}", dir.display()))?;
    // Unique per process and save: two clients of one process may save at once.
    static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{FILE_NAME}.{}.{n}.tmp", std::process::id()));
    std::fs::write(&tmp, text.as_bytes())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot save learned server facts to {shown}: {e}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_window(w: u64) -> impl FnOnce(&mut Facts, u64) {
        move |f, now| {
            f.context_window = Some(Fact {
                value: w,
                learned_at: now,
            })
        }
    }

    #[test]
    fn facts_survive_to_the_next_open_per_server_and_model() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let m = ServerMemory::open(Some(dir.path()), "http://127.0.0.1:8080/v1/", "small");
        assert!(m.learn(set_window(2048)));
        assert!(!m.learn(set_window(2048)), "the same fact is no change");
        let again = ServerMemory::open(Some(dir.path()), "http://127.0.0.1:8080/v1", "small");
        assert_eq!(again.facts().context_window.map(|f| f.value), Some(2048));
        let other = ServerMemory::open(Some(dir.path()), "http://127.0.0.1:8080/v1", "big");
        assert_eq!(other.facts(), Facts::default());
        assert!(again.take_notices().is_empty());
    }

    #[test]
    fn a_bad_file_is_ignored_with_a_notice_and_replaced() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(FILE_NAME);
        for bad in ["{not json", "[]", r#"{"version": 1, "servers": {"k": 7}}"#] {
            std::fs::write(&path, bad).unwrap_or_else(|e| panic!("{e}"));
            let m = ServerMemory::open(Some(dir.path()), "http://h/v1", "m");
            assert_eq!(m.facts(), Facts::default());
            let notices = m.take_notices();
            assert!(notices[0].contains("ignored"), "{notices:?}");
            assert!(m.learn(set_window(4096)));
            let again = ServerMemory::open(Some(dir.path()), "http://h/v1", "m");
            assert_eq!(again.facts().context_window.map(|f| f.value), Some(4096));
        }
    }

    #[test]
    fn a_newer_format_is_read_as_nothing_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(FILE_NAME);
        let newer = r#"{"version": 99, "servers": {}}"#;
        std::fs::write(&path, newer).unwrap_or_else(|e| panic!("{e}"));
        let m = ServerMemory::open(Some(dir.path()), "http://h/v1", "m");
        assert!(m.learn(set_window(4096)));
        assert!(m.take_notices().iter().any(|n| n.contains("version 99")));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap_or_default(),
            newer,
            "a newer Keel's file is left alone"
        );
        // The fact still holds for this process.
        assert_eq!(m.facts().context_window.map(|f| f.value), Some(4096));
    }

    #[test]
    fn a_fifo_or_directory_is_not_read() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(dir.path().join(FILE_NAME)).unwrap_or_else(|e| panic!("{e}"));
        let m = ServerMemory::open(Some(dir.path()), "http://h/v1", "m");
        assert!(m.take_notices()[0].contains("not a regular file"));
    }

    #[test]
    fn stale_facts_are_learned_again() {
        let old = Fact {
            value: true,
            learned_at: 1_000,
        };
        let facts = Facts {
            streams: Some(Fact {
                value: false,
                learned_at: 1_000,
            }),
            tools_dropped: Some(old),
            ..Facts::default()
        };
        let now = 1_000 + RELEARN_AFTER.as_secs() - 1;
        assert_eq!(facts.fresh(now), facts);
        assert_eq!(facts.fresh(now + 1), Facts::default());
    }

    #[test]
    fn the_file_keeps_a_bounded_number_of_servers() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for i in 0..MAX_SERVERS + 5 {
            let m = ServerMemory::open(Some(dir.path()), &format!("http://h{i}/v1"), "m");
            m.learn(set_window(1000 + i as u64));
        }
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap_or_default();
        let file: File = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(file.servers.len(), MAX_SERVERS);
    }
}

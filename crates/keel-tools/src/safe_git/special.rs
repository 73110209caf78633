//! Git directories holding a FIFO, socket or device where git opens a file: refused before
//! any git runs there (red-team pass 11, R11-12).

use std::path::Path;

/// The files of a git directory git opens for an ordinary command.
const GIT_FILES: &[&str] = &[
    "config",
    "config.worktree",
    "index",
    "HEAD",
    "info/exclude",
    "info/attributes",
    "info/grafts",
    "info/sparse-checkout",
    "packed-refs",
    "shallow",
    "commondir",
    "objects/info/alternates",
];

/// Refuses a git directory where a file git opens — or one its `config` includes — is a
/// FIFO, socket or device: git blocks on a FIFO for good, and Keel with it (red-team pass
/// 11, R11-12: a shipped `.git/config` with `[include] path = cfgfifo`, or a FIFO as the
/// index, hung every later check).
pub(super) fn no_special_files(git_dir: &Path) -> Result<(), String> {
    let special = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| {
            let t = m.file_type();
            !(t.is_file() || t.is_dir())
        })
    };
    let refuse = |p: &Path| {
        Err(format!(
            "{} is a FIFO, socket or device, which git would block on; Keel's git does not read this repository. Remove it (`rm {}`)",
            p.display(),
            p.display()
        ))
    };
    for name in GIT_FILES {
        let p = git_dir.join(name);
        if special(&p) {
            return refuse(&p);
        }
    }
    // What the configuration includes (one level: a chain of includes of FIFOs would need
    // a regular first file, which is read here in turn only up to 64 KiB).
    let config = git_dir.join("config");
    if let Ok(Some(text)) = crate::project::read_in_dir(&config, 64 * 1024) {
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            if !key.trim().eq_ignore_ascii_case("path") {
                continue;
            }
            let value = value.trim().trim_matches('"');
            let named = match value.strip_prefix("~/") {
                Some(rest) => std::env::var_os("HOME").map(|h| Path::new(&h).join(rest)),
                None => Some(git_dir.join(value)),
            };
            if let Some(p) = named
                && special(&p)
            {
                return refuse(&p);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod special_tests {
    use super::*;
    use crate::safe_git::pinned_repository;

    #[test]
    fn a_git_directory_with_a_fifo_is_refused_not_hung_on() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let top = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let git = top.join(".git");
        std::fs::create_dir_all(git.join("info")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(git.join("config"), "[include]\n\tpath = cfgfifo\n")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(pinned_repository(&top).is_ok());
        let fifo = |p: &Path| {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                p,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o644),
                0,
            )
            .unwrap_or_else(|e| panic!("{e}"))
        };
        fifo(&git.join("cfgfifo"));
        let why = pinned_repository(&top).err().unwrap_or_default();
        assert!(why.contains("cfgfifo") && why.contains("FIFO"), "{why}");
        std::fs::remove_file(git.join("cfgfifo")).unwrap_or_else(|e| panic!("{e}"));
        fifo(&git.join("index"));
        let why = pinned_repository(&top).err().unwrap_or_default();
        assert!(why.contains("index"), "{why}");
    }
}

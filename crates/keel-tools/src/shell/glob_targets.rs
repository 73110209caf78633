//! Paths a line writes that bash expands first (red-team pass 11, R11-6).
//!
//! Bash performs pathname expansion on a redirection's word and on a writer's arguments:
//! `echo GONE > data/f10.cs?` writes `data/f10.csv` when that is the one match, `cp README.md
//! data/f2.cs?` copies over it, `cd dat? && > f1.csv` writes `data/f1.csv`. The overwrite
//! check ([`super::unrecorded`]) looked up the literal text, found nothing and called it a new
//! file. So a written path (or a `cd` target) with `*`, `?` or `[` is expanded here as bash
//! would — each name component against the directory entries, names starting with `.` only
//! for a pattern that does — and every match is judged; with no match bash keeps the text.

use std::path::{Path, PathBuf};

/// The most matches one pattern yields before the rest are left out (judged as "more than").
pub(crate) const MAX_MATCHES: usize = 1_000;

/// Whether bash may expand `path` (as written): it holds `*`, `?` or `[`.
pub(crate) fn has_glob(path: &str) -> bool {
    path.contains(['*', '?', '['])
}

/// The existing entries `pattern` matches, relative to the directory `base` (absolute) unless
/// it is absolute itself; at most [`MAX_MATCHES`] + 1 (more: some were left out).
pub(crate) fn expand(base: &Path, pattern: &str) -> Vec<PathBuf> {
    let start = if pattern.starts_with('/') {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    let mut current = vec![start];
    for comp in pattern.split('/').filter(|c| !c.is_empty()) {
        if !has_glob(comp) {
            current = current.into_iter().map(|c| c.join(comp)).collect();
            continue;
        }
        let Ok(glob) = globset::GlobBuilder::new(comp)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
        else {
            return Vec::new();
        };
        let matcher = glob.compile_matcher();
        let mut next = Vec::new();
        for dir in current {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let text = name.to_string_lossy();
                if text.starts_with('.') && !comp.starts_with('.') {
                    continue;
                }
                if matcher.is_match(text.as_ref()) {
                    next.push(dir.join(&name));
                    if next.len() > MAX_MATCHES {
                        return next;
                    }
                }
            }
        }
        current = next;
    }
    current
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect()
}

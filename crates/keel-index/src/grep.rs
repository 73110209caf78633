//! Exact regex search over the workspace's indexable files, with ripgrep's searcher
//! (`grep-regex`, `grep-searcher`): same ignore rules as the index, binary files skipped,
//! smart case (a pattern with no capital letter matches case-insensitively).
//!
//! It reads the files themselves, not the index, so results are exact and always current.

use std::path::Path;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};

use crate::walk::Walker;
use crate::{IndexError, IndexSettings};

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GrepMatch {
    pub path: String,
    pub line: u64,
    pub text: String,
}

/// The outcome of a search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrepResult {
    /// In path order, then line order.
    pub matches: Vec<GrepMatch>,
    pub files_searched: usize,
    /// More matches exist than were returned.
    pub truncated: bool,
}

/// Longest line text kept in a match.
const MAX_LINE_CHARS: usize = 300;

/// Searches the files of `root` (filtered by `glob`: with a `/` it matches the path, else
/// the file name) for `pattern`, returning at most `max_results` matches.
pub fn grep(
    root: &Path,
    settings: &IndexSettings,
    pattern: &str,
    glob: Option<&str>,
    max_results: usize,
) -> Result<GrepResult, IndexError> {
    let matcher = RegexMatcherBuilder::new()
        .case_smart(true)
        .build(pattern)
        .map_err(|e| IndexError::Pattern {
            pattern: pattern.to_string(),
            message: e.to_string(),
        })?;
    let glob = match glob.filter(|g| !g.trim().is_empty()) {
        Some(g) => {
            let full = if g.contains('/') {
                g.to_string()
            } else {
                format!("**/{g}")
            };
            Some(
                globset::GlobBuilder::new(&full)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| IndexError::Glob {
                        glob: g.to_string(),
                        message: e.to_string(),
                    })?
                    .compile_matcher(),
            )
        }
        None => None,
    };
    let walker = Walker::new(root, settings);
    let project = keel_fs::project::ProjectDir::open(root).ok();
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let mut result = GrepResult::default();
    for f in walker.walk(None) {
        if glob.as_ref().is_some_and(|g| !g.is_match(&f.path)) {
            continue;
        }
        result.files_searched += 1;
        let path = f.path;
        // Read beneath the open workspace (regular files only, bounded): a file swapped for a
        // link out or a FIFO since the walk is skipped, not searched.
        let Some(Ok(Some(bytes))) = project
            .as_ref()
            .map(|p| p.read_bytes(&path, crate::build::MAX_ANALYSED_BYTES))
        else {
            continue;
        };
        let mut full = false;
        let matches = &mut result.matches;
        let _ = searcher.search_slice(
            &matcher,
            &bytes,
            UTF8(|line, text| {
                if matches.len() >= max_results {
                    full = true;
                    return Ok(false);
                }
                let text = text.trim_end_matches(['\n', '\r']);
                let text = if text.chars().count() > MAX_LINE_CHARS {
                    let mut t: String = text.chars().take(MAX_LINE_CHARS).collect();
                    t.push('…');
                    t
                } else {
                    text.to_string()
                };
                matches.push(GrepMatch {
                    path: path.clone(),
                    line,
                    text,
                });
                Ok(true)
            }),
        );
        if full {
            result.truncated = true;
            break;
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_lines_honours_ignores_and_caps() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let w = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap_or(dir.path()))
                .unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
        };
        w("src/a.rs", "fn alpha() {}\nfn Beta() {}\n");
        w("src/b.py", "def alpha():\n    pass\n");
        w("target/x.rs", "fn alpha() {}\n");
        w("bin.dat", "alpha\0\0\0");
        let s = IndexSettings::default();
        let r = grep(dir.path(), &s, r"fn \w+", None, 10).unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<(String, u64)> = r.matches.iter().map(|m| (m.path.clone(), m.line)).collect();
        assert_eq!(
            got,
            [("src/a.rs".to_string(), 1), ("src/a.rs".to_string(), 2)]
        );
        // Smart case: lowercase pattern matches `Beta`.
        let r = grep(dir.path(), &s, "beta", None, 10).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.matches.len(), 1);
        let r = grep(dir.path(), &s, "alpha", Some("*.py"), 10).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.matches.len(), 1);
        assert_eq!(r.matches[0].path, "src/b.py");
        let r = grep(dir.path(), &s, "alpha", None, 1).unwrap_or_else(|e| panic!("{e}"));
        assert!(r.truncated);
        assert!(matches!(
            grep(dir.path(), &s, "(", None, 1),
            Err(IndexError::Pattern { .. })
        ));
    }
}

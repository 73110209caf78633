//! The composer: a multi-line text field with history (persisted per workspace), collapsed
//! large pastes and `@path` completion.

use std::path::{Path, PathBuf};

use unicode_width::UnicodeWidthStr;

/// A paste longer than this (characters or lines) is shown as one placeholder.
const LARGE_PASTE_CHARS: usize = 1000;
const LARGE_PASTE_LINES: usize = 10;
/// History entries kept on disk.
const HISTORY_MAX: usize = 500;

#[derive(Debug, Default)]
pub struct Composer {
    text: String,
    /// Byte offset of the cursor in `text`.
    cursor: usize,
    history: Vec<String>,
    /// Position while browsing history, and the draft it replaced.
    browsing: Option<(usize, String)>,
    history_file: Option<PathBuf>,
    /// Large pastes: placeholder → content, expanded on submit.
    pastes: Vec<(String, String)>,
}

impl Composer {
    /// A composer whose history lives in `history_file` (loaded now, appended on submit).
    pub fn with_history(history_file: Option<PathBuf>) -> Self {
        let history = history_file
            .as_deref()
            // Keel's own data; still regular-only, never blocking, bounded.
            .and_then(|p| {
                keel_fs::project::read_user_file(p, 8 * 1024 * 1024)
                    .ok()
                    .flatten()
            })
            .map(|text| {
                text.lines()
                    .filter_map(|l| serde_json::from_str::<String>(l).ok())
                    .collect()
            })
            .unwrap_or_default();
        Self {
            history,
            history_file,
            ..Self::default()
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    pub fn set_text(&mut self, text: &str) {
        self.text = text.to_string();
        self.cursor = self.text.len();
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
        self.pastes.clear();
        self.browsing = None;
    }

    pub fn insert(&mut self, s: &str) {
        self.text.insert_str(self.cursor, s);
        self.cursor += s.len();
        self.browsing = None;
    }

    /// Pasted text: inserted as is, or as a placeholder when large.
    pub fn paste(&mut self, s: &str) {
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        let lines = s.lines().count();
        if s.chars().count() > LARGE_PASTE_CHARS || lines > LARGE_PASTE_LINES {
            let tag = format!("[pasted {lines} lines #{}]", self.pastes.len() + 1);
            self.insert(&tag);
            self.pastes.push((tag, s));
        } else {
            self.insert(&s);
        }
    }

    pub fn backspace(&mut self) {
        if let Some((i, _)) = self.text[..self.cursor].char_indices().last() {
            self.text.replace_range(i..self.cursor, "");
            self.cursor = i;
        }
    }

    pub fn delete(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.text
                .replace_range(self.cursor..self.cursor + c.len_utf8(), "");
        }
    }

    pub fn left(&mut self) {
        if let Some((i, _)) = self.text[..self.cursor].char_indices().last() {
            self.cursor = i;
        }
    }

    pub fn right(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.cursor += c.len_utf8();
        }
    }

    pub fn home(&mut self) {
        self.cursor = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
    }

    pub fn end(&mut self) {
        self.cursor += self.text[self.cursor..]
            .find('\n')
            .unwrap_or(self.text.len() - self.cursor);
    }

    /// Deletes the word before the cursor (Ctrl-W).
    pub fn delete_word(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end();
        let start = trimmed.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Up: the line above, or the previous history entry on the first line.
    pub fn up(&mut self) {
        let line_start = self.text[..self.cursor].rfind('\n');
        if let Some(nl) = line_start {
            let col = self.cursor - nl - 1;
            let prev_start = self.text[..nl].rfind('\n').map_or(0, |i| i + 1);
            self.cursor = self.clamp_col(prev_start, col);
            return;
        }
        let pos = match &self.browsing {
            Some((p, _)) => p.checked_sub(1),
            None => self.history.len().checked_sub(1),
        };
        if let Some(p) = pos {
            if self.browsing.is_none() {
                self.browsing = Some((p, self.text.clone()));
            }
            if let Some(b) = self.browsing.as_mut() {
                b.0 = p;
            }
            self.text = self.history[p].clone();
            self.cursor = self.text.find('\n').unwrap_or(self.text.len());
        }
    }

    /// Down: the line below, or the next history entry (then the draft) on the last line.
    pub fn down(&mut self) {
        if let Some(nl) = self.text[self.cursor..].find('\n') {
            let line_start = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
            let col = self.cursor - line_start;
            self.cursor = self.clamp_col(self.cursor + nl + 1, col);
            return;
        }
        if let Some((p, draft)) = self.browsing.take() {
            if p + 1 < self.history.len() {
                self.browsing = Some((p + 1, draft));
                self.text = self.history[p + 1].clone();
            } else {
                self.text = draft;
            }
            self.cursor = self.text.len();
        }
    }

    fn clamp_col(&self, line_start: usize, col: usize) -> usize {
        let line_end = self.text[line_start..]
            .find('\n')
            .map_or(self.text.len(), |i| line_start + i);
        let mut pos = (line_start + col).min(line_end);
        while !self.text.is_char_boundary(pos) {
            pos -= 1;
        }
        pos
    }

    /// Clears an unsent message, keeping it as the newest history entry (this run only, not
    /// on disk): Up brings it back.
    pub fn stash(&mut self) {
        let mut draft = std::mem::take(&mut self.text);
        for (tag, content) in self.pastes.drain(..) {
            draft = draft.replace(&tag, &content);
        }
        self.cursor = 0;
        self.browsing = None;
        if !draft.trim().is_empty() && self.history.last() != Some(&draft) {
            self.history.push(draft);
        }
    }

    /// Takes the message out: pastes expanded, remembered in history (and on disk).
    pub fn submit(&mut self) -> String {
        let shown = std::mem::take(&mut self.text);
        let mut message = shown.clone();
        for (tag, content) in self.pastes.drain(..) {
            message = message.replace(&tag, &content);
        }
        self.cursor = 0;
        self.browsing = None;
        if !shown.trim().is_empty() && self.history.last() != Some(&shown) {
            self.history.push(shown.clone());
            self.save_history(&shown);
        }
        message
    }

    fn save_history(&self, entry: &str) {
        let Some(path) = &self.history_file else {
            return;
        };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let Ok(line) = serde_json::to_string(entry) else {
            return;
        };
        if self.history.len() > HISTORY_MAX * 2 {
            // Rewrite the file with the newest entries only.
            let keep = &self.history[self.history.len() - HISTORY_MAX..];
            let body: Vec<String> = keep
                .iter()
                .filter_map(|h| serde_json::to_string(h).ok())
                .collect();
            let _ = std::fs::write(path, body.join("\n") + "\n");
            return;
        }
        use std::io::Write;
        // Appending to Keel's own history file in its data directory (no repository's).
        #[allow(clippy::disallowed_methods)]
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut f) = file {
            let _ = writeln!(f, "{line}");
        }
    }

    /// The `@word` being typed at the cursor (without the `@`) and where it starts.
    pub fn mention(&self) -> Option<(usize, &str)> {
        let before = &self.text[..self.cursor];
        let start = before
            .rfind(|c: char| c.is_whitespace())
            .map_or(0, |i| i + 1);
        let word = &before[start..];
        word.strip_prefix('@').map(|w| (start, w))
    }

    /// Replaces the `@word` at the cursor with `@path `.
    pub fn complete_mention(&mut self, path: &str) {
        if let Some((start, _)) = self.mention() {
            let replacement = format!("@{path} ");
            self.text.replace_range(start..self.cursor, &replacement);
            self.cursor = start + replacement.len();
        }
    }

    /// The text as screen lines (hard breaks only) and the cursor's (row, column).
    pub fn view(&self) -> (Vec<&str>, (usize, usize)) {
        let lines: Vec<&str> = self.text.split('\n').collect();
        let before = &self.text[..self.cursor];
        let row = before.matches('\n').count();
        let col = before.rsplit('\n').next().map_or(0, UnicodeWidthStr::width);
        (lines, (row, col))
    }
}

/// Where the composer's history for `workspace` lives: one file per workspace under
/// `<data dir>/history/`.
pub fn history_path(data_dir: &Path, workspace: &Path) -> PathBuf {
    // FNV-1a: stable across Rust releases (the standard hasher is not), so the file is found
    // again after a toolchain upgrade.
    let hash = keel_protocol::fnv1a(workspace.to_string_lossy().as_bytes());
    let name = workspace
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .replace(|c: char| !c.is_alphanumeric(), "_")
        })
        .unwrap_or_default();
    data_dir
        .join("history")
        .join(format!("{name}-{hash:016x}.jsonl"))
}

/// `@path` mentions in `message` that name files in `workspace`, with their content; a file
/// over `max` characters comes as its outline (definitions with line ranges, for a language
/// the index parses) or else its head, saying what was left out.
pub fn mentioned_files(message: &str, workspace: &Path, max: usize) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for word in message.split_whitespace() {
        let Some(rel) = word.strip_prefix('@') else {
            continue;
        };
        let rel = rel.trim_end_matches([',', '.', ';', ':', ')', '?', '!']);
        if rel.is_empty() || rel.contains("..") || out.iter().any(|(p, _)| p == rel) {
            continue;
        }
        let path = workspace.join(rel);
        // Read as a project file: beneath the workspace (no absolute path, no link out),
        // regular, bounded, never blocking.
        let Some(Ok(Some(text))) = keel_tools::project::ProjectDir::open(workspace)
            .ok()
            .map(|p| p.read(rel, keel_tools::project::DEFINITION_LIMIT))
        else {
            continue;
        };
        let content = if text.chars().count() > max {
            shortened(&path, &text, max)
        } else {
            text
        };
        out.push((rel.to_string(), content));
    }
    out
}

/// A large file as its outline, or its head.
fn shortened(path: &Path, text: &str, max: usize) -> String {
    use keel_index::SymbolExtractor;
    let lines = text.lines().count();
    if let Ok(symbols) = keel_index::TreeSitterExtractor::new().extract_path(path, text)
        && !symbols.symbols.is_empty()
    {
        let mut outline = format!(
            "outline ({lines} lines; too large to attach whole: read_file the parts you need)\n"
        );
        for s in &symbols.symbols {
            let line = format!(
                "{}{}-{} {}\n",
                "  ".repeat(s.depth),
                s.start_line,
                s.end_line,
                s.signature
            );
            if outline.len() + line.len() > max {
                outline.push_str("…\n");
                break;
            }
            outline.push_str(&line);
        }
        return outline;
    }
    let head: String = text.chars().take(max).collect();
    format!(
        "{head}\n… ({} more lines not attached; read the file for the rest)",
        text[head.len()..].lines().count()
    )
}

/// Workspace files matching `query` fuzzily (its characters in order), best first: a
/// substring beats a scattered match, a match in the file name beats one in the directory,
/// shorter paths first.
pub fn fuzzy<'a>(files: &'a [String], query: &str, limit: usize) -> Vec<&'a str> {
    let q = query.to_lowercase();
    let mut scored: Vec<(u32, usize, &str)> = files
        .iter()
        .filter_map(|f| {
            let lower = f.to_lowercase();
            let name = lower.rsplit('/').next().unwrap_or(&lower);
            let score = if name.starts_with(&q) {
                0
            } else if name.contains(&q) {
                1
            } else if lower.contains(&q) {
                2
            } else if is_subsequence(&q, &lower) {
                3
            } else {
                return None;
            };
            Some((score, f.len(), f.as_str()))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(limit).map(|(_, _, f)| f).collect()
}

fn is_subsequence(needle: &str, hay: &str) -> bool {
    let mut it = hay.chars();
    needle.chars().all(|c| it.any(|h| h == c))
}

/// The workspace's files (relative paths, `.gitignore` respected, hidden ones left out), at
/// most `max`. Listed beneath the open workspace (`keel_fs::walk`): a directory swapped for a
/// symlink out is never entered.
pub fn workspace_files(workspace: &Path, max: usize) -> Vec<String> {
    let mut files = Vec::new();
    let Ok(handle) = keel_fs::beneath::DirHandle::open(workspace) else {
        return files;
    };
    // `.gitignore` files are read as project files (a FIFO must not hang completion).
    let rules = keel_index::ignore_rules::IgnoreRules::new(workspace);
    let _ = handle.walk_sorted(Path::new(""), keel_fs::walk::WalkOptions::default(), |e| {
        use keel_fs::walk::Visit;
        if files.len() >= max {
            return Visit::Stop;
        }
        let Some(rel) = e.rel_str() else {
            return Visit::Skip;
        };
        if e.name().as_encoded_bytes().starts_with(b".") || rules.ignored(rel, e.is_dir()) {
            return Visit::Skip;
        }
        if e.is_file() {
            files.push(rel.to_string());
        }
        Visit::Continue
    });
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typing_editing_and_multiple_lines() {
        let mut c = Composer::default();
        c.insert("helo");
        c.left();
        c.insert("l");
        assert_eq!(c.text(), "hello");
        c.end();
        c.insert("\nworld");
        c.up();
        c.insert("!");
        assert_eq!(c.text(), "hello!\nworld");
        c.end();
        c.delete_word();
        assert_eq!(
            c.text(),
            "\nworld",
            "Ctrl-W deletes the word before the cursor"
        );
    }

    #[test]
    fn history_browses_and_persists_per_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = history_path(dir.path(), Path::new("/w/proj"));
        let mut c = Composer::with_history(Some(file.clone()));
        c.insert("first");
        assert_eq!(c.submit(), "first");
        c.insert("second\nline");
        c.submit();
        c.insert("draft");
        c.up();
        assert_eq!(c.text(), "second\nline");
        c.up(); // on the first line of the entry: older entry
        assert_eq!(c.text(), "first");
        c.down();
        c.down(); // past the newest: the draft comes back
        c.down();
        assert_eq!(c.text(), "draft");
        let again = Composer::with_history(Some(file.clone()));
        assert_eq!(again.history, vec!["first", "second\nline"]);
        assert_eq!(
            file.file_name().and_then(|n| n.to_str()),
            Some("proj-dbdce1c433ba3cd7.jsonl"),
            "one stable file per workspace"
        );
        assert_ne!(file, history_path(dir.path(), Path::new("/w/other")));
    }

    #[test]
    fn a_large_paste_is_one_placeholder_expanded_on_submit() {
        let mut c = Composer::default();
        let log: String = (0..50).map(|i| format!("line {i}\n")).collect();
        c.insert("look: ");
        c.paste(&log);
        assert_eq!(c.text(), "look: [pasted 50 lines #1]");
        assert_eq!(c.submit(), format!("look: {log}"));
    }

    #[test]
    fn mentions_complete_fuzzily_and_attach_file_content() {
        let files: Vec<String> = [
            "src/main.rs",
            "src/chat/app.rs",
            "README.md",
            "docs/mainline.md",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            fuzzy(&files, "main", 5),
            vec!["src/main.rs", "docs/mainline.md"]
        );
        assert_eq!(fuzzy(&files, "scapp", 5), vec!["src/chat/app.rs"]);
        let mut c = Composer::default();
        c.insert("fix @mai");
        assert_eq!(c.mention(), Some((4, "mai")));
        c.complete_mention("src/main.rs");
        assert_eq!(c.text(), "fix @src/main.rs ");

        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap_or_else(|e| panic!("{e}"));
        let got = mentioned_files("see @a.txt, and @missing.rs", dir.path(), 100);
        assert_eq!(got, vec![("a.txt".to_string(), "alpha\n".to_string())]);
        let big: String = (0..200)
            .map(|i| format!("/// Doc {i}.\npub fn f{i}() -> u32 {{\n    {i}\n}}\n"))
            .collect();
        std::fs::write(dir.path().join("big.rs"), &big).unwrap_or_else(|e| panic!("{e}"));
        let got = mentioned_files("@big.rs", dir.path(), 2000);
        let outline = &got[0].1;
        assert!(outline.starts_with("outline (800 lines;"), "{outline}");
        assert!(outline.contains("1-4 pub fn f0() -> u32 {"), "{outline}");
        assert!(outline.len() <= 2100, "bounded: {}", outline.len());
    }
}

//! Parsing the "*** Begin Patch" envelope used by Codex-style models:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path/new.py
//! +line
//! *** Update File: path/old.py
//! *** Move to: path/renamed.py        (optional)
//! @@ def context_line():              (optional anchor; bare `@@` separates hunks)
//!  context
//! -removed
//! +added
//! *** End of File                     (optional: the hunk ends the file)
//! *** Delete File: path/gone.py
//! *** End Patch
//! ```
//!
//! Tolerant where models commonly slip: text around the envelope (a heredoc, a code fence),
//! a hunk line missing its leading space, whitespace around the envelope and file markers
//! (`  *** Update File: x`), blank lines after an added file's content. Inside a hunk a line
//! that starts with a space is context, so a marker there must start the line.

/// A parsed patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub ops: Vec<FileOp>,
}

/// One file operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

impl FileOp {
    /// The file the operation names first.
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path } | FileOp::Update { path, .. } => {
                path
            }
        }
    }
}

/// One `@@` hunk of an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// Text after `@@`: a line to find first (a function or class header), if any.
    pub anchor: Option<String>,
    /// Anchors of `@@` lines stacked before that one (`@@ class A` then `@@ def f():`), found
    /// in order, outermost first.
    pub outer: Vec<String>,
    pub lines: Vec<HunkLine>,
    /// `*** End of File` followed the hunk: it must match at the end of the file.
    pub at_end: bool,
    /// 1-based line of the patch where the hunk starts, for error messages.
    pub patch_line: usize,
}

impl Hunk {
    /// The lines the file has before the change (context and removals).
    pub fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(s) | HunkLine::Remove(s) => Some(s.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }

    /// The lines it has after (context and additions).
    pub fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(s) | HunkLine::Add(s) => Some(s.as_str()),
                HunkLine::Remove(_) => None,
            })
            .collect()
    }
}

/// A line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

/// A malformed patch, with the patch line it was found on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid patch (line {line}): {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const EOF_MARK: &str = "*** End of File";

/// Parses a patch.
pub fn parse(text: &str) -> Result<Patch, ParseError> {
    let lines: Vec<&str> = text.lines().collect();
    let err = |line: usize, message: String| ParseError { line, message };
    let Some(begin) = lines.iter().position(|l| l.trim() == BEGIN) else {
        return Err(err(
            1,
            format!("the patch must start with `{BEGIN}` and end with `{END}`"),
        ));
    };
    let Some(end) = lines
        .iter()
        .rposition(|l| l.trim() == END)
        .filter(|e| *e > begin)
    else {
        return Err(err(
            lines.len().max(1),
            format!("`{END}` is missing (was the patch cut off?)"),
        ));
    };
    let mut ops = Vec::new();
    let mut i = begin + 1;
    while i < end {
        let line = lines[i];
        let marker = line.trim();
        if let Some(path) = marker.strip_prefix(ADD) {
            let path = file_path(path, i, ADD)?;
            let mut content = String::new();
            i += 1;
            while i < end && !lines[i].trim_start().starts_with("*** ") {
                match lines[i].strip_prefix('+') {
                    Some(body) => {
                        content.push_str(body);
                        content.push('\n');
                    }
                    // A blank line: the end of the section if only blank lines or a marker
                    // follow, else an empty line whose `+` was lost.
                    None if lines[i].trim().is_empty() => {
                        let next = (i..end).find(|&j| !lines[j].trim().is_empty());
                        match next {
                            Some(j) if lines[j].starts_with('+') => content.push('\n'),
                            _ => break,
                        }
                    }
                    None => {
                        return Err(err(
                            i + 1,
                            format!("every line of an added file starts with `+` (in `{path}`)"),
                        ));
                    }
                }
                i += 1;
            }
            ops.push(FileOp::Add { path, content });
        } else if let Some(path) = marker.strip_prefix(DELETE) {
            ops.push(FileOp::Delete {
                path: file_path(path, i, DELETE)?,
            });
            i += 1;
        } else if let Some(path) = marker.strip_prefix(UPDATE) {
            let path = file_path(path, i, UPDATE)?;
            i += 1;
            let mut move_to = None;
            if i < end
                && let Some(to) = lines[i].trim().strip_prefix(MOVE)
            {
                move_to = Some(file_path(to, i, MOVE)?);
                i += 1;
            }
            let (hunks, next) = parse_hunks(&lines, i, end, &path)?;
            if hunks.is_empty() && move_to.is_none() {
                return Err(err(
                    i + 1,
                    format!("`{UPDATE} {path}` has no hunks; add `@@` hunks or drop the section"),
                ));
            }
            ops.push(FileOp::Update {
                path,
                move_to,
                hunks,
            });
            i = next;
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(err(
                i + 1,
                format!(
                    "expected `{ADD}`, `{UPDATE}`, `{DELETE}` or `{END}`, found `{}`",
                    cap(line)
                ),
            ));
        }
    }
    if ops.is_empty() {
        return Err(err(begin + 1, "the patch changes no file".into()));
    }
    Ok(Patch { ops })
}

fn file_path(raw: &str, line: usize, marker: &str) -> Result<String, ParseError> {
    let path = raw.trim();
    if path.is_empty() {
        return Err(ParseError {
            line: line + 1,
            message: format!("`{marker}` needs a path"),
        });
    }
    Ok(path.to_string())
}

fn cap(line: &str) -> String {
    let mut s: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        s.push('…');
    }
    s
}

/// Hunks from `start` until the next file marker; returns them and the index after.
fn parse_hunks(
    lines: &[&str],
    start: usize,
    end: usize,
    path: &str,
) -> Result<(Vec<Hunk>, usize), ParseError> {
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut current: Option<Hunk> = None;
    let mut i = start;
    while i < end {
        let line = lines[i];
        let trimmed = line.trim_end();
        if line.trim() == EOF_MARK {
            match current.as_mut() {
                Some(h) => h.at_end = true,
                None => {
                    return Err(ParseError {
                        line: i + 1,
                        message: format!("`{EOF_MARK}` must follow a hunk (in `{path}`)"),
                    });
                }
            }
            i += 1;
            continue;
        }
        // A marker; padded, it is one only where it cannot be a hunk line (a context line
        // starts with one space).
        if line.starts_with("*** ")
            || (!line.starts_with([' ', '+', '-']) && line.trim_start().starts_with("*** "))
        {
            break;
        }
        if let Some(rest) = trimmed.strip_prefix("@@") {
            // `@@ -12,5 +12,6 @@ fn x()` (unified-diff style) keeps only the trailing text.
            let rest = rest.trim();
            let rest = match rest.strip_prefix('-') {
                Some(r) => r.split_once("@@").map_or("", |(_, after)| after).trim(),
                None => rest,
            };
            // `@@` lines with no hunk lines between them narrow one hunk step by step.
            if let Some(h) = current.as_mut().filter(|h| h.lines.is_empty()) {
                if !rest.is_empty() {
                    h.outer.extend(h.anchor.replace(rest.to_string()));
                }
                i += 1;
                continue;
            }
            if let Some(h) = current.take() {
                hunks.push(h);
            }
            current = Some(Hunk {
                anchor: (!rest.is_empty()).then(|| rest.to_string()),
                outer: Vec::new(),
                lines: Vec::new(),
                at_end: false,
                patch_line: i + 1,
            });
            i += 1;
            continue;
        }
        let hunk_line = match line.chars().next() {
            Some('+') => HunkLine::Add(line[1..].to_string()),
            Some('-') => HunkLine::Remove(line[1..].to_string()),
            Some(' ') => HunkLine::Context(line[1..].to_string()),
            // A blank context line whose space was trimmed away.
            None => HunkLine::Context(String::new()),
            Some(_) => {
                return Err(ParseError {
                    line: i + 1,
                    message: format!(
                        "a hunk line must start with ` ` (context), `-` or `+`, found `{}` (in `{path}`)",
                        cap(line)
                    ),
                });
            }
        };
        current
            .get_or_insert_with(|| Hunk {
                anchor: None,
                outer: Vec::new(),
                lines: Vec::new(),
                at_end: false,
                patch_line: i + 1,
            })
            .lines
            .push(hunk_line);
        i += 1;
    }
    if let Some(h) = current {
        hunks.push(h);
    }
    // Trailing blank "context" lines are usually an artefact of the envelope.
    for h in &mut hunks {
        while matches!(h.lines.last(), Some(HunkLine::Context(s)) if s.trim().is_empty()) {
            h.lines.pop();
        }
        if h.lines.is_empty() {
            return Err(ParseError {
                line: h.patch_line,
                message: format!("a hunk of `{path}` has no lines"),
            });
        }
    }
    Ok((hunks, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_operation() {
        let p = parse(
            "noise before\n*** Begin Patch\n*** Add File: a/new.py\n+print(1)\n+\n*** Update File: src/x.py\n*** Move to: src/y.py\n@@ def f():\n     a = 1\n-    b = 2\n+    b = 3\n\n@@\n-last\n+LAST\n*** End of File\n*** Delete File: old.txt\n*** End Patch\n```\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.ops.len(), 3);
        assert_eq!(
            p.ops[0],
            FileOp::Add {
                path: "a/new.py".into(),
                content: "print(1)\n\n".into()
            }
        );
        let FileOp::Update {
            path,
            move_to,
            hunks,
        } = &p.ops[1]
        else {
            panic!("{:?}", p.ops[1]);
        };
        assert_eq!(path, "src/x.py");
        assert_eq!(move_to.as_deref(), Some("src/y.py"));
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0].anchor.as_deref(), Some("def f():"));
        assert_eq!(hunks[0].old_lines(), vec!["    a = 1", "    b = 2"]);
        assert_eq!(hunks[0].new_lines(), vec!["    a = 1", "    b = 3"]);
        assert!(!hunks[0].at_end && hunks[1].at_end);
        assert_eq!(hunks[1].patch_line, 13);
        assert_eq!(
            p.ops[2],
            FileOp::Delete {
                path: "old.txt".into()
            }
        );
    }

    #[test]
    fn markers_may_be_padded_with_whitespace() {
        // Codex's `017_whitespace_padded_hunk_header`, and padding on every marker.
        let p = parse(
            "*** Begin Patch\n  *** Update File: foo.txt\n  *** Move to: bar.txt \n@@\n-old\n+new\n *** End of File\n\t*** Delete File: gone.txt\n   *** Add File: new.txt\n+x\n\n *** End Patch \n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.ops.len(), 3);
        let FileOp::Update {
            path,
            move_to,
            hunks,
        } = &p.ops[0]
        else {
            panic!("{:?}", p.ops[0]);
        };
        assert_eq!(
            (path.as_str(), move_to.as_deref()),
            ("foo.txt", Some("bar.txt"))
        );
        assert!(hunks[0].at_end);
        assert_eq!(p.ops[1].path(), "gone.txt");
        assert_eq!(
            p.ops[2],
            FileOp::Add {
                path: "new.txt".into(),
                content: "x\n".into()
            }
        );
        // Inside a hunk, a padded marker is a context line (its text starts with `*** `).
        let p = parse(
            "*** Begin Patch\n*** Update File: a.txt\n@@\n  *** Update File: b.txt\n-x\n+y\n*** End Patch",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.ops.len(), 1);
        let FileOp::Update { hunks, .. } = &p.ops[0] else {
            panic!("{:?}", p.ops[0]);
        };
        assert_eq!(hunks[0].old_lines(), [" *** Update File: b.txt", "x"]);
    }

    #[test]
    fn stacked_anchors_narrow_one_hunk() {
        // Codex's instructions: several `@@` lines jump to the right context.
        let p = parse(
            "*** Begin Patch\n*** Update File: a.py\n@@ class A\n@@     def f(self):\n-    return 1\n+    return 2\n@@\n-x\n+y\n*** End Patch",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let FileOp::Update { hunks, .. } = &p.ops[0] else {
            panic!("{:?}", p.ops[0]);
        };
        assert_eq!(hunks.len(), 2);
        assert_eq!(hunks[0].outer, ["class A"]);
        assert_eq!(hunks[0].anchor.as_deref(), Some("def f(self):"));
        assert_eq!(hunks[1].anchor, None);
    }

    #[test]
    fn blank_lines_in_an_added_file() {
        let p = parse("*** Begin Patch\n*** Add File: a\n+one\n\n+three\n\n\n*** End Patch")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            p.ops[0],
            FileOp::Add {
                path: "a".into(),
                content: "one\n\nthree\n".into()
            }
        );
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("*** Update File: x\n").err().map(|e| e.line);
        assert_eq!(e, Some(1));
        let e = parse("*** Begin Patch\n*** Update File: x\n@@\n+a\n").err();
        assert!(e.is_some_and(|e| e.message.contains("End Patch")));
        let e = parse("*** Begin Patch\n*** Update File: x\n@@\n a\nbad line\n*** End Patch").err();
        assert_eq!(e.map(|e| e.line), Some(5));
        let e = parse("*** Begin Patch\n*** Add File: x\nno plus\n*** End Patch").err();
        assert_eq!(e.map(|e| e.line), Some(3));
        let e = parse("*** Begin Patch\n*** Frobnicate: x\n*** End Patch").err();
        assert!(e.is_some_and(|e| e.message.contains("Frobnicate")));
        let e = parse("*** Begin Patch\n*** End Patch").err();
        assert!(e.is_some_and(|e| e.message.contains("no file")));
    }
}

//! SEARCH/REPLACE blocks as models write them — Cline's `replace_in_file` `diff`, or a whole
//! Aider-style reply: prose around the blocks, code fences, the file's name on a line of its
//! own before a block (or before the fence that holds it), several blocks of one file with the
//! name given once.
//!
//! ~~~text
//! src/app.py
//! ```python
//! <<<<<<< SEARCH
//! old lines
//! =======
//! new lines
//! >>>>>>> REPLACE
//! ```
//! ~~~
//!
//! Parsing is by whole lines: a marker must be alone on its line (surrounding spaces and
//! 5–9 marker characters tolerated, and Cline's `------- SEARCH` / `+++++++ REPLACE`). The
//! names found are only what the text says; which file a block edits is decided by the
//! caller ([`assign_files`]), which never lets a block named for one file edit another.

/// One block: the file name written above it (if any), and its texts without their final
/// newline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Block {
    /// Names found above the block, nearest first (a line can hold prose, a fence or a name).
    pub names: Vec<String>,
    pub search: String,
    pub replace: String,
}

/// `line` is `<run of one of chars> <word>`: a space between them (`-------SEARCH` is not a
/// marker), 5–9 `<`/`>` or 3–9 `-`/`+`.
fn marker(line: &str, chars: &[char], word: &str) -> bool {
    let t = line.trim();
    let Some(rest) = t.strip_suffix(word) else {
        return false;
    };
    if !rest.ends_with([' ', '\t']) {
        return false;
    }
    let rest = rest.trim_end();
    chars.iter().any(|&c| {
        let n = rest.chars().count();
        rest.chars().all(|x| x == c)
            && (if c == '<' || c == '>' { 5..=9 } else { 3..=9 }).contains(&n)
    })
}

fn is_head(line: &str) -> bool {
    let t = line.trim().trim_end_matches('>');
    marker(t, &['<', '-'], "SEARCH")
}

fn is_divider(line: &str) -> bool {
    let t = line.trim();
    (5..=9).contains(&t.len()) && t.chars().all(|c| c == '=')
}

fn is_tail(line: &str) -> bool {
    let t = line.trim().trim_end_matches('<');
    marker(t, &['>', '+'], "REPLACE")
}

fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// A file name as a line writes it: `# src/a.py`, `` `src/a.py`: ``, `**a.py**`; `None` for
/// an empty line or `...`. A fence line names a file only in its info string (`` ```a.py ``).
fn name_on(line: &str) -> Option<String> {
    let t = line.trim();
    if is_fence(t) {
        let info = t.trim_start_matches(['`', '~']).trim();
        return (looks_like_path(info)).then(|| info.to_string());
    }
    if t == "..." {
        return None;
    }
    let name = t
        .trim_end_matches(':')
        .trim_start_matches('#')
        .trim()
        .trim_matches('`')
        .trim_matches('*')
        .trim();
    (!name.is_empty() && !name.contains(char::is_whitespace)).then(|| name.to_string())
}

/// A name that can only be a path: a `.` or `/` in it and nothing but path characters
/// (`Tooooo`, `Done:` and `foo.bar()` are prose or code, `app.py` and `src/Makefile` are
/// paths).
pub(super) fn looks_like_path(name: &str) -> bool {
    name.contains(['.', '/', '\\'])
        && name.chars().any(char::is_alphanumeric)
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || "._-/\\+@~".contains(c))
}

/// The names written in the (up to three) lines above a block, nearest first: going up through
/// fence lines, and stopping at the first line that is not one.
fn names_above(lines: &[&str]) -> Vec<String> {
    let mut names = Vec::new();
    for line in lines.iter().rev().take(3) {
        if let Some(n) = name_on(line) {
            names.push(n);
        }
        if !is_fence(line) {
            break;
        }
    }
    names
}

/// Every block of `text`, in order. An error says what is malformed.
pub(super) fn parse(text: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !is_head(lines[i]) {
            i += 1;
            continue;
        }
        let names = names_above(&lines[i.saturating_sub(3)..i]);
        let start = i + 1;
        let Some(mid) = (start..lines.len()).find(|&j| is_divider(lines[j]) || is_tail(lines[j]))
        else {
            return Err("a SEARCH block has no `=======` or `>>>>>>> REPLACE` line".into());
        };
        if !is_divider(lines[mid]) {
            return Err("a SEARCH block closes before its `=======` line".into());
        }
        let Some(end) = (mid + 1..lines.len()).find(|&j| is_tail(lines[j]) || is_head(lines[j]))
        else {
            return Err(
                "a SEARCH block has no `>>>>>>> REPLACE` line (was the reply cut off?); nothing was changed"
                    .into(),
            );
        };
        if is_head(lines[end]) {
            return Err(format!(
                "a SEARCH block has no `>>>>>>> REPLACE` line before the next `<<<<<<< SEARCH` (line {})",
                end + 1
            ));
        }
        blocks.push(Block {
            names,
            search: lines[start..mid].join("\n"),
            replace: lines[mid + 1..end].join("\n"),
        });
        i = end + 1;
    }
    Ok(blocks)
}

/// `name` (as written above a block) is `path`: the same path, its tail (`file3.py` for
/// `dir/file3.py`), or the file's own name with a slip in punctuation only (`file1_py` for
/// `file1.py`; `test_a.py` is never `test_b.py`).
fn names_path(name: &str, path: &str) -> bool {
    let clean = |s: &str| s.replace('\\', "/").trim_start_matches("./").to_string();
    let (name, path) = (clean(name), clean(path));
    if name == path || path.ends_with(&format!("/{name}")) || name.ends_with(&format!("/{path}")) {
        return true;
    }
    let alnum = |s: &str| -> String { s.chars().filter(|c| c.is_alphanumeric()).collect() };
    let base = path.rsplit('/').next().unwrap_or(&path);
    !name.contains('/') && alnum(&name).chars().count() >= 3 && alnum(&name) == alnum(base)
}

/// The one file the blocks edit: `path` when given (a block named for another file is an
/// error, never an edit of `path`), else the name written above the first block (later blocks
/// may repeat it or name nothing). Several files in one call are refused: one file per call.
pub(super) fn assign_files(blocks: &[Block], path: Option<&str>) -> Result<String, String> {
    let mut file: Option<String> = path.map(str::to_string);
    for (i, b) in blocks.iter().enumerate() {
        let named = match &file {
            Some(f) => {
                if b.names.iter().any(|n| names_path(n, f)) {
                    continue;
                }
                b.names.iter().find(|n| looks_like_path(n))
            }
            None => b
                .names
                .iter()
                .find(|n| looks_like_path(n))
                .or(b.names.first()),
        };
        match (&file, named) {
            (None, Some(n)) => file = Some(n.clone()),
            (None, None) => {
                return Err(
                    "missing filename: write the file's path alone on the line before the first `<<<<<<< SEARCH` (or before its opening fence), or give `path`"
                        .into(),
                );
            }
            (Some(f), Some(n)) => {
                return Err(if path.is_some() {
                    format!(
                        "block {} is written for `{n}`, but `path` is `{f}`: nothing was changed. Edit one file per call, with `path` naming it",
                        i + 1
                    )
                } else {
                    format!(
                        "block 1 edits `{f}`, but block {} names `{n}`: one call edits one file, so nothing was changed. Send a separate call for each file",
                        i + 1
                    )
                });
            }
            (Some(_), None) => {}
        }
    }
    file.ok_or_else(|| "no `<<<<<<< SEARCH` block found".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str, path: Option<&str>) -> Result<(String, Vec<(String, String)>), String> {
        let blocks = parse(text)?;
        let file = assign_files(&blocks, path)?;
        Ok((
            file,
            blocks.into_iter().map(|b| (b.search, b.replace)).collect(),
        ))
    }

    #[test]
    fn names_fences_and_prose_around_blocks() {
        let reply = "Here's the change:\n\n```text\nfoo.txt\n<<<<<<< SEARCH\nTwo\n=======\nTooooo\n>>>>>>> REPLACE\n```\n\n...\n\n<<<<<<< SEARCH\nthree\n=======\nfour\n>>>>>>> REPLACE\n```\nHope you like it!\n";
        let (file, pairs) = one(reply, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(file, "foo.txt");
        assert_eq!(
            pairs,
            vec![
                ("Two".into(), "Tooooo".into()),
                ("three".into(), "four".into())
            ]
        );
        // The name above the fence, a fence holding only the name (a model's slip), a heading.
        for reply in [
            "foo.txt\n```text\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```",
            " ```python\nfoo.txt\n```\n```python\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```",
            "# foo.txt\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE",
            "`foo.txt`:\n------- SEARCH\na\n=======\nb\n+++++++ REPLACE",
        ] {
            assert_eq!(
                one(reply, None).map(|r| r.0),
                Ok("foo.txt".into()),
                "{reply}"
            );
        }
    }

    #[test]
    fn a_block_never_edits_a_file_it_is_not_written_for() {
        let block =
            |name: &str| format!("{name}\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n");
        // The same file, its tail, a one-character slip: `path`.
        for name in [
            "dir/file3.py",
            "file3.py",
            "./dir/file3.py",
            "file3_py",
            "# file3.py",
            "```dir/file3.py",
        ] {
            assert_eq!(
                one(&block(name), Some("dir/file3.py")).map(|r| r.0),
                Ok("dir/file3.py".into()),
                "{name}"
            );
        }
        // Another file: refused, whatever `path` says.
        for name in [
            "other.py",
            "dir/other.py",
            "lib/file3.py",
            "file4.py",
            "dir_file3.py",
        ] {
            let err = one(&block(name), Some("dir/file3.py")).unwrap_err();
            assert!(err.contains("nothing was changed"), "{name}: {err}");
        }
        // Two files in one reply: one call edits one file.
        let two = format!("{}\n{}", block("a.txt"), block("b.txt"));
        let err = one(&two, None).unwrap_err();
        assert!(
            err.contains("names `b.txt`") && err.contains("one file"),
            "{err}"
        );
        // Once named, a block may name its file again or not at all.
        let again = format!(
            "{}\n{}\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE",
            block("a.txt"),
            block("a.txt")
        );
        assert_eq!(one(&again, None).map(|r| r.1.len()), Ok(3));
        // Prose or code above a block is not a file name.
        assert_eq!(
            one(&block("`foo.bar()`:"), Some("x.rs")).map(|r| r.0),
            Ok("x.rs".into())
        );
        assert_eq!(
            one(
                "Change this:\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE",
                Some("x.rs")
            )
            .map(|r| r.0),
            Ok("x.rs".into())
        );
    }

    #[test]
    fn malformed_replies_say_what_is_missing() {
        let err = one("<<<<<<< SEARCH\nTwo\n=======\nTooooo\n", None).unwrap_err();
        assert!(err.contains("no `>>>>>>> REPLACE` line"), "{err}");
        let err = one("a.txt\n<<<<<<< SEARCH\nTwo\n>>>>>>> REPLACE\n", None).unwrap_err();
        assert!(err.contains("closes before its `=======`"), "{err}");
        // A marker needs its space: `-------SEARCH` starts no block.
        assert_eq!(
            parse("-------SEARCH\na\n=======\nb\n+++++++ REPLACE"),
            Ok(vec![])
        );
        let err = one(
            "```text\n<<<<<<< SEARCH\nTwo\n=======\nT\n>>>>>>> REPLACE\n",
            None,
        )
        .unwrap_err();
        assert!(err.contains("missing filename"), "{err}");
        let err = one(
            "a.txt\n<<<<<<< SEARCH\nx\n=======\ny\n<<<<<<< SEARCH\nz\n=======\nw\n>>>>>>> REPLACE",
            None,
        )
        .unwrap_err();
        assert!(err.contains("before the next"), "{err}");
    }
}

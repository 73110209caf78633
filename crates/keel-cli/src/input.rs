//! Where `keel run`'s task comes from: the arguments, standard input (`keel run -`, or a pipe
//! with no task arguments), and `@path` mentions that attach a workspace file to the task.

use std::io::{IsTerminal, Read};
use std::path::Path;

use keel_tools::fs::FileKind;
use keel_tools::project::{Problem, ProjectDir};

use crate::setup::UsageError;

/// The most a task read from standard input may hold.
const MAX_STDIN_BYTES: u64 = 1024 * 1024;
/// The most one attached file may hold (larger files: the agent reads them itself).
const MAX_ATTACHMENT_BYTES: u64 = 100 * 1024;
/// The most files one task may attach.
const MAX_ATTACHMENTS: usize = 10;

/// The task text from the arguments: `-` alone reads standard input, and so do no arguments
/// when standard input is a pipe or a file (not a terminal). `resuming` allows an empty task.
pub fn task_text(args: &[String], resuming: bool) -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    let wants_stdin = match args {
        [only] if only == "-" => true,
        [] => !resuming && !stdin.is_terminal(),
        _ => false,
    };
    if !wants_stdin {
        return Ok(args.join(" "));
    }
    let mut text = String::new();
    stdin
        .lock()
        .take(MAX_STDIN_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| UsageError(format!("cannot read the task from standard input: {e}")))?;
    if text.len() as u64 > MAX_STDIN_BYTES {
        return Err(UsageError(format!(
            "the task on standard input is over {} KB; put the material in a file in the workspace and mention it as @path",
            MAX_STDIN_BYTES / 1024
        ))
        .into());
    }
    Ok(text.trim().to_string())
}

/// A mention meant as a file: it has a directory part or a file extension.
fn looks_like_path(rel: &str) -> bool {
    rel.contains('/')
        || Path::new(rel).extension().is_some_and(|e| {
            !e.is_empty()
                && e.to_str()
                    .is_some_and(|e| e.chars().all(|c| c.is_ascii_alphanumeric()))
        })
}

/// Appends the files the task mentions as `@path` (relative to `workspace`) to the task, each
/// in a fenced block under its path. A mention that names no file is left as written
/// (`@decorator`, `@alice`) unless it looks like a path (`@src/nope.rs`: an error); one that
/// names a file outside the workspace, a binary
/// file or one over 100 KB is a usage error saying what to do.
pub fn attach_mentioned_files(
    task: &str,
    workspace: &Path,
) -> anyhow::Result<(String, Vec<String>)> {
    let mut attached: Vec<(String, String)> = Vec::new();
    let project = ProjectDir::open(workspace).map_err(|e| {
        UsageError(format!(
            "cannot open the workspace {}: {e}",
            workspace.display()
        ))
    })?;
    for word in task.split_whitespace() {
        let Some(raw) = word.strip_prefix('@') else {
            continue;
        };
        // Trailing punctuation belongs to the sentence, not the path.
        let rel = raw.trim_end_matches([',', '.', ';', ':', ')', '!', '?', '"', '\'']);
        if rel.is_empty() || attached.iter().any(|(p, _)| p == rel) {
            continue;
        }
        let outside = || {
            UsageError(format!(
                "@{rel} is outside the workspace ({}); only workspace files can be attached",
                workspace.display()
            ))
        };
        if Path::new(rel).is_absolute() || rel.split('/').any(|c| c == "..") {
            // Named outside the workspace: an error if it names a file, else left as written.
            if workspace.join(rel).is_file() {
                return Err(outside().into());
            }
            continue;
        }
        // Read as a project file: beneath the workspace, regular, bounded, never blocking.
        // `@alice` is a name; `@src/nope.rs` or `@notes.md` meant a file that is not there.
        let missing = || {
            UsageError(format!(
                "@{rel}: no such file in the workspace ({}); check the path (relative to the workspace), or write it without @",
                workspace.display()
            ))
        };
        let text = match project.read(rel, MAX_ATTACHMENT_BYTES) {
            Ok(Some(text)) => text,
            Ok(None) if looks_like_path(rel) => return Err(missing().into()),
            Ok(None) => continue,
            Err(e) => {
                return Err(match e.problem {
                    Problem::Dangling if looks_like_path(rel) => missing(),
                    Problem::NotRegular(FileKind::Dir) | Problem::Dangling => continue,
                    Problem::LinksOut { .. } => outside(),
                    Problem::TooLarge { .. } => UsageError(format!(
                        "@{rel} is over the {} KB an attachment may have; mention it without @ and the agent will read the parts it needs",
                        MAX_ATTACHMENT_BYTES / 1024
                    )),
                    Problem::NotUtf8 => UsageError(format!(
                        "@{rel} is not UTF-8 text and cannot be attached; mention it without @"
                    )),
                    other => UsageError(format!("@{rel}: cannot be read: it {other}")),
                }
                .into());
            }
        };
        if attached.len() == MAX_ATTACHMENTS {
            return Err(UsageError(format!(
                "the task attaches more than {MAX_ATTACHMENTS} files; mention the rest by path without @ and the agent will read them"
            ))
            .into());
        }
        attached.push((rel.to_string(), text));
    }
    let names: Vec<String> = attached.iter().map(|(p, _)| p.clone()).collect();
    if attached.is_empty() {
        return Ok((task.to_string(), names));
    }
    let mut out = task.to_string();
    out.push_str("\n\nAttached files:");
    for (path, text) in attached {
        let fence = if text.contains("```") { "````" } else { "```" };
        out.push_str(&format!("\n\n{path}\n{fence}\n{}", text.trim_end()));
        out.push_str(&format!("\n{fence}"));
    }
    Ok((out, names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentioned_files_are_attached_and_other_mentions_left_alone() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ws = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(ws.join("src")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("src/a.rs"), "fn a() {}\n").unwrap_or_else(|e| panic!("{e}"));
        let (out, names) = attach_mentioned_files("fix @src/a.rs, thanks to @alice", &ws)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names, ["src/a.rs"]);
        assert!(out.starts_with("fix @src/a.rs, thanks to @alice\n\nAttached files:"));
        assert!(out.contains("src/a.rs\n```\nfn a() {}\n```"), "{out}");
        assert!(!out.contains("alice\n```"));
        let (plain, none) =
            attach_mentioned_files("no mentions", &ws).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plain, "no mentions");
        assert!(none.is_empty());
        // A mention that names a file which is not there is an error, not silence.
        let err = attach_mentioned_files("document @src/nope.rs", &ws)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("@src/nope.rs: no such file in the workspace"),
            "{err}"
        );
        assert!(attach_mentioned_files("see @notes.md", &ws).is_err());
        assert!(attach_mentioned_files("ask @bob", &ws).is_ok());
    }

    #[test]
    fn files_outside_the_workspace_or_binary_are_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let ws = root.join("ws");
        std::fs::create_dir_all(&ws).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("secret.txt"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("blob.bin"), [0xff, 0xfe, 0x00]).unwrap_or_else(|e| panic!("{e}"));
        let e = attach_mentioned_files("read @../secret.txt", &ws)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("outside the workspace"), "{e}");
        let e = attach_mentioned_files("read @blob.bin", &ws)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("not UTF-8"), "{e}");
    }
}

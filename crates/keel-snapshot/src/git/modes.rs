//! Private files keep their mode through an undo (red-team pass 5, R5-9: a 0600 `.env` came
//! back 0644 — readable by every user of the machine). Git records only "executable or not",
//! so a snapshot notes, in its commit message, the permission bits of the files it read that
//! others may not read (`mode & 0o044 != 0o044`): every untracked, changed and ignored file
//! staging looks at anyway (no extra walk). A restore gives each file it writes the mode the
//! snapshot noted; a file it rewrites that the snapshot did not note keeps the mode it had
//! (git's executable bit applied), instead of the umask's.

use std::collections::HashMap;

use super::Git;

/// The line that starts the list in a snapshot's message.
const MARKER: &str = "keel-private-modes:";
/// The line that starts the list of files left out for their size.
const LEFT_OUT: &str = "keel-left-out:";
/// The most files noted per snapshot, per list.
const MAX_NOTED: usize = 2_000;
/// The most bytes of notes per list.
const MAX_NOTES_BYTES: usize = 256 * 1024;

/// Whether a file with permission bits `mode` is private (group or others cannot read it).
pub(crate) fn is_private(mode: u32) -> bool {
    mode & 0o044 != 0o044
}

/// `message` with the private files' modes and the files left out for their size appended
/// (paths holding a newline are not noted): a restore to this snapshot leaves the latter alone
/// instead of removing them (they were there, unrecorded).
pub(crate) fn with_notes(message: &str, modes: &[(Vec<u8>, u32)], left_out: &[String]) -> String {
    let mut out = with_modes(message, modes);
    let listed: Vec<&String> = left_out
        .iter()
        .filter(|p| !p.contains('\n'))
        .take(MAX_NOTED)
        .scan(0usize, |bytes, p| {
            *bytes += p.len() + 1;
            (*bytes <= MAX_NOTES_BYTES).then_some(p)
        })
        .collect();
    if !listed.is_empty() {
        out.push_str("\n\n");
        out.push_str(LEFT_OUT);
        for p in listed {
            out.push_str(&format!("\n{p}"));
        }
    }
    out
}

/// `message` with the private files' modes appended (paths holding a newline are not noted).
fn with_modes(message: &str, modes: &[(Vec<u8>, u32)]) -> String {
    let mut out = message.to_string();
    let mut noted = 0;
    for (path, mode) in modes {
        let Ok(path) = std::str::from_utf8(path) else {
            continue;
        };
        if path.contains('\n') || noted >= MAX_NOTED || out.len() > MAX_NOTES_BYTES {
            continue;
        }
        if noted == 0 {
            out.push_str("\n\n");
            out.push_str(MARKER);
        }
        out.push_str(&format!("\n{:04o} {path}", mode & 0o7777));
        noted += 1;
    }
    out
}

/// The modes noted in a snapshot's message.
fn parse(message: &str) -> HashMap<String, u32> {
    let Some((_, list)) = message.split_once(MARKER) else {
        return HashMap::new();
    };
    let list = list.split(LEFT_OUT).next().unwrap_or("");
    list.lines()
        .filter_map(|l| {
            let (mode, path) = l.split_once(' ')?;
            let mode = u32::from_str_radix(mode, 8).ok()?;
            Some((path.to_string(), mode & 0o7777))
        })
        .collect()
}

impl Git {
    /// The private files' modes and the files left out for their size noted in `commit`'s
    /// message (empty when it cannot be read).
    pub(crate) fn noted(&self, commit: &str) -> (HashMap<String, u32>, Vec<String>) {
        let message = self
            .stdout(&["rev-list", "--max-count=1", "--format=%B", commit])
            .unwrap_or_default();
        let left_out = message
            .split_once(LEFT_OUT)
            .map(|(_, l)| {
                l.lines()
                    .skip(1)
                    .take_while(|p| !p.is_empty())
                    .filter(|p| !p.trim().is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        (parse(&message), left_out)
    }

    /// The permission bits of the workspace file `rel` now (`None`: not a regular file).
    pub(crate) fn mode_now(&self, rel: &str) -> Option<u32> {
        let ws = keel_tools::Workspace::new(&self.workspace).ok()?;
        let info = ws.locate_entry(rel).ok()?.info().ok()??;
        (info.kind == keel_tools::fs::FileKind::File).then_some(info.mode & 0o7777)
    }

    /// Gives the restored file `rel` permission bits `mode`, through a descriptor opened
    /// beneath the workspace without following links. Best effort.
    pub(crate) fn set_mode(&self, rel: &str, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        let Ok(ws) = keel_tools::Workspace::new(&self.workspace) else {
            return;
        };
        let Ok(target) = ws.locate_entry(rel) else {
            return;
        };
        if let Ok((file, info)) = target.open_regular()
            && info.mode & 0o7777 != mode
        {
            let _ = file.set_permissions(std::fs::Permissions::from_mode(mode));
        }
    }
}

/// The mode a rewritten file gets when the snapshot noted none: the one it had, with git's
/// executable bit (`git_mode`: `100755` or `100644`) applied.
pub(crate) fn kept(before: u32, git_mode: &str) -> u32 {
    if git_mode == "100755" {
        // Executable wherever it is readable, as git makes it.
        before | ((before & 0o444) >> 2)
    } else {
        before & !0o111
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_through_the_message() {
        let m = with_notes(
            "keel snapshot",
            &[(b".env".to_vec(), 0o600), (b"a b/c".to_vec(), 0o640)],
            &["big.bin".to_string()],
        );
        let parsed = parse(&m);
        assert_eq!(parsed.len(), 2, "{m}");
        assert!(m.ends_with("keel-left-out:\nbig.bin"), "{m}");
        assert_eq!(parsed.get(".env"), Some(&0o600));
        assert_eq!(parsed.get("a b/c"), Some(&0o640));
        assert_eq!(with_modes("x", &[]), "x");
        assert_eq!(kept(0o600, "100755"), 0o700);
        assert_eq!(kept(0o700, "100644"), 0o600);
    }
}

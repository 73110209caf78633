//! Credentials in the user's git configuration, kept from commands (red-team pass 9, R9-12).
//!
//! `~/.gitconfig` and `~/.config/git/config` often hold tokens: `http.<url>.extraHeader =
//! AUTHORIZATION: basic …` (GitHub Actions' and GitLab's documented setup), `github.token`,
//! `hub.oauthtoken`, a `url."https://oauth2:glpat-…@gitlab.com/".insteadOf`. The credential
//! stores (`~/.git-credentials`) are hidden; the configuration cannot be — git inside the
//! sandbox needs the user's name, aliases and settings. So each command sees a copy without
//! the secrets, bind-mounted read-only over the original: lines whose key names a credential
//! are left out (with the lines that continue them), and the user-and-password part of every
//! `http(s)://` URL is dropped wherever it stands (a section's name included).

use std::path::{Path, PathBuf};

/// The most bytes of a configuration file read; a larger one is hidden whole.
const MAX_BYTES: u64 = 1 << 20;

/// Keys (the last part of `section.sub.key`, compared without regard to case) that hold a
/// credential.
const SECRET_KEYS: &[&str] = &[
    "extraheader",
    "token",
    "oauthtoken",
    "accesstoken",
    "password",
    "passwd",
    "pass",
    "secret",
    "apikey",
    "api-key",
    "api_key",
    "privatetoken",
];

/// What a command is shown in place of the user's git configuration files: `(file, copy)` for
/// each that holds a credential — the copy written into `dir` (the command's private
/// temporary directory) — and the files to hide whole (unreadable or too large).
pub(super) fn replacements(dir: &Path) -> (Vec<(PathBuf, PathBuf)>, Vec<PathBuf>) {
    let (mut replaced, mut hidden) = (Vec::new(), Vec::new());
    // The user's files, and the files they include (a token is often kept apart in one).
    let mut queue: Vec<(PathBuf, usize)> = super::git_includes::user_config_files()
        .into_iter()
        .map(|f| (f, 0))
        .collect();
    let mut seen: Vec<PathBuf> = Vec::new();
    while let Some((file, depth)) = queue.pop() {
        if seen.contains(&file) || seen.len() >= MAX_FILES {
            continue;
        }
        seen.push(file.clone());
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if meta.len() > MAX_BYTES {
            hidden.push(file);
            continue;
        }
        // Bounded; a FIFO or a device is never opened.
        let text = match keel_fs::project::read_user_file(&file, MAX_BYTES) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(_) => {
                hidden.push(file);
                continue;
            }
        };
        if depth < MAX_DEPTH {
            let base = file.parent().unwrap_or(Path::new("/"));
            queue.extend(includes(&text, base).into_iter().map(|f| (f, depth + 1)));
        }
        let Some(scrubbed) = scrub(&text) else {
            continue;
        };
        let copy = dir.join(format!(".keel-gitconfig-{}", seen.len()));
        if std::fs::write(&copy, scrubbed).is_ok() {
            replaced.push((file, copy));
        } else {
            hidden.push(file);
        }
    }
    (replaced, hidden)
}

/// The most configuration files looked at (the user's and what they include).
const MAX_FILES: usize = 16;
/// How deep includes are followed.
const MAX_DEPTH: usize = 5;

/// The files `text` includes (`[include]` / `[includeIf …]` `path`), resolved as git does:
/// `~/` from the home, relative paths from `base` (the including file's directory).
fn includes(text: &str, base: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut in_include = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            let head = t.to_ascii_lowercase();
            in_include = head.starts_with("[include]") || head.starts_with("[includeif");
            continue;
        }
        if !in_include {
            continue;
        }
        let Some((key, value)) = t.split_once('=') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("path") {
            continue;
        }
        let value = value.trim().trim_matches('"');
        let path = match value.strip_prefix("~/") {
            Some(rest) => match std::env::var_os("HOME") {
                Some(h) => PathBuf::from(h).join(rest),
                None => continue,
            },
            None => base.join(value),
        };
        out.push(path);
    }
    out
}

/// `text` without its credentials; `None` when it holds none.
pub(super) fn scrub(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut dropping = false;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        if dropping {
            // A value continued with a trailing backslash goes with its key.
            dropping = body.ends_with('\\');
            continue;
        }
        let trimmed = body.trim_start();
        if !trimmed.starts_with('[') && is_secret_key(trimmed) {
            changed = true;
            dropping = body.ends_with('\\');
            continue;
        }
        let cleaned = without_userinfo(line);
        changed |= cleaned != line;
        out.push_str(&cleaned);
    }
    changed.then_some(out)
}

/// Whether the line `key = value` (or a bare `key`) sets a credential-holding key: one of
/// [`SECRET_KEYS`], any key naming a password, token or secret (`sendemail.smtpPass`), or a
/// credential helper given inline as a shell snippet (`helper = "!f() { echo password=…; }; f"`).
fn is_secret_key(line: &str) -> bool {
    let (key, value) = line.split_once('=').unwrap_or((line, ""));
    let key = key.trim().to_ascii_lowercase();
    SECRET_KEYS.contains(&key.as_str())
        || ["pass", "token", "secret"].iter().any(|w| key.contains(w))
        || (key == "helper" && value.trim().trim_start_matches('"').starts_with('!'))
}

/// `line` with the `user:password@` part of every `http://` / `https://` URL removed.
fn without_userinfo(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = authority_start(rest) {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        // The authority ends at the first '/', quote, whitespace or end.
        let end = tail
            .find(|c: char| c == '/' || c == '"' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(i) => out.push_str(&authority[i + 1..]),
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Where the authority of the next `http://` or `https://` URL in `s` begins.
fn authority_start(s: &str) -> Option<usize> {
    let lower = s.to_ascii_lowercase();
    let a = lower.find("https://").map(|i| (i, i + 8));
    let b = lower.find("http://").map(|i| (i, i + 7));
    match (a, b) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a.1 } else { b.1 }),
        (a, b) => a.or(b).map(|x| x.1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_left_out_and_the_rest_kept() {
        let text = "[user]\n\tname = Ada\n\temail = ada@example.com\n\
            [http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic eC1hY2Nlc3M=\n\
            [github]\n\ttoken = ghp_secret\n\tuser = ada\n\
            [url \"https://oauth2:glpat-secret@gitlab.com/\"]\n\tinsteadOf = https://gitlab.com/\n\
            [remote \"origin\"]\n\turl = https://ada:pw@example.com/r.git\n\
            [alias]\n\tco = checkout\n\
            [hub]\n\tOAuthToken = long \\\n\tcontinued\n\tprotocol = https\n\
            [sendemail]\n\tsmtpPass = hunter2\n\tsmtpServer = mail.example.com\n\
            [credential]\n\thelper = \"!f() { echo password=inline-secret; }; f\"\n\thelper = cache\n";
        let out = scrub(text).unwrap();
        for secret in [
            "eC1hY2Nlc3M",
            "ghp_secret",
            "glpat-secret",
            "pw@",
            "continued",
        ] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        for kept in [
            "name = Ada",
            "email = ada@example.com",
            "user = ada",
            "[url \"https://gitlab.com/\"]",
            "url = https://example.com/r.git",
            "co = checkout",
            "protocol = https",
            "smtpServer = mail.example.com",
            "helper = cache",
        ] {
            assert!(out.contains(kept), "{kept} missing from {out}");
        }
        assert_eq!(
            scrub("[user]\n\tname = Ada\n[url \"ssh://git@host/\"]\n"),
            None
        );
    }

    #[test]
    fn included_files_are_found_where_git_finds_them() {
        let got = includes(
            "[user]\n\tpath = no\n[include]\n\tpath = secrets.inc\n[includeIf \"gitdir:~/w/\"]\n\tpath = \"/etc/x.inc\"\n",
            Path::new("/home/u"),
        );
        assert_eq!(
            got,
            [
                PathBuf::from("/home/u/secrets.inc"),
                PathBuf::from("/etc/x.inc")
            ]
        );
    }
}

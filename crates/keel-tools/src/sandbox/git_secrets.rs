//! Credentials in the user's git configuration, kept from commands (red-team pass 9, R9-12).
//!
//! `~/.gitconfig` and `~/.config/git/config` often hold tokens: `http.<url>.extraHeader =
//! AUTHORIZATION: basic …` (GitHub Actions' and GitLab's documented setup), `github.token`,
//! `hub.oauthtoken`, a `url."https://oauth2:glpat-…@gitlab.com/".insteadOf`. The credential
//! stores (`~/.git-credentials`) are hidden; the configuration cannot be — git inside the
//! sandbox needs the user's name, aliases and settings. So each command sees a copy without
//! the secrets, bind-mounted read-only over the original: lines whose key names a credential
//! are left out (with the lines that continue them; a key on its section's line, `[http
//! "https://github.com/"] extraheader = …`, is one too: red-team pass 10, R10-2), and the
//! user-and-password part of every `http(s)://` URL is dropped wherever it stands (a section's
//! name included). The files the configuration names as credential material — a `store`
//! helper's `--file`, `http.cookieFile`, `http.sslKey`, an `ssh -i` key in `core.sshCommand` —
//! are hidden like the stores (R10-2: `store --file ~/.config/mycreds` was readable).

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

/// What a command is shown in place of the user's git configuration files and those of the
/// `workspace`'s repository: `(file, copy)` for each that holds a credential — the copy
/// written into `dir` (the command's private temporary directory) — and the files to hide
/// whole (unreadable or too large).
pub(super) fn replacements(
    dir: &Path,
    workspace: Option<&Path>,
) -> (Vec<(PathBuf, PathBuf)>, Vec<PathBuf>) {
    let (mut replaced, mut hidden) = (Vec::new(), Vec::new());
    // The user's files, and the files they include (a token is often kept apart in one); the
    // repository's own (red-team pass 10, R10-10: `actions/checkout` leaves the job's token
    // as `http.https://github.com/.extraheader` in `.git/config`).
    let mut queue: Vec<(PathBuf, usize)> = super::git_includes::user_config_files()
        .into_iter()
        .chain(workspace.map(repository_config_files).unwrap_or_default())
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
        for named in credential_files(&text) {
            if named.is_file() && !hidden.contains(&named) {
                hidden.push(named);
            }
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

/// The most configuration files looked at (the user's, the repository's and what they
/// include).
const MAX_FILES: usize = 32;

/// The configuration files of the repository at `workspace` (`.git/config`,
/// `config.worktree`, and its submodules' under `.git/modules`, bounded).
fn repository_config_files(workspace: &Path) -> Vec<PathBuf> {
    let git = workspace.join(".git");
    if !git.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        return Vec::new();
    }
    let mut out = vec![git.join("config"), git.join("config.worktree")];
    let mut stack = vec![(git.join("modules"), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten().take(64) {
            if !e.file_type().is_ok_and(|t| t.is_dir()) || out.len() >= MAX_FILES / 2 {
                continue;
            }
            let path = e.path();
            if path.join("config").is_file() {
                out.push(path.join("config"));
            }
            if depth < 3 {
                stack.push((path.join("modules"), depth + 1));
            }
        }
    }
    out
}

/// Whether the workspace-relative `rel` names a git configuration file of a repository
/// (`.git/config`, `.git/config.worktree`, `.git/modules/…/config`): the file tools show it
/// [`scrub`]bed.
pub(crate) fn is_repository_config(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    let Some(last) = parts.last() else {
        return false;
    };
    (*last == "config" || *last == "config.worktree") && parts[..parts.len() - 1].contains(&".git")
}
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
        }
        if !in_include {
            continue;
        }
        // The key may follow the header on its line.
        let Some((key, value)) = key_line(t).and_then(|k| k.split_once('=')) else {
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

/// `value` as a path git reads: `~/` from the home; only absolute paths otherwise (a
/// relative one depends on where git runs).
fn config_path(value: &str) -> Option<PathBuf> {
    let value = value.trim().trim_matches('"');
    match value.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(rest)),
        None => Some(PathBuf::from(value)).filter(|p| p.is_absolute()),
    }
}

/// The files `text` names as credential material: a `store` helper's `--file` (`helper =
/// store --file ~/.config/mycreds`), `cookieFile`, `sslKey`, and the `-i` key of an
/// `sshCommand`. Keys on a section's line count as well.
fn credential_files(text: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = key_line(line).and_then(|k| k.split_once('=')) else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim().trim_matches('"');
        let words: Vec<&str> = value.split_whitespace().collect();
        match key.as_str() {
            "cookiefile" | "sslkey" => out.extend(config_path(value)),
            "helper" if words.first() == Some(&"store") => {
                for (i, w) in words.iter().enumerate() {
                    if let Some(f) = w.strip_prefix("--file=") {
                        out.extend(config_path(f));
                    } else if *w == "--file" {
                        out.extend(words.get(i + 1).and_then(|f| config_path(f)));
                    }
                }
            }
            "sshcommand" => {
                for (i, w) in words.iter().enumerate() {
                    if *w == "-i" {
                        out.extend(words.get(i + 1).and_then(|f| config_path(f)));
                    } else if let Some(f) = w.strip_prefix("-i").filter(|f| !f.is_empty()) {
                        out.extend(config_path(f));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The `key = value` part of a configuration line: the line itself, or what follows the
/// section header on the same line (`[http "…"] extraheader = …`); `None` for a bare header
/// or a comment.
fn key_line(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with(';') {
        return None;
    }
    let rest = if t.starts_with('[') {
        t[header_len(t)?..].trim_start()
    } else {
        t
    };
    (!rest.is_empty() && !rest.starts_with('#') && !rest.starts_with(';')).then_some(rest)
}

/// The length of the section header `t` starts with (`[http "https://x/"]`), quotes
/// respected; `None` when it does not close.
fn header_len(t: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in t.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ']' if !quoted => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// `text` without its credentials; `None` when it holds none.
pub(crate) fn scrub(text: &str) -> Option<String> {
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
        // A credential on its section's line: the header stays, the key goes.
        if trimmed.starts_with('[')
            && let Some(end) = header_len(trimmed)
            && key_line(trimmed).is_some_and(is_secret_key)
        {
            changed = true;
            dropping = body.ends_with('\\');
            out.push_str(&without_userinfo(&trimmed[..end]));
            out.push('\n');
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

    /// Red-team pass 10, R10-2: git accepts a key on its section's line.
    #[test]
    fn a_credential_on_its_sections_line_is_left_out() {
        let text = "[http \"https://github.com/\"] extraheader = AUTHORIZATION: basic U0FNRUxJTkU=\n\
            [user] name = Ada\n[core]\n\teditor = vim\n";
        let out = scrub(text).unwrap();
        assert!(!out.contains("U0FNRUxJTkU"), "{out}");
        assert!(out.contains("[http \"https://github.com/\"]\n"), "{out}");
        assert!(out.contains("[user] name = Ada"), "{out}");
        assert!(out.contains("editor = vim"), "{out}");
        assert_eq!(scrub("[user] name = Ada\n"), None);
    }

    #[test]
    fn the_files_the_configuration_names_as_credentials_are_found() {
        let text = "[credential \"https://bitbucket.org\"]\n\thelper = store --file /srv/creds\n\
            [credential] helper = store --file=/srv/creds2\n\
            [credential]\n\thelper = cache --timeout 60\n\
            [http]\n\tcookieFile = /srv/cookies\n\tsslKey = \"/srv/key.pem\"\n\tsslCert = /srv/cert.pem\n\
            [core]\n\tsshCommand = ssh -i /srv/id_deploy -o IdentitiesOnly=yes\n\
            [http] cookieFile = relative/cookies\n";
        assert_eq!(
            credential_files(text),
            [
                "/srv/creds",
                "/srv/creds2",
                "/srv/cookies",
                "/srv/key.pem",
                "/srv/id_deploy"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn included_files_are_found_where_git_finds_them() {
        let got = includes(
            "[user]\n\tpath = no\n[include]\n\tpath = secrets.inc\n[includeIf \"gitdir:~/w/\"]\n\tpath = \"/etc/x.inc\"\n[include] path = same-line.inc\n",
            Path::new("/home/u"),
        );
        assert_eq!(
            got,
            [
                PathBuf::from("/home/u/secrets.inc"),
                PathBuf::from("/etc/x.inc"),
                PathBuf::from("/home/u/same-line.inc")
            ]
        );
    }
}

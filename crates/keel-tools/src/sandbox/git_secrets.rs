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
        // A linked worktree's common directory, nested repositories, submodules (R10-25).
        .chain(
            workspace
                .map(super::git_includes::repository_config_files)
                .unwrap_or_default(),
        )
        .map(|f| (f, 0))
        .collect();
    let repo_configs: Vec<PathBuf> = queue.iter().map(|(f, _)| f.clone()).collect();
    hidden.extend(
        crypt_keys(&repo_configs)
            .into_iter()
            .filter(|k| k.is_file()),
    );
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
        for named in credential_files(&text, workspace) {
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

/// Sections whose values name programs git runs, or files it reads, for ordinary work (a
/// `diff.external`, a clean/smudge filter, an alias): not credential material.
const PROGRAM_SECTIONS: &[&str] = &[
    "filter",
    "diff",
    "difftool",
    "merge",
    "mergetool",
    "pager",
    "alias",
    "include",
    "includeif",
];
/// Keys (`section.key`) whose file values are not credential material.
const KEPT_KEYS: &[&str] = &[
    "core.editor",
    "core.pager",
    "core.fsmonitor",
    "core.hookspath",
    "core.excludesfile",
    "core.attributesfile",
    "core.worktree",
    "sequence.editor",
    "commit.template",
    "init.templatedir",
    "blame.ignorerevsfile",
    "gpg.program",
    "gpg.ssh.program",
    "gpg.x509.program",
    "gpg.ssh.allowedsignersfile",
    "http.sslcainfo",
    "http.sslcapath",
    "web.browser",
];
/// Where a named file is the system's, not the user's.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/opt", "/nix", "/snap", "/proc", "/sys",
    "/dev",
];

/// The files `text` names that may be credential material, by default: every existing file
/// a value names (`~/…` or absolute, anywhere in the value: `store --file ~/creds`,
/// `-oIdentityFile=~/keys/deploy`, `signingKey = ~/keys/git_signing`, `askPass`,
/// `sslCert`, a custom helper's arguments and the helper itself) outside the system
/// directories and the `workspace`, unless its key is one git needs for ordinary work
/// ([`PROGRAM_SECTIONS`], [`KEPT_KEYS`]). A list of credential keys kept missing git's other
/// ways to name a key (red-team pass 10, R10-2, R10-24). Keys on a section's line count too.
fn credential_files(text: &str, workspace: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[')
            && let Some(end) = header_len(t)
        {
            section = t[1..end - 1]
                .split(|c: char| c.is_whitespace() || c == '"' || c == '.')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
        }
        let Some((key, value)) = key_line(line).and_then(|k| k.split_once('=')) else {
            continue;
        };
        let key = format!("{section}.{}", key.trim().to_ascii_lowercase());
        // A shell alias (`!sh ~/bin/gh-pr.sh`) is code the user wrote, often with a token in
        // the script it runs (red-team pass 10, R10-28): not exempt.
        let shell_alias =
            section == "alias" && value.trim_start().trim_start_matches('"').starts_with('!');
        if (PROGRAM_SECTIONS.contains(&section.as_str()) && !shell_alias)
            || KEPT_KEYS.contains(&key.as_str())
        {
            continue;
        }
        for path in value_paths(value) {
            if path.is_file()
                && !SYSTEM_DIRS.iter().any(|d| path.starts_with(d))
                && !workspace.is_some_and(|w| path.starts_with(w))
                && !out.contains(&path)
            {
                out.push(path);
            }
        }
    }
    out
}

/// The paths a configuration value names, written the ways shells write them (red-team pass
/// 10, R10-28): `~/…`, `$HOME/…`, `${HOME}/…` or absolute; inside shell code
/// (`!f() { cat ~/keys/tok; }`), after `=` (`-oIdentityFile=~/k`), and quoted with spaces
/// (`--file "~/my creds"`).
fn value_paths(value: &str) -> Vec<PathBuf> {
    let home = std::env::var("HOME").unwrap_or_default();
    let value = if home.is_empty() {
        value.to_string()
    } else {
        value.replace("${HOME}", &home).replace("$HOME", &home)
    };
    let mut words: Vec<&str> = Vec::new();
    // Quoted stretches whole (a path with a space) …
    for quote in ['"', '\''] {
        words.extend(value.split(quote).skip(1).step_by(2));
    }
    // … and every word between shell punctuation.
    words.extend(
        value
            .split(|c: char| {
                c.is_whitespace()
                    || matches!(
                        c,
                        '"' | '\''
                            | ';'
                            | '('
                            | ')'
                            | '{'
                            | '}'
                            | '|'
                            | '&'
                            | '<'
                            | '>'
                            | '`'
                            | '='
                            | ','
                    )
            })
            .filter(|w| !w.is_empty()),
    );
    let mut out: Vec<PathBuf> = Vec::new();
    for word in words {
        let Some(at) = word.find("~/").or_else(|| word.find('/')) else {
            continue;
        };
        if let Some(path) = config_path(&word[at..])
            && !out.contains(&path)
        {
            out.push(path);
        }
    }
    out
}

/// The key files of git-crypt in the git directories of `configs` (a repository's config
/// files): a long-lived key that decrypts the repository's secrets in all its history
/// (red-team pass 10, R10-27).
fn crypt_keys(configs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in configs.iter().filter_map(|c| c.parent()) {
        let Ok(entries) = std::fs::read_dir(dir.join("git-crypt/keys")) else {
            continue;
        };
        for e in entries.flatten().take(64) {
            let path = e.path();
            match std::fs::read_dir(&path) {
                // git-crypt keeps `keys/<name>` as a file, or a directory of versions.
                Ok(inner) => out.extend(inner.flatten().take(64).map(|i| i.path())),
                Err(_) => out.push(path),
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether the workspace-relative `rel` lies in a repository's git-crypt key store
/// (`.git/git-crypt/`, `.git/modules/…/git-crypt/`): the file tools do not read it.
pub(crate) fn is_crypt_key(rel: &str) -> bool {
    let parts: Vec<&str> = rel.split('/').collect();
    parts
        .iter()
        .position(|p| *p == ".git")
        .is_some_and(|at| parts[at + 1..].contains(&"git-crypt"))
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
    fn paths_are_read_as_shells_write_them() {
        let home = std::env::var("HOME").unwrap_or_default();
        if home.is_empty() {
            return;
        }
        let got = value_paths("ssh -i $HOME/keys/x -o IdentityFile=${HOME}/keys/y");
        assert_eq!(
            got,
            [
                PathBuf::from(format!("{home}/keys/x")),
                PathBuf::from(format!("{home}/keys/y"))
            ]
        );
        let got = value_paths("\"!f() { echo password=$(cat ~/keys/tok); }; f\"");
        assert!(
            got.contains(&PathBuf::from(format!("{home}/keys/tok"))),
            "{got:?}"
        );
        let got = value_paths("store --file \"/srv/my creds\"");
        assert!(got.contains(&PathBuf::from("/srv/my creds")), "{got:?}");
        // A shell alias's script is not exempt; a plain alias's words are not paths.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().canonicalize().unwrap().join("gh-pr.sh");
        std::fs::write(&script, "GITHUB_TOKEN=x gh pr create\n").unwrap();
        let text = format!(
            "[alias]\n\tpr = !sh {}\n\tlg = log --graph\n\tdt = difftool {}\n",
            script.display(),
            script.display()
        );
        assert_eq!(credential_files(&text, None), [script]);
        assert!(is_crypt_key(".git/git-crypt/keys/default"));
        assert!(is_crypt_key(
            "vendor/x/.git/modules/m/git-crypt/keys/default/0/1.key"
        ));
        assert!(!is_crypt_key("docs/git-crypt/keys.md"));
    }

    #[test]
    fn the_files_the_configuration_names_as_credentials_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().canonicalize().unwrap();
        for f in [
            "creds",
            "creds2",
            "cookies",
            "key.pem",
            "id_deploy",
            "id2",
            "signing",
            "askpass",
            "helper",
            "custom",
            "difftool",
            "ws/inside",
        ] {
            std::fs::create_dir_all(d.join(f).parent().unwrap()).unwrap();
            std::fs::write(d.join(f), "x").unwrap();
        }
        let d = d.display();
        let text = format!(
            "[credential \"https://bitbucket.org\"]\n\thelper = store --file {d}/creds\n\
            [credential] helper = store --file={d}/creds2\n\
            [credential \"https://x\"]\n\thelper = {d}/helper --file {d}/custom\n\
            [http]\n\tcookieFile = {d}/cookies\n\tsslCert = \"{d}/key.pem\"\n\
            [core]\n\tsshCommand = ssh -i {d}/id_deploy -oIdentityFile={d}/id2\n\
            \taskPass = {d}/askpass\n\teditor = {d}/askpass\n\
            [user]\n\tsigningKey = {d}/signing\n\
            [diff]\n\texternal = {d}/difftool\n\
            [http] cookieFile = {d}/ws/inside\n\
            [http] cookieFile = /etc/hostname\n\
            [http] cookieFile = {d}/missing\n"
        );
        let got = credential_files(&text, Some(&dir.path().canonicalize().unwrap().join("ws")));
        let names: Vec<String> = got
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "creds",
                "creds2",
                "helper",
                "custom",
                "cookies",
                "key.pem",
                "id_deploy",
                "id2",
                "askpass",
                "signing"
            ]
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

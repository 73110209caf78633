//! Judging a git configuration file the way git itself reads it: the text is handed to Keel's
//! hardened git (`git config --no-includes --file - --list --null`, which runs no program), and every key it
//! reports is compared with an **allowlist** of keys that never make git run anything
//! ([`harmless`]). Keel does not parse git config itself: a parser of its own disagreed with
//! git on a UTF-8 BOM, on a `\\` at a value's end and on which files count (red-team pass 4,
//! R4-1), and a list of dangerous keys missed the ones nobody listed (`gpg.ssh.defaultKeyCommand`,
//! `protocol.ext.allow` with an `ext::` remote, `man.<tool>.cmd`, `interactive.diffFilter`…).
//! Anything not on the allowlist — and anything git cannot parse — counts as running a program.

use std::io::Write;
use std::process::Stdio;

/// The most of a config file judged; a bigger one counts as dangerous.
pub const MAX_CONFIG: u64 = 1024 * 1024;

/// Keys (lower case, no subsection) that never make git run a program or read more
/// configuration: what `git init`, `git clone`, `cargo new` and everyday `git config` write.
const HARMLESS: &[&str] = &[
    "core.repositoryformatversion",
    "core.bare",
    "core.filemode",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.quotepath",
    "core.abbrev",
    "core.compression",
    "core.sharedrepository",
    "core.whitespace",
    "extensions.objectformat",
    "extensions.refstorage",
    "extensions.preciousobjects",
    "extensions.partialclone",
    "init.defaultbranch",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "gc.auto",
    "rerere.enabled",
    "i18n.commitencoding",
    "i18n.logoutputencoding",
    "color.ui",
];

/// Whole sections whose keys (without a subsection) are all data.
const HARMLESS_SECTIONS: &[&str] = &["user", "advice"];

/// Keys with a subsection (`section.<name>.key`) that are data: a remote's URL and refspecs, a
/// branch's upstream, a submodule's URL and state.
const HARMLESS_SUBSECTION_KEYS: &[(&str, &[&str])] = &[
    (
        "remote",
        &[
            "url",
            "pushurl",
            "fetch",
            "push",
            "tagopt",
            "prune",
            "mirror",
            "promisor",
            "partialclonefilter",
        ],
    ),
    (
        "branch",
        &["remote", "pushremote", "merge", "rebase", "description"],
    ),
    ("submodule", &["url", "active", "branch", "update"]),
];

/// Whether `key` (as git lists it: section and key lower case, a subsection as written) with
/// `value` is on the allowlist. A value naming a transport helper (`ext::sh -c …`, any
/// `<helper>::<address>`) or starting with `-` is never harmless, whatever the key; a
/// submodule's `update` only when it is one of git's own modes (`!cmd` runs a program).
pub fn harmless(key: &str, value: &str) -> bool {
    if runs_a_helper(value) {
        return false;
    }
    let lower = key.to_ascii_lowercase();
    if HARMLESS.contains(&lower.as_str()) {
        return true;
    }
    let Some((section, rest)) = lower.split_once('.') else {
        return false;
    };
    match rest.rsplit_once('.') {
        // No subsection.
        None => HARMLESS_SECTIONS.contains(&section),
        Some((_, name)) => {
            let listed = HARMLESS_SUBSECTION_KEYS
                .iter()
                .any(|(s, keys)| *s == section && keys.contains(&name));
            if section == "submodule" && name == "update" {
                return matches!(value, "checkout" | "rebase" | "merge" | "none");
            }
            listed
        }
    }
}

/// A value git would hand to a program: `<transport>::<address>` (`ext::`, `fd::`, a remote
/// helper), or one starting with `-` (an option to a program git starts).
fn runs_a_helper(value: &str) -> bool {
    let v = value.trim();
    if v.starts_with('-') {
        return true;
    }
    v.split_once("::")
        .is_some_and(|(prefix, _)| !prefix.is_empty() && !prefix.contains([':', '/', '[']))
}

/// Every entry of a config file's `text` as git reads it (`(key, value)`; a key without `=`
/// has an empty value), by Keel's hardened git from standard input — no file is opened, no
/// include followed, no program run. `Err` says why git could not read it.
pub fn entries(text: &[u8]) -> Result<Vec<(String, String)>, String> {
    if u64::try_from(text.len()).unwrap_or(u64::MAX) > MAX_CONFIG {
        return Err(format!("it is larger than {MAX_CONFIG} bytes"));
    }
    let mut child = crate::safe_git::bare()
        .args(["config", "--no-includes", "--file", "-", "--list", "--null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("git cannot run: {e}"))?;
    // git prints while it reads: feed it from another thread so neither side waits on a full
    // pipe.
    let feeder = child.stdin.take().map(|mut stdin| {
        let text = text.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&text);
        })
    });
    let out = child
        .wait_with_output()
        .map_err(|e| format!("git cannot run: {e}"))?;
    if let Some(f) = feeder {
        let _ = f.join();
    }
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "git cannot parse it ({})",
            err.trim().trim_start_matches("fatal: ")
        ));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| {
            let e = String::from_utf8_lossy(e);
            match e.split_once('\n') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => (e.into_owned(), String::new()),
            }
        })
        .collect())
}

/// The reasons a config file's `text` would make git run a program: every key not on the
/// allowlist (once each), or why git could not read it. Empty: harmless.
pub fn dangerous_keys(text: &[u8]) -> Vec<String> {
    match entries(text) {
        Ok(list) => {
            let mut out: Vec<String> = Vec::new();
            for (key, value) in list {
                let key = key.to_ascii_lowercase();
                if !harmless(&key, &value) && !out.contains(&key) {
                    out.push(key);
                }
            }
            out
        }
        Err(why) => vec![format!("its config cannot be judged: {why}")],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowlist_takes_what_init_and_clone_write_and_nothing_that_runs() {
        for (k, v) in [
            ("core.repositoryformatversion", "0"),
            ("core.bare", "false"),
            ("remote.origin.url", "https://example.com/x.git"),
            ("remote.origin.url", "git@github.com:o/r.git"),
            ("remote.origin.url", "ssh://[::1]/r.git"),
            ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
            ("branch.main.remote", "origin"),
            ("branch.main.merge", "refs/heads/main"),
            ("submodule.lib.url", "../lib.git"),
            ("submodule.lib.update", "rebase"),
            ("user.name", "t"),
        ] {
            assert!(harmless(k, v), "{k} = {v}");
        }
        for (k, v) in [
            ("core.fsmonitor", "x"),
            ("core.hookspath", ".husky"),
            ("gpg.ssh.defaultkeycommand", "x"),
            ("protocol.ext.allow", "always"),
            ("remote.origin.url", "ext::sh -c x"),
            ("branch.main.remote", "ext::sh -c x"),
            ("remote.origin.uploadpack", "x"),
            ("man.viewer", "x"),
            ("man.x.cmd", "x"),
            ("interactive.difffilter", "x"),
            ("difftool.x.cmd", "x"),
            ("mergetool.x.cmd", "x"),
            ("sendemail.tocmd", "x"),
            ("browser.x.cmd", "x"),
            ("web.browser", "x"),
            ("submodule.lib.update", "!sh -c x"),
            ("extensions.worktreeconfig", "true"),
            ("include.path", "x"),
            ("includeif.onbranch:main.path", "x"),
            ("url.ext::sh.insteadof", "https://"),
            ("user.name", "--upload-pack=x"),
            ("alias.st", "!sh"),
            ("core.worktree", ".."),
        ] {
            assert!(!harmless(k, v), "{k} = {v}");
        }
    }

    #[test]
    fn git_reads_the_config_and_every_desync_of_a_hand_parser_is_caught() {
        if !crate::fixtures::have_git() {
            return;
        }
        // R4-1: a UTF-8 BOM before `[core]`, and `\\` at a value's end (an escaped backslash,
        // not a continuation) hid `core.fsmonitor` from Keel's own parser.
        let bom = b"\xef\xbb\xbf[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"echo x\"\n";
        assert_eq!(dangerous_keys(bom), vec!["core.fsmonitor".to_string()]);
        let slash = b"[user]\n\tname = x\\\\\n[core]\n\tfsmonitor = \"echo x\"\n";
        assert_eq!(dangerous_keys(slash), vec!["core.fsmonitor".to_string()]);
        let comment = b"[user]\n\tname = x\\\\ ; c\\\n[core]\n\tsshCommand = y\n";
        assert_eq!(dangerous_keys(comment), vec!["core.sshcommand".to_string()]);
        let plain = b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://h/r\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";
        assert!(
            dangerous_keys(plain).is_empty(),
            "{:?}",
            dangerous_keys(plain)
        );
        let broken = dangerous_keys(b"[core\n\tfsmonitor = x\n");
        assert!(broken[0].contains("cannot be judged"), "{broken:?}");
        let big = vec![b'#'; usize::try_from(MAX_CONFIG).unwrap_or(0) + 1];
        assert!(dangerous_keys(&big)[0].contains("larger"));
    }
}

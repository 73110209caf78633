//! A session's workspace as a git remote + ref: the worker's own checkout of it.
//!
//! A session created with `repo` (`{"url", "ref"}`) has no shared workspace. Before each
//! turn the worker makes `<checkout_dir>/<session id>` hold the session's latest state — the
//! remote's branch `keel/<session id>` when it exists, else the session's ref (a branch, tag or
//! commit) — cloning it the first time and fetching and resetting to it afterwards. After the
//! turn, before `turn_finished`, it commits what the turn changed and pushes it to
//! `keel/<session id>` (a `workspace_pushed` event), so the next turn starts there on any
//! worker. The original ref is never written to.
//!
//! Every git call goes through Keel's hardened git (`keel_tools::safe_git`): no hooks
//! (`core.hooksPath=/dev/null`), filters, helpers, pagers or prompts (`GIT_TERMINAL_PROMPT=0`),
//! no submodules, only the transport the url needs (`protocol.file.allow` only for a local
//! path or `file://`), the url passed after `--` and never through the checkout's own remote
//! configuration, and each call under a timeout. The checkout's `.git/config` is put back as
//! the clone wrote it (a copy kept outside the checkout) before every use, so what a turn
//! writes there — a url rewrite, another work tree — never applies; a `.git` that is no longer
//! a plain directory is never used.
//!
//! Credentials in the url (`https://x-access-token:<token>@host/…`) never reach the checkout:
//! git is given the url without them — that is what it writes into `.git/config`, which every
//! command of a turn can read — and they go to Keel's own git calls only, as an
//! `http.<url>.extraHeader` in the process's environment (`GIT_CONFIG_*`), never in its
//! arguments or in a file (red-team R4-19).

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use keel_store::{RemoteAccess, RepoSource};
use keel_tools::safe_git::{config_env_supported, hardened_git, neutralisers};

/// Where a worker keeps its checkouts, and how long one git call may take.
#[derive(Debug, Clone)]
pub struct Checkouts {
    root: PathBuf,
    timeout: Duration,
}

/// A session's checkout, ready for its turn.
#[derive(Debug, Clone)]
pub struct Checkout {
    dir: PathBuf,
    repo: RepoSource,
    /// The url git is given (no credentials) and what Keel's own git calls authenticate with.
    access: RemoteAccess,
    session_id: String,
    /// The commit the turn started from.
    base: String,
    timeout: Duration,
    /// The checkout's git configuration as the clone wrote it, kept outside the checkout.
    pristine: PathBuf,
}

/// What [`Checkout::publish`] pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub branch: String,
    pub commit: String,
}

impl Checkouts {
    /// Checkouts under `root` (one directory per session), each git call limited to `timeout`.
    pub fn new(root: impl Into<PathBuf>, timeout: Duration) -> Self {
        let root = root.into();
        // Other sessions' checkouts are not this session's business: hidden from commands
        // (each session's own checkout carved back in), outside every file tool's reach.
        keel_tools::stores::register_keel_path(&root);
        Self { root, timeout }
    }

    /// The directory of session `session_id`'s checkout.
    pub fn dir(&self, session_id: &str) -> PathBuf {
        self.root.join(session_id)
    }

    /// Makes the checkout of session `session_id` hold its latest state: `keel/<session id>`
    /// of the remote if it exists, else `repo`'s ref. The error names the url and ref.
    pub async fn prepare(&self, session_id: &str, repo: &RepoSource) -> Result<Checkout, String> {
        if session_id.is_empty()
            || !session_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "session id `{session_id}` cannot name a checkout directory"
            ));
        }
        repo.validate()?;
        let dir = self.dir(session_id);
        let mut checkout = Checkout {
            dir,
            repo: repo.clone(),
            access: repo.remote_access(),
            session_id: session_id.to_string(),
            base: String::new(),
            timeout: self.timeout,
            pristine: self.root.join(format!(".{session_id}.gitconfig")),
        };
        let shown = repo.shown_url();
        if checkout.restore_config().await.is_ok() {
            checkout
                .git(&fetch_args(), &format!("fetch {shown}"))
                .await?;
        } else {
            checkout.clone_fresh(&self.root).await?;
        }
        let target = checkout.target().await?;
        checkout
            .git(
                &[
                    "checkout",
                    "--quiet",
                    "--force",
                    "--no-recurse-submodules",
                    "-B",
                    &RepoSource::session_branch(session_id),
                    &target,
                    "--",
                ],
                &format!("check out {target} of {shown}"),
            )
            .await?;
        checkout
            .git(&["clean", "-d", "--force", "--quiet"], "clean the checkout")
            .await?;
        checkout.base = target;
        Ok(checkout)
    }
}

/// Fetches every branch and tag of the remote (by url: the checkout's own remote
/// configuration is never used), dropping branches the remote no longer has.
fn fetch_args() -> Vec<&'static str> {
    vec![
        "fetch",
        "--quiet",
        "--prune",
        "--no-recurse-submodules",
        "--force",
        "--",
        "<url>",
        "+refs/heads/*:refs/remotes/origin/*",
        "+refs/tags/*:refs/tags/*",
    ]
}

impl Checkout {
    /// The checkout's directory, where the turn runs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The session's git source.
    pub fn repo(&self) -> &RepoSource {
        &self.repo
    }

    /// The commit the turn started from.
    pub fn base(&self) -> &str {
        &self.base
    }

    async fn clone_fresh(&self, root: &Path) -> Result<(), String> {
        let shown = self.repo.shown_url();
        if self.dir.exists() {
            // A clone that did not finish (its worker died): start again.
            tokio::fs::remove_dir_all(&self.dir).await.map_err(|e| {
                format!(
                    "cannot remove the unfinished checkout {}: {e}",
                    self.dir.display()
                )
            })?;
        }
        tokio::fs::create_dir_all(root).await.map_err(|e| {
            format!(
                "cannot create the checkout directory {}: {e}; set `[worker] checkout_dir`",
                root.display()
            )
        })?;
        let dest = self.dir.display().to_string();
        self.run(
            root,
            &[],
            &[
                "clone",
                "--quiet",
                // A local path is cloned through git's transport too: no hard links into the
                // remote's objects that a turn could write through.
                "--no-local",
                "--no-checkout",
                "--no-recurse-submodules",
                "--",
                "<url>",
                &dest,
            ],
            &format!("clone {shown}"),
        )
        .await?;
        tokio::fs::copy(self.dir.join(".git/config"), &self.pristine)
            .await
            .map_err(|e| format!("cannot keep the checkout's git configuration: {e}"))?;
        // Keel's own files (`.keel/`: the index, snapshots' scratch) never go into commits.
        let exclude = self.dir.join(".git/info/exclude");
        if let Some(parent) = exclude.parent() {
            let _ = tokio::fs::create_dir_all(parent).await;
        }
        let mut text = tokio::fs::read_to_string(&exclude)
            .await
            .unwrap_or_default();
        text.push_str("\n/.keel/\n");
        tokio::fs::write(&exclude, text)
            .await
            .map_err(|e| format!("cannot write {}: {e}", exclude.display()))
    }

    /// Puts back the git configuration the clone wrote, so nothing a turn wrote into
    /// `.git/config` (a url rewrite, another work tree, a proxy) applies to Keel's git; fails
    /// when the checkout's `.git` is not a plain directory or the kept copy is missing.
    async fn restore_config(&self) -> Result<(), String> {
        let git_dir = self.dir.join(".git");
        let plain = tokio::fs::symlink_metadata(&git_dir)
            .await
            .is_ok_and(|m| m.is_dir());
        if !plain {
            return Err(format!(
                "{} is not a git directory (replaced or removed during a turn)",
                git_dir.display()
            ));
        }
        // A configuration kept by an older Keel holds the url's credentials: not put back
        // (the checkout is cloned afresh).
        if self.access.url != self.repo.url {
            let kept = tokio::fs::read(&self.pristine).await.unwrap_or_default();
            if String::from_utf8_lossy(&kept).contains(&self.repo.url) {
                let _ = tokio::fs::remove_file(&self.pristine).await;
                return Err("the kept git configuration holds the url's credentials".into());
            }
        }
        let config = git_dir.join("config");
        // A symbolic link put there is replaced, never written through.
        let _ = tokio::fs::remove_file(&config).await;
        tokio::fs::copy(&self.pristine, &config)
            .await
            .map(drop)
            .map_err(|e| {
                format!(
                    "cannot restore the checkout's git configuration from {}: {e}",
                    self.pristine.display()
                )
            })
    }

    /// The commit the turn starts from: the session's branch, else the ref as a branch, a tag
    /// or a commit.
    async fn target(&self) -> Result<String, String> {
        let r = self.repo.git_ref.as_str();
        let mut candidates = vec![format!(
            "refs/remotes/origin/{}",
            RepoSource::session_branch(&self.session_id)
        )];
        let branch = r.strip_prefix("refs/heads/").unwrap_or(r);
        candidates.push(format!("refs/remotes/origin/{branch}"));
        if let Some(tag) = r.strip_prefix("refs/tags/") {
            candidates.push(format!("refs/tags/{tag}"));
        } else {
            candidates.push(format!("refs/tags/{r}"));
        }
        if r.len() >= 4 && r.chars().all(|c| c.is_ascii_hexdigit()) {
            candidates.push(r.to_string());
        }
        for c in candidates {
            let wanted = format!("{c}^{{commit}}");
            if let Ok(out) = self
                .git(&["rev-parse", "--verify", "--quiet", &wanted], "")
                .await
            {
                let commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
                if !commit.is_empty() {
                    return Ok(commit);
                }
            }
        }
        Err(format!(
            "`{r}` is not a branch, tag or commit of {}; check the session's repo.ref",
            self.repo.shown_url()
        ))
    }

    /// Commits what the turn changed (if anything) and pushes the session's commits to the
    /// remote's `keel/<session id>`; `None` when there was nothing new.
    pub async fn publish(&self) -> Result<Option<Pushed>, String> {
        let shown = self.repo.shown_url();
        let branch = RepoSource::session_branch(&self.session_id);
        self.restore_config()
            .await
            .map_err(|e| format!("the turn's changes cannot be committed: {e}"))?;
        self.git(&["add", "--all", "--", "."], "stage the turn's changes")
            .await?;
        let staged = self
            .git(
                &["diff", "--cached", "--quiet", "--no-ext-diff"],
                "look for changes",
            )
            .await
            .is_err();
        if staged {
            let message = format!("keel: session {}", self.session_id);
            self.git(
                &[
                    "-c",
                    "user.name=Keel",
                    "-c",
                    "user.email=keel@localhost",
                    "commit",
                    "--quiet",
                    "--no-verify",
                    "--no-gpg-sign",
                    "-m",
                    &message,
                ],
                "commit the turn's changes",
            )
            .await?;
        }
        let head = self
            .git(&["rev-parse", "--verify", "HEAD"], "read the new commit")
            .await?;
        let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
        if head == self.base {
            return Ok(None);
        }
        let refspec = format!("HEAD:refs/heads/{branch}");
        self.git(
            &[
                "push",
                "--quiet",
                "--no-verify",
                "--recurse-submodules=no",
                "--",
                "<url>",
                &refspec,
            ],
            &format!("push to {branch} of {shown}"),
        )
        .await
        .map_err(|e| {
            if e.contains("rejected") || e.contains("non-fast-forward") || e.contains("fetch first")
            {
                format!(
                    "{e}; {branch} of {shown} moved while this turn ran (another writer pushed to it), so the turn's commit {head} was not pushed; the next turn starts from the branch as it is now"
                )
            } else {
                e
            }
        })?;
        Ok(Some(Pushed {
            branch,
            commit: head,
        }))
    }

    /// `git ARGS` in the checkout (`<url>` stands for the session's url).
    async fn git(&self, args: &[&str], what: &str) -> Result<Output, String> {
        // The repository's own program-naming settings are blanked before every command.
        let names = self
            .run(
                &self.dir,
                &[],
                &["config", "--list", "--name-only", "-z"],
                "",
            )
            .await
            .map(|o| o.stdout)
            .unwrap_or_default();
        self.run(&self.dir, &neutralisers(&names), args, what).await
    }

    /// Runs hardened git in `cwd` with `extra` settings, under the timeout.
    async fn run(
        &self,
        cwd: &Path,
        extra: &[(String, String)],
        args: &[&str],
        what: &str,
    ) -> Result<Output, String> {
        let mut settings: Vec<(String, String)> = extra.to_vec();
        settings.extend(transports(&self.access.url));
        let config_env = config_env_supported();
        if let Some(auth) = &self.access.basic_auth {
            if !config_env {
                return Err(format!(
                    "cannot {what}: {} carries credentials, which Keel gives git through its environment (git 2.31 or newer); with this git they would show in its command line — install a newer git",
                    self.repo.shown_url()
                ));
            }
            settings.push(authorization(&self.access.url, auth));
        }
        let mut std_cmd = hardened_git(&settings, config_env)?;
        // ssh never asks (a host key or a passphrase): it fails instead.
        std_cmd
            .current_dir(cwd)
            .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes");
        for a in args {
            if *a == "<url>" {
                std_cmd.arg(&self.access.url);
            } else {
                std_cmd.arg(a);
            }
        }
        let mut cmd = tokio::process::Command::from(std_cmd);
        cmd.kill_on_drop(true);
        let out = match tokio::time::timeout(self.timeout, cmd.output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(format!("cannot run git to {what}: {e} (is git installed?)")),
            Err(_) => {
                return Err(format!(
                    "git took longer than {} s to {what}; check that the remote is reachable (or raise `[worker] git_timeout_secs`)",
                    self.timeout.as_secs()
                ));
            }
        };
        if out.status.success() {
            return Ok(out);
        }
        // git's own message on one line, without its hints; the url may carry a password,
        // so it is shown hidden.
        let err = String::from_utf8_lossy(&out.stderr)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("hint:"))
            .collect::<Vec<_>>()
            .join("; ")
            .replace(&self.repo.url, &self.repo.shown_url());
        Err(format!("git could not {what}: {err}"))
    }
}

/// The setting that sends `user:password` to `url` (and the paths beneath it) only.
fn authorization(url: &str, auth: &str) -> (String, String) {
    (
        format!("http.{url}.extraHeader"),
        format!("Authorization: Basic {}", base64(auth.as_bytes())),
    )
}

/// Standard base64 with padding (RFC 4648), for HTTP Basic authentication.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The transports `url` needs, allowed over the hardened default (`protocol.allow=never`).
fn transports(url: &str) -> Vec<(String, String)> {
    let local = url.starts_with('/') || url.starts_with("file://");
    let names: &[&str] = if local {
        &["file"]
    } else if url.starts_with("https://") {
        &["https"]
    } else if url.starts_with("http://") {
        &["http"]
    } else if url.starts_with("git://") {
        &["git"]
    } else {
        &["ssh"]
    };
    names
        .iter()
        .map(|p| (format!("protocol.{p}.allow"), "always".to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_authentication_is_encoded_as_http_wants_it() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(
            base64(b"Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(
            authorization("https://h/r.git", "u:p"),
            (
                "http.https://h/r.git.extraHeader".to_string(),
                "Authorization: Basic dTpw".to_string()
            )
        );
    }

    #[test]
    fn only_the_transport_the_url_needs_is_allowed() {
        let allowed = |url: &str| -> Vec<String> {
            transports(url)
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect()
        };
        assert_eq!(allowed("/srv/r.git"), ["protocol.file.allow=always"]);
        assert_eq!(allowed("file:///srv/r.git"), ["protocol.file.allow=always"]);
        assert_eq!(allowed("https://h/r"), ["protocol.https.allow=always"]);
        assert_eq!(allowed("git@h:r.git"), ["protocol.ssh.allow=always"]);
        assert_eq!(allowed("ssh://h/r"), ["protocol.ssh.allow=always"]);
    }
}

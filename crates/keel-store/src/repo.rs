//! A session's git source: the remote and ref a worker checks the session's workspace out of
//! (`keel serve --database` with `keel worker`), instead of a path on shared storage.

use serde::{Deserialize, Serialize};

/// The ref used when a request names none: the remote's default branch.
pub const DEFAULT_REF: &str = "HEAD";

/// A git remote and the ref (branch, tag or commit) a session starts from. The session's own
/// work goes to the remote's branch `keel/<session id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoSource {
    /// Where to clone from: `https://…`, `ssh://…`, `git://…`, `file://…`, `user@host:path`
    /// or an absolute path on the worker's machine.
    pub url: String,
    /// A branch, tag or commit of the remote (default: its default branch).
    #[serde(rename = "ref", default = "default_ref")]
    pub git_ref: String,
}

fn default_ref() -> String {
    DEFAULT_REF.to_string()
}

impl RepoSource {
    /// `url` at `git_ref` (empty: the remote's default branch), trimmed and validated.
    pub fn new(url: &str, git_ref: Option<&str>) -> Result<Self, String> {
        let git_ref = git_ref.map(str::trim).filter(|r| !r.is_empty());
        let repo = Self {
            url: url.trim().to_string(),
            git_ref: git_ref.unwrap_or(DEFAULT_REF).to_string(),
        };
        repo.validate()?;
        Ok(repo)
    }

    /// Checks that the url and ref are safe to hand to git; the error says what to change.
    pub fn validate(&self) -> Result<(), String> {
        validate_url(&self.url)?;
        validate_ref(&self.git_ref)
    }

    /// The branch the session's work is pushed to.
    pub fn session_branch(session_id: &str) -> String {
        format!("keel/{session_id}")
    }

    /// The url with any password in it replaced, for messages and logs. An http(s) url's user
    /// name alone is hidden too: there it is usually a token (`https://<token>@github.com/…`).
    pub fn shown_url(&self) -> String {
        let split = split_credentials(&self.url);
        match (split.userinfo, web_scheme(&self.url)) {
            (Some(userinfo), true) if !userinfo.contains(':') => {
                let (scheme, rest) = split.url.split_once("://").unwrap_or(("", &split.url));
                format!("{scheme}://***@{rest}")
            }
            _ => redact_url(&self.url),
        }
    }

    /// The url as git may be given it — it ends up in the checkout's `.git/config`, which every
    /// command of a turn can read — and the credentials it carried, which only Keel's own
    /// fetch and push calls get (red-team R4-19). For http(s) the whole userinfo is taken out
    /// and returned as `user:password` (percent-decoded, as git would send it); an ssh url
    /// keeps its user name and loses a password (ssh never uses one from the url).
    pub fn remote_access(&self) -> RemoteAccess {
        let split = split_credentials(&self.url);
        match split.userinfo {
            Some(userinfo) if web_scheme(&self.url) => RemoteAccess {
                url: split.url,
                basic_auth: Some(percent_decode(&userinfo)),
            },
            Some(userinfo) => {
                let user = userinfo
                    .split_once(':')
                    .map_or(userinfo.as_str(), |(u, _)| u);
                let (scheme, rest) = split.url.split_once("://").unwrap_or(("", &split.url));
                RemoteAccess {
                    url: format!("{scheme}://{user}@{rest}"),
                    basic_auth: None,
                }
            }
            None => RemoteAccess {
                url: self.url.clone(),
                basic_auth: None,
            },
        }
    }
}

/// A session url split for git: see [`RepoSource::remote_access`].
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteAccess {
    /// The url without credentials: what git is given and stores.
    pub url: String,
    /// `user:password` for HTTP Basic authentication, sent by Keel's own git calls only.
    pub basic_auth: Option<String>,
}

impl std::fmt::Debug for RemoteAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAccess")
            .field("url", &self.url)
            .field("basic_auth", &self.basic_auth.as_ref().map(|_| "***"))
            .finish()
    }
}

fn web_scheme(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

struct Split {
    /// The url with its userinfo (and the `@`) removed.
    url: String,
    userinfo: Option<String>,
}

/// `scheme://userinfo@host/path` → (`scheme://host/path`, `userinfo`). The authority ends at
/// the first `/`, `?` or `#`; its last `@` ends the userinfo (as curl and git read it).
fn split_credentials(url: &str) -> Split {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Split {
            url: url.to_string(),
            userinfo: None,
        };
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => Split {
            url: format!("{scheme}://{host}{tail}"),
            userinfo: Some(userinfo.to_string()),
        },
        None => Split {
            url: url.to_string(),
            userinfo: None,
        },
    }
}

/// `%XX` escapes decoded (bytes that do not form UTF-8 are kept as written).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

/// `url` with any password replaced by `***` (URLs end up in error messages and logs).
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

const SCHEMES: &[&str] = &["https://", "http://", "ssh://", "git://", "file://"];

fn validate_url(url: &str) -> Result<(), String> {
    if url.is_empty() {
        return Err("repo.url is empty; give the git remote to clone (https://…, ssh://…, user@host:path or an absolute path)".into());
    }
    if url.len() > 2048 {
        return Err("repo.url is longer than 2048 characters".into());
    }
    if url.starts_with('-') {
        return Err(format!(
            "repo.url `{url}` starts with `-`, which git would read as an option; give a URL or an absolute path"
        ));
    }
    if url.chars().any(char::is_control) {
        return Err("repo.url contains a control character".into());
    }
    if SCHEMES.iter().any(|s| url.starts_with(s)) {
        return Ok(());
    }
    if url.contains("::") {
        return Err("repo.url names a git remote helper (`transport::address`), which Keel does not run; use https://, ssh://, git://, file:// or an absolute path".into());
    }
    if url.contains("://") {
        return Err(format!(
            "repo.url `{}` has a scheme Keel does not use; use https://, http://, ssh://, git:// or file://",
            redact_url(url)
        ));
    }
    if url.starts_with('/') {
        return Ok(());
    }
    // scp-like `[user@]host:path`: a colon before any slash.
    let colon = url.find(':');
    let slash = url.find('/');
    if let Some(c) = colon
        && c > 0
        && slash.is_none_or(|s| c < s)
    {
        return Ok(());
    }
    Err(format!(
        "repo.url `{url}` is a relative path; workers run elsewhere, so give an absolute path or a URL"
    ))
}

fn validate_ref(r: &str) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "repo.ref `{r}` is not a valid branch, tag or commit: {why}"
        ))
    };
    if r.is_empty() {
        return bad("it is empty");
    }
    if r.len() > 255 {
        return bad("it is longer than 255 characters");
    }
    if r.starts_with('-') {
        return bad("it starts with `-`, which git would read as an option");
    }
    if r.chars()
        .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
    {
        return bad("it contains a space, a control character or one of ~ ^ : ? * [ \\");
    }
    if r.contains("..") || r.contains("@{") || r.contains("//") {
        return bad("it contains `..`, `@{` or `//`");
    }
    if r.starts_with('/') || r.ends_with('/') || r.ends_with('.') || r.ends_with(".lock") {
        return bad("it starts or ends with `/`, or ends with `.` or `.lock`");
    }
    if r.split('/').any(|part| part.starts_with('.')) {
        return bad("a part of it starts with `.`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn good_sources_pass() {
        for (url, r) in [
            ("https://github.com/o/r.git", Some("main")),
            ("ssh://git@host/o/r", Some("v1.2.3")),
            ("git@github.com:o/r.git", None),
            ("/srv/git/r.git", Some("0123abcd")),
            ("file:///srv/git/r.git", Some("feature/x-1")),
            ("  /srv/r  ", Some("  refs/heads/main ")),
        ] {
            let repo = RepoSource::new(url, r).unwrap();
            assert_eq!(repo.url, url.trim());
        }
        assert_eq!(RepoSource::new("/r", None).unwrap().git_ref, "HEAD");
        assert_eq!(RepoSource::new("/r", Some(" ")).unwrap().git_ref, "HEAD");
    }

    #[test]
    fn hostile_urls_are_refused_with_a_reason() {
        for (url, says) in [
            ("", "empty"),
            ("   ", "empty"),
            ("--upload-pack=touch /tmp/x", "starts with `-`"),
            ("-u", "starts with `-`"),
            ("ext::sh -c touch% /tmp/pwned", "remote helper"),
            ("fd::17", "remote helper"),
            ("javascript://x", "scheme"),
            ("relative/path", "relative path"),
            ("repo.git", "relative path"),
            ("/r\nx", "control character"),
        ] {
            let err = RepoSource::new(url, Some("main")).unwrap_err();
            assert!(err.contains(says), "{url:?}: {err}");
        }
    }

    #[test]
    fn hostile_refs_are_refused_with_a_reason() {
        for r in [
            "-f",
            "--upload-pack=x",
            "a b",
            "a..b",
            "a~1",
            "a^",
            "x:y",
            "@{-1}",
            "/abs",
            "trail/",
            "x.lock",
            ".hidden",
            "a/.b",
            "a//b",
            "a\tb",
            "a*",
        ] {
            let err = RepoSource::new("/srv/r.git", Some(r)).unwrap_err();
            assert!(err.contains("repo.ref"), "{r:?}: {err}");
        }
        let long = "a".repeat(300);
        assert!(RepoSource::new("/r", Some(&long)).is_err());
    }

    #[test]
    fn passwords_stay_out_of_messages() {
        let repo = RepoSource::new("https://me:secret@host/r.git", Some("main")).unwrap();
        assert_eq!(repo.shown_url(), "https://me:***@host/r.git");
        assert!(
            !RepoSource::new("ext::x:secret@y", None)
                .unwrap_err()
                .contains("secret")
        );
    }

    #[test]
    fn credentials_are_taken_out_of_the_url_git_is_given() {
        let access = |url: &str| RepoSource::new(url, None).unwrap().remote_access();
        let a = access("https://x-access-token:tok%2Fen@github.com/o/r.git");
        assert_eq!(a.url, "https://github.com/o/r.git");
        assert_eq!(a.basic_auth.as_deref(), Some("x-access-token:tok/en"));
        assert!(!format!("{a:?}").contains("tok"));
        // A token as the user name alone.
        let a = access("https://ghp_abc@github.com/o/r");
        assert_eq!(a.url, "https://github.com/o/r");
        assert_eq!(a.basic_auth.as_deref(), Some("ghp_abc"));
        assert_eq!(
            RepoSource::new("https://ghp_abc@github.com/o/r", None)
                .unwrap()
                .shown_url(),
            "https://***@github.com/o/r"
        );
        // An `@` in the path is not userinfo.
        let a = access("https://host/o/@r");
        assert_eq!((a.url.as_str(), a.basic_auth), ("https://host/o/@r", None));
        // ssh keeps its user, never a password.
        let a = access("ssh://git:pw@host/o/r");
        assert_eq!((a.url.as_str(), a.basic_auth), ("ssh://git@host/o/r", None));
        let a = access("git@github.com:o/r.git");
        assert_eq!(a.url, "git@github.com:o/r.git");
        let a = access("/srv/r.git");
        assert_eq!((a.url.as_str(), a.basic_auth), ("/srv/r.git", None));
    }

    #[test]
    fn the_ref_is_serialised_as_ref() {
        let repo = RepoSource::new("/r", Some("dev")).unwrap();
        let json = serde_json::to_string(&repo).unwrap();
        assert_eq!(json, r#"{"url":"/r","ref":"dev"}"#);
        let back: RepoSource = serde_json::from_str(r#"{"url":"/r"}"#).unwrap();
        assert_eq!(back.git_ref, "HEAD");
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact_url("postgres://keel:s3cret@db.example:5432/keel"),
            "postgres://keel:***@db.example:5432/keel"
        );
        assert_eq!(
            redact_url("postgres://keelpg@127.0.0.1:55432/keel_test"),
            "postgres://keelpg@127.0.0.1:55432/keel_test"
        );
        assert_eq!(redact_url("not a url"), "not a url");
    }
}

//! A session's checkout of its git source, without a database: two workers' directories
//! taking turns on one bare remote, a tag and a commit as the ref, an unknown ref, a push
//! rejected because the session's branch moved, and hooks planted in the checkout never run.

// Tests start programs of their own (the keel binary, git fixtures, tmux, servers): allowed
// here, outside Keel's one spawn path (docs/SECURITY.md, "One way to start a process").
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use keel_queue::checkout::Checkouts;
use keel_store::RepoSource;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=Test", "-c", "user.email=test@localhost"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `dir/remote.git` with `main` at one commit and tag `v1` on it; returns (url, commit).
fn remote(dir: &Path) -> (String, String) {
    let seed = dir.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(
        dir,
        &["init", "--quiet", "--bare", "-b", "main", "remote.git"],
    );
    git(&seed, &["init", "--quiet", "-b", "main"]);
    std::fs::write(seed.join("README.md"), "# app\n").unwrap();
    git(&seed, &["add", "README.md"]);
    git(&seed, &["commit", "--quiet", "-m", "seed"]);
    git(&seed, &["tag", "v1"]);
    let url = dir.join("remote.git").display().to_string();
    git(&seed, &["push", "--quiet", "--tags", &url, "main"]);
    (url, git(&seed, &["rev-parse", "HEAD"]))
}

const SESSION: &str = "20260101-000000-abcdef";

#[tokio::test]
async fn turns_on_two_workers_continue_from_the_session_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let (url, seed) = remote(tmp.path());
    let repo = RepoSource::new(&url, Some("main")).unwrap();
    let a = Checkouts::new(tmp.path().join("a"), Duration::from_secs(60));
    let b = Checkouts::new(tmp.path().join("b"), Duration::from_secs(60));

    let first = a.prepare(SESSION, &repo).await.unwrap();
    assert_eq!(first.base(), seed);
    assert!(first.dir().join("README.md").is_file());
    // A local remote is copied, not hard-linked: the checkout cannot write into its objects.
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let mut stack = vec![first.dir().join(".git/objects")];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let entry = entry.unwrap();
                let meta = entry.metadata().unwrap();
                if meta.is_dir() {
                    stack.push(entry.path());
                } else {
                    assert_eq!(meta.nlink(), 1, "{}", entry.path().display());
                }
            }
        }
    }
    // Nothing changed: nothing is pushed.
    assert_eq!(first.publish().await.unwrap(), None);
    std::fs::write(first.dir().join("notes.txt"), "one\n").unwrap();
    // Keel's own files stay out of the commits.
    std::fs::create_dir_all(first.dir().join(".keel")).unwrap();
    std::fs::write(first.dir().join(".keel/index.db"), "x").unwrap();
    let pushed = first.publish().await.unwrap().unwrap();
    assert_eq!(pushed.branch, format!("keel/{SESSION}"));
    let remote_dir = Path::new(&url);
    assert_eq!(
        git(remote_dir, &["rev-parse", &pushed.branch]),
        pushed.commit
    );
    assert_eq!(
        git(remote_dir, &["ls-tree", "--name-only", &pushed.commit]),
        "README.md\nnotes.txt"
    );

    // The other worker starts from the session's branch.
    let second = b.prepare(SESSION, &repo).await.unwrap();
    assert_eq!(second.base(), pushed.commit);
    std::fs::write(second.dir().join("notes.txt"), "one\ntwo\n").unwrap();
    let again = second.publish().await.unwrap().unwrap();

    // The first worker's stale checkout is fetched and reset (its stray files removed).
    std::fs::write(first.dir().join("stray.txt"), "x").unwrap();
    let third = a.prepare(SESSION, &repo).await.unwrap();
    assert_eq!(third.base(), again.commit);
    assert_eq!(
        std::fs::read_to_string(third.dir().join("notes.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(!third.dir().join("stray.txt").exists());
    assert!(
        third.dir().join(".keel/index.db").exists(),
        "Keel's files stay"
    );
    assert_eq!(git(remote_dir, &["rev-parse", "main"]), seed);
}

#[tokio::test]
async fn a_tag_or_a_commit_is_a_ref_and_an_unknown_ref_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (url, seed) = remote(tmp.path());
    let checkouts = Checkouts::new(tmp.path().join("c"), Duration::from_secs(60));
    for (i, r) in ["v1", &seed[..12], "HEAD", "refs/heads/main"]
        .iter()
        .enumerate()
    {
        let repo = RepoSource::new(&url, Some(r)).unwrap();
        let c = checkouts
            .prepare(&format!("s{i}"), &repo)
            .await
            .unwrap_or_else(|e| panic!("{r}: {e}"));
        assert_eq!(c.base(), seed, "{r}");
    }
    let repo = RepoSource::new(&url, Some("nope")).unwrap();
    let err = checkouts.prepare("s9", &repo).await.unwrap_err();
    assert!(err.contains("`nope`") && err.contains(&url), "{err}");
}

#[tokio::test]
async fn a_push_onto_a_moved_branch_is_rejected_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let (url, _) = remote(tmp.path());
    let repo = RepoSource::new(&url, Some("main")).unwrap();
    let checkouts = Checkouts::new(tmp.path().join("c"), Duration::from_secs(60));
    let c = checkouts.prepare(SESSION, &repo).await.unwrap();
    // Someone else writes the session's branch while the turn runs.
    let other = tmp.path().join("other");
    git(tmp.path(), &["clone", "--quiet", &url, "other"]);
    std::fs::write(other.join("x.txt"), "theirs\n").unwrap();
    git(&other, &["add", "x.txt"]);
    git(&other, &["commit", "--quiet", "-m", "theirs"]);
    git(
        &other,
        &["push", "--quiet", "origin", &format!("HEAD:keel/{SESSION}")],
    );
    std::fs::write(c.dir().join("x.txt"), "ours\n").unwrap();
    let err = c.publish().await.unwrap_err();
    assert!(
        err.contains("rejected") && err.contains(&format!("keel/{SESSION}")),
        "{err}"
    );
}

#[tokio::test]
async fn hooks_planted_in_the_checkout_never_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (url, _) = remote(tmp.path());
    let repo = RepoSource::new(&url, Some("main")).unwrap();
    let checkouts = Checkouts::new(tmp.path().join("c"), Duration::from_secs(60));
    let c = checkouts.prepare(SESSION, &repo).await.unwrap();
    let marker = tmp.path().join("hook-ran");
    for hook in ["pre-commit", "commit-msg", "post-commit", "pre-push"] {
        let path = c.dir().join(".git/hooks").join(hook);
        std::fs::write(&path, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    // Even when the checkout's config points hooks elsewhere.
    git(c.dir(), &["config", "core.hooksPath", ".git/hooks"]);
    std::fs::write(c.dir().join("notes.txt"), "one\n").unwrap();
    c.publish().await.unwrap().unwrap();
    assert!(!marker.exists(), "a hook ran");
}

#[tokio::test]
async fn what_a_turn_writes_into_the_git_config_is_undone() {
    let tmp = tempfile::tempdir().unwrap();
    let (url, seed) = remote(tmp.path());
    let repo = RepoSource::new(&url, Some("main")).unwrap();
    let checkouts = Checkouts::new(tmp.path().join("c"), Duration::from_secs(60));
    let c = checkouts.prepare(SESSION, &repo).await.unwrap();
    // The turn redirects pushes to another remote and the work tree elsewhere.
    let (evil, _) = {
        let d = tmp.path().join("evil");
        std::fs::create_dir_all(&d).unwrap();
        remote(&d)
    };
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("keep.txt"), "mine\n").unwrap();
    git(c.dir(), &["config", &format!("url.{evil}.insteadOf"), &url]);
    git(
        c.dir(),
        &["config", "core.worktree", &elsewhere.display().to_string()],
    );
    std::fs::write(c.dir().join("notes.txt"), "one\n").unwrap();
    let pushed = c.publish().await.unwrap().unwrap();
    let remote_dir = Path::new(&url);
    assert_eq!(
        git(remote_dir, &["rev-parse", &pushed.branch]),
        pushed.commit
    );
    assert_eq!(
        git(Path::new(&evil), &["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main\nrefs/tags/v1",
        "nothing went to the other remote"
    );
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("keep.txt")).unwrap(),
        "mine\n"
    );
    // A `.git` replaced by a pointer elsewhere is not used: the next turn clones afresh.
    std::fs::remove_dir_all(c.dir().join(".git")).unwrap();
    std::fs::write(c.dir().join(".git"), format!("gitdir: {}\n", evil)).unwrap();
    assert!(
        c.publish()
            .await
            .unwrap_err()
            .contains("not a git directory")
    );
    let again = checkouts.prepare(SESSION, &repo).await.unwrap();
    assert_eq!(again.base(), pushed.commit);
    assert_ne!(again.base(), seed);
}

/// A smart-HTTP git server on 127.0.0.1 (`git http-backend`) serving the repositories under
/// `root`; every request without `Authorization: Basic <basic>` gets 401. Returns the port.
fn serve_git(root: std::path::PathBuf, basic: String) -> u16 {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let root = root.clone();
            let basic = basic.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let target = parts.next().unwrap_or("").to_string();
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap() == 0 || h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                    }
                }
                let header = |name: &str| {
                    headers
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                };
                if header("authorization").as_deref() != Some(&format!("Basic {basic}")) {
                    let _ = stream.write_all(
                        b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return;
                }
                let mut body = Vec::new();
                if let Some(n) = header("content-length") {
                    body.resize(n.parse().unwrap(), 0);
                    reader.read_exact(&mut body).unwrap();
                } else if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
                    loop {
                        let mut size = String::new();
                        reader.read_line(&mut size).unwrap();
                        let n = usize::from_str_radix(size.trim(), 16).unwrap();
                        let mut chunk = vec![0; n + 2];
                        reader.read_exact(&mut chunk).unwrap();
                        if n == 0 {
                            break;
                        }
                        body.extend_from_slice(&chunk[..n]);
                    }
                }
                let (path, query) = target.split_once('?').unwrap_or((&target, ""));
                let mut cgi = Command::new("git")
                    .arg("http-backend")
                    .env("GIT_PROJECT_ROOT", &root)
                    .env("GIT_HTTP_EXPORT_ALL", "1")
                    .env("REMOTE_USER", "worker")
                    .env("REQUEST_METHOD", &method)
                    .env("PATH_INFO", path)
                    .env("QUERY_STRING", query)
                    .env("CONTENT_TYPE", header("content-type").unwrap_or_default())
                    .env("CONTENT_LENGTH", body.len().to_string())
                    .env(
                        "HTTP_CONTENT_ENCODING",
                        header("content-encoding").unwrap_or_default(),
                    )
                    .env("GIT_PROTOCOL", header("git-protocol").unwrap_or_default())
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                cgi.stdin.take().unwrap().write_all(&body).unwrap();
                let out = cgi.wait_with_output().unwrap().stdout;
                let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
                let head = String::from_utf8_lossy(&out[..split]).to_string();
                let status = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Status: "))
                    .unwrap_or("200 OK")
                    .to_string();
                let mut response = format!("HTTP/1.1 {status}\r\n").into_bytes();
                for l in head.lines().filter(|l| !l.starts_with("Status: ")) {
                    response.extend_from_slice(format!("{l}\r\n").as_bytes());
                }
                response.extend_from_slice(b"Connection: close\r\n\r\n");
                response.extend_from_slice(&out[split + 4..]);
                let _ = stream.write_all(&response);
            });
        }
    });
    port
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if String::from_utf8_lossy(&std::fs::read(&path).unwrap()).contains(needle) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

/// Red-team R4-19: a session whose url carries a token got it written into the checkout's
/// `.git/config`, where any command of the turn (`cat .git/config`, read-only, never asked
/// about) prints it. The token now only authenticates Keel's own clone, fetch and push.
#[tokio::test]
async fn a_token_in_the_url_never_reaches_the_checkout() {
    let tmp = tempfile::tempdir().unwrap();
    let (local, seed) = remote(tmp.path());
    // "x-access-token:SECRET-TOKEN-4219", as HTTP Basic authentication sends it.
    let port = serve_git(
        tmp.path().to_path_buf(),
        "eC1hY2Nlc3MtdG9rZW46U0VDUkVULVRPS0VOLTQyMTk=".into(),
    );
    let url = format!("http://x-access-token:SECRET-TOKEN-4219@127.0.0.1:{port}/remote.git");
    let repo = RepoSource::new(&url, Some("main")).unwrap();
    let checkouts = Checkouts::new(tmp.path().join("c"), Duration::from_secs(60));

    let c = checkouts
        .prepare(SESSION, &repo)
        .await
        .expect("the clone authenticates");
    assert_eq!(c.base(), seed);
    assert_eq!(files_holding(c.dir(), "SECRET-TOKEN"), Vec::<String>::new());
    assert_eq!(
        git(c.dir(), &["config", "remote.origin.url"]),
        format!("http://127.0.0.1:{port}/remote.git")
    );
    // The push authenticates too.
    std::fs::write(c.dir().join("notes.txt"), "one\n").unwrap();
    let pushed = c.publish().await.unwrap().unwrap();
    assert_eq!(
        git(Path::new(&local), &["rev-parse", &pushed.branch]),
        pushed.commit
    );
    // And the next turn's fetch.
    let next = checkouts.prepare(SESSION, &repo).await.unwrap();
    assert_eq!(next.base(), pushed.commit);
    assert_eq!(
        files_holding(next.dir(), "SECRET-TOKEN"),
        Vec::<String>::new()
    );

    // A checkout an older Keel made (its kept configuration holds the token) is cloned
    // afresh rather than having the token put back.
    let kept = tmp.path().join(format!("c/.{SESSION}.gitconfig"));
    let text = std::fs::read_to_string(&kept)
        .unwrap()
        .replace(&format!("http://127.0.0.1:{port}/remote.git"), &url);
    std::fs::write(&kept, &text).unwrap();
    std::fs::write(next.dir().join(".git/config"), &text).unwrap();
    let again = checkouts.prepare(SESSION, &repo).await.unwrap();
    assert_eq!(again.base(), pushed.commit);
    assert_eq!(
        files_holding(again.dir(), "SECRET-TOKEN"),
        Vec::<String>::new()
    );
    assert!(
        !std::fs::read_to_string(&kept)
            .unwrap()
            .contains("SECRET-TOKEN")
    );

    // Without the token the server refuses: the clone above did authenticate.
    let bare =
        RepoSource::new(&format!("http://127.0.0.1:{port}/remote.git"), Some("main")).unwrap();
    let err = checkouts.prepare("nokey", &bare).await.unwrap_err();
    assert!(!err.is_empty());
}

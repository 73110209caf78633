//! Re-running a test as an unprivileged user: the test binary re-executes itself running only
//! that test, through `setpriv --reuid=65534 --regid=65534 --clear-groups` when the tests run
//! as root (CI), directly otherwise. The child does the work in a fresh directory the parent
//! prepared (`w`, owned by the child's user, which is also its `HOME`).

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the child: the directory prepared by the parent.
const CHILD_DIR: &str = "KEEL_USERNS_TEST_DIR";
pub const NOBODY: u32 = 65534;

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// In the child: the directory the parent prepared. `None` in the parent.
pub fn child_dir() -> Option<PathBuf> {
    std::env::var_os(CHILD_DIR).map(PathBuf::from)
}

/// In the parent: prepares a directory, runs `test` as an unprivileged child (uid 65534 when
/// root) with `KEEL_CONFIG` naming a config file holding `# user-config-secret` when
/// `with_config`, checks that it passed and relays its `SKIPPED` and figure lines.
pub fn run_child(test: &str, with_config: bool) {
    let dir = tempfile::Builder::new()
        .prefix("keel-userns-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = dir.path().join("w");
    std::fs::create_dir(&work).unwrap();
    let config = work.join("user-config.toml");
    std::fs::write(&config, "# user-config-secret\n").unwrap();
    let exe = std::env::current_exe().unwrap();
    let root = is_root();
    let mut cmd = if root {
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .unwrap_or_else(|| {
                panic!(
                    "{test}: `setpriv` (util-linux) is needed to run this test as an unprivileged \
                     user when the tests run as root; install util-linux"
                )
            });
        chown_tree(&work, NOBODY);
        let mut c = Command::new(setpriv);
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, &work)
        .env("HOME", &work)
        .env(
            "KEEL_CONFIG",
            if with_config {
                config.as_os_str()
            } else {
                "".as_ref()
            },
        )
        .env_remove("KEEL_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap_or_else(|e| panic!("{test}: cannot run {} as a child: {e}", exe.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Relay the child's report (figures, a visible skip).
    for line in text
        .lines()
        .filter(|l| l.contains("SKIPPED") || l.contains("p50"))
    {
        println!("{line}");
    }
    assert!(
        out.status.success(),
        "{test} failed as uid {} (as root, the test binary and its directories must be \
         executable by uid 65534):\n{text}",
        if root {
            NOBODY
        } else {
            rustix::process::geteuid().as_raw()
        }
    );
    assert!(
        text.contains("1 passed"),
        "{test}: the child did not run the test:\n{text}"
    );
}

pub fn chown_tree(path: &Path, uid: u32) {
    let id = Some(rustix::process::Uid::from_raw(uid));
    let gid = Some(rustix::process::Gid::from_raw(uid));
    rustix::fs::chown(path, id, gid).unwrap();
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path(), uid);
        }
    }
}

/// Runs `body(test, ws)` in a fresh directory as whoever runs the tests and, when that is
/// root, again as uid 65534 in a child; in that child, runs it in the prepared directory.
#[allow(unused_macros)]
macro_rules! as_both {
    ($test:literal, $body:ident) => {{
        if let Some(dir) = crate::nobody::child_dir() {
            let ws = dir.join("ws");
            std::fs::create_dir_all(&ws).unwrap();
            $body($test, &ws).await;
            return;
        }
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        $body($test, &ws).await;
        if crate::nobody::is_root() {
            crate::nobody::run_child($test, false);
        }
    }};
}

/// A current-thread runtime for a test's async scenario.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Two tests of one scenario, each in a fresh empty directory `ws`: `$test` as whoever runs the
/// tests, `$as_nobody` as uid 65534 (a child; see `run_child`). `async` scenarios run on
/// [`runtime`].
#[allow(unused_macros)]
macro_rules! user_and_nobody {
    (async $scenario:ident: $test:ident, $as_nobody:ident) => {
        $crate::nobody::user_and_nobody!(@pair $test, $as_nobody, |ws| {
            $crate::nobody::runtime().block_on($scenario(ws))
        });
    };
    ($scenario:ident: $test:ident, $as_nobody:ident) => {
        $crate::nobody::user_and_nobody!(@pair $test, $as_nobody, |ws| $scenario(ws));
    };
    (@pair $test:ident, $as_nobody:ident, $run:expr) => {
        #[test]
        fn $test() {
            let dir = tempfile::tempdir().unwrap();
            let ws = dir.path().join("ws");
            std::fs::create_dir(&ws).unwrap();
            let run: fn(&std::path::Path) = $run;
            run(&ws);
        }

        #[test]
        fn $as_nobody() {
            let Some(dir) = $crate::nobody::child_dir() else {
                $crate::nobody::run_child(stringify!($as_nobody), false);
                return;
            };
            let ws = dir.join("ws");
            std::fs::create_dir(&ws).unwrap();
            let run: fn(&std::path::Path) = $run;
            run(&ws);
        }
    };
}
#[allow(unused_imports)]
pub(crate) use user_and_nobody;

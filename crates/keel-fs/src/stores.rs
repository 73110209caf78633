//! Where the user's secrets and Keel's own data live: the **one** list of protected stores.
//!
//! Everything that keeps a command or a model away from them asks this module:
//!
//! - the command sandbox (keel-tools `sandbox`) covers each existing store with an empty
//!   read-only directory or file, inside the workspace too, and hides the stores that *hold*
//!   the workspace with only the workspace carved back in (a worker's checkout under
//!   `$KEEL_HOME/checkouts` sees nothing else of Keel's data);
//! - every [`crate::beneath::DirHandle`] refuses to resolve into a store that lies beneath its
//!   root, and its walks pass stores over ([`crate::beneath::Fence`]): the file tools, the
//!   index, grep, rules and config loading get this by opening the workspace;
//! - `keel doctor` lists them.
//!
//! A new store is one line in [`SECRET_STORES`] (or [`RELOCATED`] for one an environment
//! variable moves). Paths Keel decides at run time — a session database at a configured
//! `store.path`, worker checkouts — are added with [`register_keel_path`] by the code that
//! decides them.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

mod absent;
mod hardlinks;
mod links;
mod lists;
pub use hardlinks::MAX_SEARCH as MAX_LINK_SEARCH;
pub use links::{LinkTarget, LinkTargets, MAX_DEPTH, MAX_ENTRIES, link_targets};

pub use lists::{RELOCATED, SECRET_STORES};

/// What a protected store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// One of the user's secret stores.
    Secret,
    /// Keel's own data or configuration.
    Keel,
}

/// One protected store: an absolute path (it may not exist).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Store {
    pub path: PathBuf,
    pub kind: StoreKind,
}

/// Keel's own paths decided at run time ([`register_keel_path`]).
static KEEL_PATHS: RwLock<Vec<PathBuf>> = RwLock::new(Vec::new());

/// Adds a path of Keel's own outside its data and configuration directories — a session
/// database at a configured `store.path` (and its `-wal`, `-shm`, `-journal`), a worker's
/// checkout directory — to the protected stores of this process. Relative paths are made
/// absolute against the current directory.
pub fn register_keel_path(path: &Path) {
    register_keel_paths(&[path]);
}

/// [`register_keel_path`] of several paths (a database and its `-wal`, `-shm`, `-journal`):
/// a directory they share is canonicalised once.
pub fn register_keel_paths<P: AsRef<Path>>(paths: &[P]) {
    let mut parents: Vec<(PathBuf, Option<PathBuf>)> = Vec::new();
    for path in paths {
        if let Some(path) = canonical_name(path.as_ref(), &mut parents) {
            add(&KEEL_PATHS, path);
        }
    }
}

/// `path` named canonically (the form a workspace root has), through its parent when the
/// path itself does not exist yet; relative paths are made absolute against the current
/// directory. `parents`: the parents canonicalised so far.
fn canonical_name(path: &Path, parents: &mut Vec<(PathBuf, Option<PathBuf>)>) -> Option<PathBuf> {
    let path = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Some(path.canonicalize().unwrap_or(path));
    };
    let known = parents
        .iter()
        .find(|(p, _)| p == parent)
        .map(|(_, c)| c.clone());
    let canonical_parent = match known {
        Some(c) => c,
        None => {
            let c = parent.canonicalize().ok();
            parents.push((parent.to_path_buf(), c.clone()));
            c
        }
    };
    let Some(canonical_parent) = canonical_parent else {
        // A parent that cannot be resolved: neither can the path (kept as given).
        return Some(path.canonicalize().unwrap_or(path));
    };
    // What `canonicalize` of the whole path gives: the parent's canonical form and the name,
    // unless the name is a link (then where it leads, when it leads anywhere).
    let at = canonical_parent.join(name);
    Some(match at.symlink_metadata() {
        Ok(m) if m.file_type().is_symlink() => at.canonicalize().unwrap_or(at),
        _ => at,
    })
}

fn add(list: &RwLock<Vec<PathBuf>>, path: PathBuf) {
    if let Ok(mut l) = list.write()
        && !l.contains(&path)
    {
        l.push(path);
        REGISTERED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Paths registered so far ([`register_keel_path`]): part of [`fingerprint`].
static REGISTERED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many paths were registered so far ([`register_keel_path`]; they are only ever added).
pub fn registered_count() -> usize {
    KEEL_PATHS.read().map(|l| l.len()).unwrap_or(usize::MAX)
}

/// The paths registered after the first `from` ([`registered_count`]), as Keel's stores, and
/// the count they bring it to.
pub fn registered_since(from: usize) -> (Vec<Store>, usize) {
    match KEEL_PATHS.read() {
        Ok(l) => (
            l.iter()
                .skip(from)
                .map(|path| Store {
                    path: path.clone(),
                    kind: StoreKind::Keel,
                })
                .collect(),
            l.len(),
        ),
        Err(_) => (Vec::new(), usize::MAX),
    }
}

/// [`fingerprint`] without the registered paths: the environment variables the store list is
/// built from. While it is unchanged, the list differs from an earlier one only by the paths
/// registered since ([`registered_since`]).
pub fn environment_fingerprint() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let vars = ENV_READ
        .iter()
        .copied()
        .chain(RELOCATED.iter().map(|(v, _)| *v));
    for var in vars {
        std::env::var_os(var).hash(&mut h);
    }
    h.finish()
}

/// What [`protected`] (with this process's environment) is built from, as one number: the
/// registered paths' count and the environment variables it reads. Equal fingerprints give
/// the same list, so a fence built from it still holds (a shared workspace handle,
/// [`crate::beneath::DirHandle::share`]).
pub fn fingerprint() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    REGISTERED
        .load(std::sync::atomic::Ordering::SeqCst)
        .hash(&mut h);
    environment_fingerprint().hash(&mut h);
    h.finish()
}

/// The environment variables the store list reads besides [`RELOCATED`]'s.
const ENV_READ: &[&str] = &[
    "HOME",
    "KEEL_HOME",
    "KEEL_CONFIG",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
];

fn registered(list: &RwLock<Vec<PathBuf>>) -> Vec<PathBuf> {
    list.read().map(|l| l.clone()).unwrap_or_default()
}

/// This process's environment, for the functions here that take one.
pub fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// The user's home directories: `$HOME` when it is absolute, and the home the password
/// database gives the effective user (when `HOME` is unset, empty or another directory — a
/// service, cron, a CI runner — the stores in the real home still count).
pub fn homes(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    homes_with(env, passwd_home())
}

fn homes_with(env: &dyn Fn(&str) -> Option<String>, passwd: Option<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = env("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain(passwd)
        .filter(|h| h.is_absolute() && h != Path::new("/"))
        .flat_map(with_canonical)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The effective user's home directory from the password database (once per process).
pub fn passwd_home() -> Option<PathBuf> {
    static HOME: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    HOME.get_or_init(lookup_passwd_home).clone()
}

#[allow(unsafe_code)]
fn lookup_passwd_home() -> Option<PathBuf> {
    use std::ffi::CStr;
    use std::os::unix::ffi::OsStrExt;
    let uid = rustix::process::geteuid().as_raw();
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: `passwd` is plain data filled in by `getpwuid_r`; the strings it points to live
    // in `buf`, which outlives their use below.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf.len()` is its real size.
    let rc = unsafe {
        libc::getpwuid_r(
            uid,
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() || pw.pw_dir.is_null() {
        return None;
    }
    // SAFETY: `pw_dir` is a NUL-terminated string inside `buf` (checked non-null above).
    let dir = unsafe { CStr::from_ptr(pw.pw_dir) };
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()));
    path.is_absolute().then_some(path)
}

/// `entry` (absolute, or `~/…`) as the absolute paths it names: one per home, and under the
/// XDG directory that moves it (`~/.config/x` also at `$XDG_CONFIG_HOME/x`). Relative entries
/// name nothing.
pub fn expand(entry: &str, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    expand_in(entry, &Bases::new(homes(env), env))
}

/// [`expand`] of every entry of a list, in order, with the homes and XDG directories looked
/// up once for the whole list (each lookup canonicalises the homes: ~80 entries of
/// `shell.hide` expanded one by one were ~400 `readlink`s before the first request, issue 33).
pub fn expand_all<S: AsRef<str>>(
    entries: &[S],
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let bases = Bases::new(homes(env), env);
    entries
        .iter()
        .flat_map(|e| expand_in(e.as_ref(), &bases))
        .collect()
}

/// Where `~/…` entries expand: the homes, and the XDG directories that move some of them
/// (read from the environment once per list, not once per entry: a list has ~95 entries).
struct Bases {
    homes: Vec<PathBuf>,
    xdg: [(&'static str, Option<PathBuf>); 3],
}

impl Bases {
    fn new(homes: Vec<PathBuf>, env: &dyn Fn(&str) -> Option<String>) -> Self {
        Self {
            homes,
            xdg: [
                (".config/", absolute_var(env, "XDG_CONFIG_HOME")),
                (".local/share/", absolute_var(env, "XDG_DATA_HOME")),
                (".cache/", absolute_var(env, "XDG_CACHE_HOME")),
            ],
        }
    }
}

fn expand_in(entry: &str, bases: &Bases) -> Vec<PathBuf> {
    let Some(rest) = entry.strip_prefix("~/") else {
        let p = PathBuf::from(entry);
        return if p.is_absolute() { vec![p] } else { Vec::new() };
    };
    let mut out: Vec<PathBuf> = bases.homes.iter().map(|h| h.join(rest)).collect();
    for (prefix, base) in &bases.xdg {
        if let (Some(tail), Some(base)) = (rest.strip_prefix(prefix), base) {
            out.push(base.join(tail));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn absolute_var(env: &dyn Fn(&str) -> Option<String>, key: &str) -> Option<PathBuf> {
    env(key)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// [`SECRET_STORES`] expanded ([`expand`]), plus the stores moved by [`RELOCATED`] variables.
pub fn secret_stores(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let bases = Bases::new(homes(env), env);
    let mut out: Vec<PathBuf> = SECRET_STORES
        .iter()
        .flat_map(|s| expand_in(s, &bases))
        .collect();
    out.extend(relocated(env));
    out.sort();
    out.dedup();
    out
}

/// The stores [`RELOCATED`] variables name in `env`.
pub fn relocated(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (var, below) in RELOCATED {
        let Some(value) = env(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        for part in value.split(':') {
            let base = PathBuf::from(part);
            if !base.is_absolute() {
                continue;
            }
            out.push(if below.is_empty() {
                base
            } else {
                base.join(below)
            });
        }
    }
    out
}

/// Keel's own directories: every data directory Keel would use (`$KEEL_HOME`,
/// `$XDG_DATA_HOME/keel`, `~/.local/share/keel` — all of them, so data left behind by an
/// earlier setting stays hidden: it holds the server token and every transcript) and every
/// user configuration directory (`$XDG_CONFIG_HOME/keel`, `~/.config/keel`), plus the paths
/// registered with [`register_keel_path`]. Absolute paths only.
pub fn keel_paths(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    keel_paths_in(env, &homes(env))
}

/// [`keel_paths`] with the homes already looked up.
fn keel_paths_in(env: &dyn Fn(&str) -> Option<String>, homes: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    out.extend(
        absolute_var(env, "KEEL_HOME")
            .into_iter()
            .flat_map(with_canonical),
    );
    out.extend(absolute_var(env, "XDG_DATA_HOME").map(|x| x.join("keel")));
    out.extend(absolute_var(env, "XDG_CONFIG_HOME").map(|x| x.join("keel")));
    for h in homes {
        out.push(h.join(".local/share/keel"));
        out.push(h.join(".config/keel"));
    }
    out.extend(absolute_var(env, "KEEL_CONFIG"));
    out.extend(registered(&KEEL_PATHS));
    out.sort();
    out.dedup();
    out
}

/// The store directories made to exist (empty, 0700) when a command's writable workspace
/// holds them and they are missing, so the sandbox can cover them: a directory that does not
/// exist cannot be covered, and a command could create it — `~/.ssh/authorized_keys`, or a
/// Keel configuration that turns the sandbox off for every later session. Keel's own data
/// and configuration directories and `~/.ssh` (what `ssh-keygen` would create); the file
/// tools refuse all stores by name whether they exist or not.
pub fn dirs_worth_creating(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let homes = homes(env);
    let mut out: Vec<PathBuf> = homes.iter().map(|h| h.join(".ssh")).collect();
    out.extend(absolute_var(env, "KEEL_HOME"));
    out.extend(absolute_var(env, "XDG_DATA_HOME").map(|x| x.join("keel")));
    out.extend(absolute_var(env, "XDG_CONFIG_HOME").map(|x| x.join("keel")));
    for h in homes {
        out.push(h.join(".local/share/keel"));
        out.push(h.join(".config/keel"));
    }
    out
}

/// Every protected store of this process: [`SECRET_STORES`] expanded, and everything of
/// [`always`]. The file tools refuse all of them (a workspace that holds one cannot lead into
/// it).
pub fn protected(env: &dyn Fn(&str) -> Option<String>) -> Vec<Store> {
    let bases = Bases::new(homes(env), env);
    let mut out: Vec<Store> = SECRET_STORES
        .iter()
        .flat_map(|s| expand_in(s, &bases))
        .map(|path| Store {
            path,
            kind: StoreKind::Secret,
        })
        .collect();
    out.extend(always_in(env, &bases.homes));
    out
}

/// The stores hidden whatever `shell.hide` says: Keel's own paths ([`keel_paths`]) and the
/// stores environment variables move ([`relocated`]). The sandbox hides these and the
/// request's own `shell.hide` list (by default [`secret_stores`]).
pub fn always(env: &dyn Fn(&str) -> Option<String>) -> Vec<Store> {
    always_in(env, &homes(env))
}

/// [`always`] with the homes already looked up.
fn always_in(env: &dyn Fn(&str) -> Option<String>, homes: &[PathBuf]) -> Vec<Store> {
    let mut out: Vec<Store> = relocated(env)
        .into_iter()
        .map(|path| Store {
            path,
            kind: StoreKind::Secret,
        })
        .collect();
    out.extend(keel_paths_in(env, homes).into_iter().map(|path| Store {
        path,
        kind: StoreKind::Keel,
    }));
    out
}

/// The stores of [`protected`] (with this process's environment) that lie strictly beneath
/// `root` (a canonical directory), each as a path relative to `root` (canonical where it
/// exists) with the store as listed — and the targets of the stores' symlinks that do
/// ([`link_targets`]: `~/.ssh/id_ed25519` leading into the workspace), listed as the link.
/// Cheap when none does: only candidates are resolved (homes and `$KEEL_HOME` reached through
/// a symlink are listed by both names already).
pub fn beneath(root: &Path) -> Vec<(PathBuf, Store)> {
    beneath_among(root, protected(&process_env))
}

/// [`beneath`] among the stores `all` only.
pub fn beneath_among(root: &Path, all: Vec<Store>) -> Vec<(PathBuf, Store)> {
    let mut out = Vec::new();
    for t in link_targets(&all).targets {
        if let Ok(rel) = t.target.strip_prefix(root)
            && !rel.as_os_str().is_empty()
        {
            out.push((
                rel.to_path_buf(),
                Store {
                    path: t.link,
                    kind: t.kind,
                },
            ));
        }
    }
    for store in all {
        let p = &store.path;
        if !p.starts_with(root) {
            continue;
        }
        let c = p.canonicalize().unwrap_or_else(|_| p.clone());
        if let Ok(rel) = c.strip_prefix(root)
            && !rel.as_os_str().is_empty()
        {
            out.push((rel.to_path_buf(), store.clone()));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// The stores beneath a directory as git pathspecs: how Keel's own git (the git tools, `/diff`,
/// snapshots, undo) leaves them out. Each is relative to the directory (canonical where it
/// exists, as [`beneath`] lists it) with the magic `literal` (never a glob) and `icase` (as the
/// workspace handle's fence compares names: `.SSH/…` is refused, so it is left out too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pathspecs(Vec<String>);

/// The pathspec magic every store pathspec carries.
pub const PATHSPEC_MAGIC: &str = "literal,icase";

impl Pathspecs {
    /// The stores beneath `root` (canonicalised here). `Err` names a store whose path beneath
    /// `root` is not UTF-8: git could be given it only approximately, which would leave the
    /// store in — the caller refuses to run git.
    pub fn beneath(root: &Path) -> Result<Self, Store> {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let mut out = Vec::new();
        for (rel, store) in beneath(&root) {
            let Some(text) = rel.to_str() else {
                return Err(store);
            };
            out.push(text.to_string());
        }
        Ok(Self(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Pathspecs leaving every store out (`:(exclude,literal,icase)…`), to follow an
    /// operation's own.
    pub fn excluding(&self) -> impl Iterator<Item = String> + '_ {
        self.0
            .iter()
            .map(|rel| format!(":(exclude,{PATHSPEC_MAGIC}){rel}"))
    }

    /// Pathspecs naming every store (`:(literal,icase)…`).
    pub fn selecting(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|rel| format!(":({PATHSPEC_MAGIC}){rel}"))
    }
}

/// `path` (a home, `$KEEL_HOME`) and, when a symlink leads to it (`/home/u` → `/data/u`), its
/// canonical form. Looked up once per process and path: every store list is built from the
/// homes, and each list canonicalised them again — one `readlink` per component, ~30 before
/// the first request (issue 33). The form found at the first lookup (at start) serves this
/// process's own lists; the stores beneath them are still looked at afresh for each list, and
/// a handle's fence still checks what it opens by device and inode.
fn with_canonical(path: PathBuf) -> Vec<PathBuf> {
    static KNOWN: std::sync::Mutex<Vec<(PathBuf, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let canonical = match known.iter().find(|(p, _)| *p == path) {
        Some((_, c)) => Some(c.clone()),
        None => {
            // Only what exists is kept: a `$KEEL_HOME` made later (the first session creates
            // it) is looked up again until it resolves.
            let c = path.canonicalize().ok();
            if let Some(c) = &c {
                // A handful of homes per process; bounded all the same.
                if known.len() >= 64 {
                    known.clear();
                }
                known.push((path.clone(), c.clone()));
            }
            c
        }
    };
    match canonical {
        Some(c) if c != path => vec![path, c],
        _ => vec![path],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k: &str| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn both_homes_count_when_home_is_unset_or_wrong() {
        let pw = Some(PathBuf::from("/root"));
        assert_eq!(
            homes_with(&env(&[]), pw.clone()),
            vec![PathBuf::from("/root")]
        );
        assert_eq!(
            homes_with(&env(&[("HOME", "")]), pw.clone()),
            vec![PathBuf::from("/root")]
        );
        assert_eq!(
            homes_with(&env(&[("HOME", "/nonexistent/h")]), pw.clone()),
            vec![PathBuf::from("/nonexistent/h"), PathBuf::from("/root")]
        );
        assert_eq!(
            homes_with(&env(&[("HOME", "/root")]), pw),
            vec![PathBuf::from("/root")]
        );
        assert!(homes_with(&env(&[("HOME", "rel")]), None).is_empty());
        assert!(homes_with(&env(&[("HOME", "/")]), None).is_empty());
    }

    #[test]
    fn entries_expand_per_home_and_xdg_directory() {
        let e = env(&[("XDG_CONFIG_HOME", "/x/c"), ("XDG_CACHE_HOME", "rel")]);
        let homes = Bases::new(vec![PathBuf::from("/h"), PathBuf::from("/root")], &e);
        assert_eq!(
            expand_in("~/.config/gh", &homes),
            vec![
                PathBuf::from("/h/.config/gh"),
                PathBuf::from("/root/.config/gh"),
                PathBuf::from("/x/c/gh")
            ]
        );
        assert_eq!(
            expand_in("~/.cache/huggingface/token", &homes).len(),
            2,
            "a relative XDG directory names nothing"
        );
        assert_eq!(expand_in("/etc/x", &homes), vec![PathBuf::from("/etc/x")]);
        assert!(expand_in("rel/x", &homes).is_empty());
    }

    #[test]
    fn stores_moved_by_the_environment_are_stores() {
        let e = env(&[
            ("CARGO_HOME", "/c"),
            ("GNUPGHOME", "/g"),
            ("KUBECONFIG", "/k1:/k2:rel"),
            ("DOCKER_CONFIG", "/d"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/a/creds"),
            ("HF_HOME", ""),
        ]);
        let r = relocated(&e);
        for p in [
            "/c/credentials",
            "/c/credentials.toml",
            "/g",
            "/k1",
            "/k2",
            "/d/config.json",
            "/a/creds",
        ] {
            assert!(r.contains(&PathBuf::from(p)), "{p}: {r:?}");
        }
        assert_eq!(r.len(), 7, "{r:?}");
        assert!(secret_stores(&e).contains(&PathBuf::from("/c/credentials.toml")));
    }

    #[test]
    fn key_files_named_by_the_environment_are_stores() {
        // Red-team pass 3, R3-6: `GOOGLE_APPLICATION_CREDENTIALS` named a key nobody hid.
        let e = env(&[
            ("GOOGLE_APPLICATION_CREDENTIALS", "/s/sa.json"),
            ("KAGGLE_CONFIG_DIR", "/kg"),
            ("PULUMI_HOME", "/pu"),
            ("OCI_CLI_CONFIG_FILE", "/oci/config"),
            ("OCI_CLI_KEY_FILE", "/oci/key.pem"),
            ("RCLONE_CONFIG", "/rc/rclone.conf"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/var/run/token"),
            ("DOCKER_CERT_PATH", "/dc"),
            ("SOPS_AGE_KEY_FILE", "/age.txt"),
            ("VAULT_CONFIG_PATH", "/v.hcl"),
            ("TF_CLI_CONFIG_FILE", "/tf.rc"),
        ]);
        let r = relocated(&e);
        for p in [
            "/s/sa.json",
            "/kg/kaggle.json",
            "/pu/credentials.json",
            "/oci/config",
            "/oci/key.pem",
            "/rc/rclone.conf",
            "/var/run/token",
            "/dc",
            "/age.txt",
            "/v.hcl",
            "/tf.rc",
        ] {
            assert!(r.contains(&PathBuf::from(p)), "{p}: {r:?}");
        }
        assert_eq!(r.len(), 11, "{r:?}");
        // Hidden whatever `shell.hide` says, and refused by the file tools.
        assert!(
            always(&e)
                .iter()
                .any(|s| s.path == Path::new("/s/sa.json") && s.kind == StoreKind::Secret)
        );
    }

    #[test]
    fn keel_paths_hold_every_data_and_config_directory() {
        let e = env(&[
            ("KEEL_HOME", "/data"),
            ("XDG_CONFIG_HOME", "/x/c"),
            ("KEEL_CONFIG", "/c/keel.toml"),
        ]);
        let k = keel_paths(&e);
        for p in ["/data", "/x/c/keel", "/c/keel.toml"] {
            assert!(k.contains(&PathBuf::from(p)), "{p}: {k:?}");
        }
        // The passwd home's too, whatever HOME says.
        if let Some(h) = passwd_home() {
            assert!(k.contains(&h.join(".local/share/keel")), "{k:?}");
        }
        let rel = env(&[("KEEL_HOME", "rel"), ("KEEL_CONFIG", "rel.toml")]);
        assert!(keel_paths(&rel).iter().all(|p| p.is_absolute()));
    }

    #[test]
    fn registered_paths_are_protected() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let canonical = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        // Named through a symlink and not yet existing: registered canonically.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&canonical, &link).unwrap_or_else(|e| panic!("{e}"));
        register_keel_path(&link.join("keel.db"));
        let all = always(&process_env);
        assert!(
            all.iter()
                .any(|s| s.path == canonical.join("keel.db") && s.kind == StoreKind::Keel),
            "{all:?}"
        );
        let under: Vec<PathBuf> = beneath(&canonical).into_iter().map(|(r, _)| r).collect();
        assert_eq!(under, vec![PathBuf::from("keel.db")]);
    }
}

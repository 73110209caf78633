//! What a workspace's Python virtual environments run at every start (red-team pass 6, R6-2):
//! a `.pth` file in `site-packages` is read by every `python` of that environment, and a line
//! of it starting with `import` runs — so a command writing `evil.pth` into an ignored
//! `.venv` (out of the diff the user reviews) ran its code, unconfined, at the user's next
//! `python`, `pip` or `pytest`. The same holds for `sitecustomize` / `usercustomize`, the
//! modules a `.pth` imports, and the programs in the environment's `bin/` that the user runs
//! by name once it is activated (console scripts, `activate` itself).
//!
//! After each command that could write, the runner's walk ([`super::nested_git`]) lists every
//! virtual environment in the tree (a directory holding `pyvenv.cfg`, whatever its name), and
//! this check renames each **startup file** the command created or changed to
//! `<name>.quarantined-by-keel` (Python then ignores it), reporting it in the command's
//! result — unless a person approved that exact command (asked and allowed:
//! [`super::exec::ExecRequest::approved`]): installing into the project's environment is the
//! model's job when the user said yes to `pip install -e .`, and not when nobody looked.
//! Startup files: in each `lib*/python*/` and its `site-packages`, every `*.pth`, every
//! `sitecustomize.*` / `usercustomize.*`, and the top-level modules and packages a `.pth`
//! names (`_virtualenv.py`, `_distutils_hack/`, an editable install's finder); in an
//! environment that existed before the command (its `pyvenv.cfg` unchanged), every entry of
//! `bin/`. A new environment's `bin/` is what `python -m venv` writes; its `.pth` files are
//! still judged.
//!
//! Bytecode anywhere in the tree (red-team pass 7, R7-2): Python may run a `.pyc` without
//! reading its source (an "unchecked-hash" one in `__pycache__`, a sourceless `pytest.pyc` at
//! the root), and `__pycache__` / `*.py[cod]` are ignored, so no diff shows it. Commands run
//! with `PYTHONDONTWRITEBYTECODE=1` (Python itself writes none into the tree), and every
//! `*.pyc` / `*.pyo` the command wrote is removed — a cache: Python compiles the source again
//! ([`super::loaded_code`], with the other files the loaders take).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The most site directories looked at per environment, and entries per directory.
const MAX_SITE_DIRS: usize = 16;
const MAX_ENTRIES: usize = 20_000;
/// The largest `.pth` read for the module names it imports.
const MAX_PTH: u64 = 64 * 1024;

/// What the runner's walk met of Python's and the test runners': virtual environments, Cargo's
/// profile directories, and the files the loaders take ([`super::loaded_code`]).
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) venvs: Vec<PathBuf>,
    pub(crate) cargo: Vec<PathBuf>,
    pub(crate) code: super::loaded_code::Found,
}

impl Seen {
    /// Notes `entry` of the directory `dir` when it is a file the loaders take, by name.
    pub(crate) fn note(&mut self, dir: &Path, entry: &std::fs::DirEntry) {
        self.code.note(dir, entry);
    }
}

/// Removes the file `rel` within its open parent, beneath the workspace handle.
pub(super) fn remove_beneath(workspace: &Path, rel: &Path) -> bool {
    let Ok(ws) = keel_fs::beneath::DirHandle::open(workspace) else {
        return false;
    };
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return false;
    };
    ws.subdir(parent)
        .is_ok_and(|dir| rustix::fs::unlinkat(dir.fd(), name, rustix::fs::AtFlags::empty()).is_ok())
}

/// One startup file moved aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// Workspace-relative.
    pub path: String,
    pub moved_to: String,
}

pub(super) fn changed_since(meta: &std::fs::Metadata, since: SystemTime) -> bool {
    let ctime = SystemTime::UNIX_EPOCH
        + Duration::new(
            u64::try_from(meta.ctime()).unwrap_or(0),
            u32::try_from(meta.ctime_nsec()).unwrap_or(0),
        );
    ctime >= since
}

/// Whether a file at or below `path` (a module, or a package: three levels, bounded) changed
/// since `since`. Directories themselves do not count, nor `__pycache__` (bytecode is judged
/// apart: [`super::loaded_code`]).
fn changed_below(path: &Path, since: SystemTime) -> bool {
    let mut stack = vec![(path.to_path_buf(), 0usize)];
    let mut looked = 0usize;
    while let Some((p, depth)) = stack.pop() {
        looked += 1;
        if looked > 2_000 {
            return true;
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if !meta.is_dir() {
            if changed_since(&meta, since) {
                return true;
            }
            continue;
        }
        if depth < 3
            && let Ok(entries) = std::fs::read_dir(&p)
        {
            stack.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name() != "__pycache__")
                    .map(|e| (e.path(), depth + 1)),
            );
        }
    }
    false
}

/// `lib*/python*/` of the environment at `venv`, and their `site-packages`; `*truncated` set
/// when there were more than [`MAX_SITE_DIRS`] to look at.
fn site_dirs(venv: &Path, truncated: &mut bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for lib in ["lib", "lib64", "Lib"] {
        let Ok(entries) = std::fs::read_dir(venv.join(lib)) else {
            continue;
        };
        let entries: Vec<_> = entries.flatten().collect();
        if entries.len() > MAX_SITE_DIRS {
            *truncated = true;
        }
        for e in entries.into_iter().take(MAX_SITE_DIRS) {
            let name = e.file_name();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && name.to_string_lossy().starts_with("python") {
                out.push(e.path());
                out.push(e.path().join("site-packages"));
            } else if is_dir && name == "site-packages" {
                out.push(e.path());
            }
        }
    }
    out
}

/// The module names a `.pth` text may import: every identifier it holds (a superset: an
/// `import x` line, `__import__('x')`).
fn named_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("import ") || l.starts_with("import\t"))
        .flat_map(|l| {
            l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn read_small(path: &Path) -> String {
    use std::io::Read;
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut o,
        (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
    );
    // A file of the workspace's virtual environment, read only for the names it imports: no
    // link followed, non-blocking, regular, bounded.
    #[allow(clippy::disallowed_methods)]
    let Ok(f) = o.open(path) else {
        return String::new();
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = f.take(MAX_PTH).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The startup files of the environment at `venv` (see the module's doc). Bytecode written
/// since `since` is removed apart ([`super::loaded_code`]). `*truncated` is set when the
/// environment held more than the bounds let this look at.
fn startup_files(venv: &Path, since: SystemTime, truncated: &mut bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for site in site_dirs(venv, truncated) {
        let Ok(entries) = std::fs::read_dir(&site) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().take(MAX_ENTRIES + 1).collect();
        if entries.len() > MAX_ENTRIES {
            *truncated = true;
            entries.truncate(MAX_ENTRIES);
        }
        let mut modules: Vec<String> = vec!["sitecustomize".into(), "usercustomize".into()];
        for e in &entries {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".pth") {
                modules.extend(named_modules(&read_small(&e.path())));
                out.push(e.path());
            }
        }
        for e in &entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.split('.').next().unwrap_or("").to_string();
            let module =
                e.file_type().is_ok_and(|t| t.is_dir()) || crate::trust::loads_as_code(&name);
            if module && modules.contains(&stem) && !out.contains(&e.path()) {
                out.push(e.path());
            }
        }
    }
    // An environment that was there before the command: its programs and its `pyvenv.cfg`
    // (whose `home` decides where the interpreter's standard library comes from). A new one's
    // are what `python -m venv` writes.
    let existed = ["pyvenv.cfg", "lib"]
        .iter()
        .any(|n| std::fs::symlink_metadata(venv.join(n)).is_ok_and(|m| !changed_since(&m, since)));
    if existed {
        out.push(venv.join("pyvenv.cfg"));
        for bin in ["bin", "Scripts"] {
            if let Ok(entries) = std::fs::read_dir(venv.join(bin)) {
                out.extend(
                    entries
                        .flatten()
                        .take(MAX_ENTRIES)
                        .filter(|e| e.file_name() != "__pycache__")
                        .map(|e| e.path()),
                );
            }
        }
    }
    out
}

/// After a command that started at `since`: moves every startup file of the environments
/// `venvs` (beneath `workspace`) that the command created or changed out of Python's way,
/// unless `approved`. Returns what was moved.
pub(crate) fn check(
    workspace: &Path,
    seen: &Seen,
    since: SystemTime,
    approved: bool,
) -> (Vec<Moved>, Vec<super::bounds::Cut>) {
    if approved {
        return (Vec::new(), Vec::new());
    }
    let since = since.checked_sub(Duration::from_secs(1)).unwrap_or(since);
    let mut out: Vec<Moved> = Vec::new();
    let mut cuts = Vec::new();
    for venv in &seen.venvs {
        let mut truncated = false;
        let mut files = startup_files(venv, since, &mut truncated);
        if truncated {
            cuts.push(
                super::bounds::Cut::new(
                    "virtual environment startup files",
                    format!(
                        "`{}` holds more site directories or entries than Keel looks through",
                        venv.strip_prefix(workspace).unwrap_or(venv).display()
                    ),
                )
                .covered("the environment was made inert (its `pyvenv.cfg` and `lib` moved aside)"),
            );
            // Bounds must not hide a plant (red-team pass 8, R8-10: 300 padding directories
            // in `lib/`, or 60,000 files in `site-packages`, hid a `.pth`): an environment
            // too large to look through whole is made inert — without its `pyvenv.cfg` its
            // `python` no longer reads its `site-packages` — and its `lib` directories go
            // too, with whatever startup file they hide: the user's `python3 -m venv` over the
            // directory had kept them (R8-10's rest).
            for name in ["pyvenv.cfg", "lib", "lib64", "Lib"] {
                let path = venv.join(name);
                if std::fs::symlink_metadata(&path).is_err() {
                    continue;
                }
                let Ok(rel) = path.strip_prefix(workspace) else {
                    continue;
                };
                let moved_to = super::git_programs::quarantine(workspace, rel).map_or_else(
                    || "(COULD NOT be moved: remove the environment)".to_string(),
                    |to| {
                        format!(
                            "{} (the environment holds more than Keel looks through; recreate it with `python3 -m venv --clear {}`)",
                            to.display(),
                            venv.strip_prefix(workspace).unwrap_or(venv).display()
                        )
                    },
                );
                out.push(Moved {
                    path: rel.display().to_string(),
                    moved_to,
                });
            }
            // Its programs are still judged one by one.
            let bins = [venv.join("bin"), venv.join("Scripts")];
            files.retain(|f| bins.iter().any(|b| f.starts_with(b)));
        }
        for file in files {
            if !changed_below(&file, since) {
                continue;
            }
            let Ok(rel) = file.strip_prefix(workspace) else {
                continue;
            };
            let moved_to = super::git_programs::quarantine(workspace, rel).map_or_else(
                || "(COULD NOT be moved: remove it)".to_string(),
                |to| to.display().to_string(),
            );
            out.push(Moved {
                path: rel.display().to_string(),
                moved_to,
            });
        }
    }
    (out, cuts)
}

/// The report of what was moved, for the command's result.
pub fn report(moved: &[Moved]) -> Option<String> {
    if moved.is_empty() {
        return None;
    }
    let mut text = String::from(
        "keel: the command created or changed files that Python runs without reading them in the diff (a virtual environment's `.pth` files, `sitecustomize`, what they import, its `bin/` programs); nobody approved that command, so Keel moved them out of Python's way:",
    );
    for m in moved {
        if m.path.starts_with('(') {
            text.push_str(&format!(
                "\n- {}",
                m.path.trim_matches(|c| c == '(' || c == ')')
            ));
            continue;
        }
        text.push_str(&format!("\n- `{}` moved to `{}`", m.path, m.moved_to));
    }
    text.push_str("\nIf the environment needs them (an editable `pip install -e .`, a new package's command), ask the user to approve the install command or to run it themselves.");
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pth_names_the_modules_it_imports() {
        let m = named_modules(
            "/some/path\nimport _virtualenv\nimport os; __import__('_distutils_hack').add_shim()\n",
        );
        assert!(m.contains(&"_virtualenv".to_string()), "{m:?}");
        assert!(m.contains(&"_distutils_hack".to_string()), "{m:?}");
        assert!(
            !m.contains(&"some".to_string()),
            "a path line imports nothing: {m:?}"
        );
    }
}

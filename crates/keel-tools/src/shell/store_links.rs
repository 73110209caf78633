//! Symlinks on the way to a protected store inside a tree a command may write (red-team pass
//! 7, R7-28 and R7-29). In a workspace that holds the home, a dotfile manager's
//! `~/.config/keel -> dotfiles/keel` or `~/.ssh -> dotfiles/ssh` is covered where it leads —
//! the sandbox mounts on the link's target — but the link itself is an entry of a writable
//! directory: `mv .config/keel x && ln -s ../evil .config/keel` re-pointed Keel's
//! configuration (`sandbox = false` for every later session), and `~/.ssh` to a directory
//! holding an ssh `config` with a `ProxyCommand` or an `authorized_keys`. A mount cannot sit
//! on a link, so after every command that could write, each such link is compared with what
//! it was before; one that changed is put back and what the command left there is moved aside
//! and reported. Checked in the one command runner ([`super::exec::run`], through
//! [`super::nested_git::Watch`]), so every runner gets it.
//!
//! The same holds for the work-tree programs the user's git runs (red-team pass 7, R7-27): a
//! hooks directory reached through a link (`core.hooksPath = .husky`, `.husky -> tools/hooks`)
//! was read-only at its target only, and `mv .husky old && ln -s docs/hooks .husky` pointed
//! the user's next `git commit` at a directory the model had filled in an earlier command. The
//! runner notes the links on the way to every such program path too
//! ([`super::git_programs::Before::absolute`]) and puts a re-pointed one back.

use std::path::{Path, PathBuf};

/// One link noted before a command: where it is, the tree it lies in, where it pointed.
#[derive(Debug, Clone)]
struct Noted {
    root: PathBuf,
    link: PathBuf,
    target: PathBuf,
}

/// The links on the way to every protected store that lies inside a writable tree, as they
/// were before a command.
#[derive(Debug, Default)]
pub(crate) struct StoreLinks(Vec<Noted>);

impl StoreLinks {
    /// Notes, for every store of Keel's own, every path in `hidden` (the user's secret
    /// stores) and every path in `programs` (absolute: what the user's git runs from the work
    /// tree, R7-27) that exists, every symlink met while resolving it as a program would —
    /// links reached through an earlier link's target included, relative ones resolved from
    /// where they stand — that lies strictly inside one of `writable` (red-team pass 8, R8-1:
    /// only the first link was noted; `~/dotfiles -> src/dotfiles` further on was re-pointed).
    /// An ordinary workspace holds none: one `lstat` per store that exists.
    pub(crate) fn note(writable: &[PathBuf], hidden: &[PathBuf], programs: &[PathBuf]) -> Self {
        let env = &keel_fs::stores::process_env;
        let mut stores: Vec<PathBuf> = keel_fs::stores::always(env)
            .into_iter()
            .map(|s| s.path)
            .collect();
        stores.extend(hidden.iter().cloned());
        stores.extend(programs.iter().cloned());
        let mut out: Vec<Noted> = Vec::new();
        if writable.is_empty() {
            return Self(out);
        }
        for store in stores.iter().filter(|s| s.is_absolute()) {
            if std::fs::symlink_metadata(store).is_err() {
                continue;
            }
            for (link, target) in crate::sandbox::links_on_the_way(store) {
                let Some(root) = writable.iter().find(|w| link.starts_with(w) && link != **w)
                else {
                    continue;
                };
                if !out.iter().any(|n| n.link == link) {
                    out.push(Noted {
                        root: root.clone(),
                        link,
                        target,
                    });
                }
            }
        }
        Self(out)
    }

    /// Whether no link was noted.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// What the journal keeps ([`super::pending`]): (tree, link, target) as path bytes.
    pub(crate) fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        use super::pending::path_bytes;
        self.0
            .iter()
            .map(|n| {
                (
                    path_bytes(&n.root),
                    path_bytes(&n.link),
                    path_bytes(&n.target),
                )
            })
            .collect()
    }

    /// The links a journal entry of a command in `workspace` kept — only those a note could
    /// have made (red-team pass 8, R8-15: a forged entry named a file outside every
    /// workspace, and the replay replaced it by a link of the forger's choosing): strictly
    /// inside the entry's tree, which lies inside the workspace or holds it, and on the way
    /// to one of Keel's stores, the default secret stores or a program path the workspace's
    /// git configuration names (a link there now, a directory the resolution walks, or the
    /// store's own path).
    pub(crate) fn from_entries(
        entries: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
        workspace: &Path,
    ) -> Self {
        use super::pending::bytes_path;
        let env = &keel_fs::stores::process_env;
        let mut stores: Vec<PathBuf> = keel_fs::stores::always(env)
            .into_iter()
            .map(|s| s.path)
            .collect();
        stores.extend(crate::sandbox::secret_stores());
        stores.extend(
            crate::sandbox::git_config_paths(workspace)
                .into_iter()
                .map(|p| workspace.join(p.path)),
        );
        let mut on_the_way: Vec<PathBuf> = Vec::new();
        for store in stores.iter().filter(|s| s.is_absolute()) {
            let (links, dirs) = crate::sandbox::resolution_of(store);
            on_the_way.extend(links.into_iter().map(|(l, _)| l));
            on_the_way.extend(dirs);
            on_the_way.extend(store.ancestors().map(Path::to_path_buf));
        }
        Self(
            entries
                .into_iter()
                .map(|(root, link, target)| Noted {
                    root: bytes_path(&root),
                    link: bytes_path(&link),
                    target: bytes_path(&target),
                })
                .filter(|n| {
                    n.root.is_absolute()
                        && (n.root.starts_with(workspace) || workspace.starts_with(&n.root))
                        && n.link.starts_with(&n.root)
                        && n.link != n.root
                        && on_the_way.contains(&n.link)
                })
                .collect(),
        )
    }

    /// After the command: every noted link that no longer points where it did is put back;
    /// what stood in its place is renamed aside. One line per link, for the command's result.
    pub(crate) fn restore(&self) -> Vec<String> {
        let mut out = Vec::new();
        for n in &self.0 {
            if std::fs::read_link(&n.link).is_ok_and(|t| t == n.target) {
                continue;
            }
            out.push(match put_back(n) {
                Ok(None) => format!(
                    "`{}` (a link to a protected path) was removed; Keel put it back (-> `{}`)",
                    n.link.display(),
                    n.target.display()
                ),
                Ok(Some(moved)) => format!(
                    "`{}` (a link to a protected path) was re-pointed; Keel put it back (-> `{}`) and moved what the command left to `{}`",
                    n.link.display(),
                    n.target.display(),
                    moved.display()
                ),
                Err(e) => format!(
                    "`{}` (a link to a protected path) was changed and Keel could not put it back ({e}); do not run Keel, ssh or git here before checking it: it should point to `{}`",
                    n.link.display(),
                    n.target.display()
                ),
            });
        }
        out
    }
}

/// Renames what now stands at the link's place aside (beneath the tree's open handle) and
/// makes the link again; the new name of what was moved, if anything was there.
fn put_back(n: &Noted) -> std::io::Result<Option<PathBuf>> {
    let rel = n
        .link
        .strip_prefix(&n.root)
        .map_err(|_| std::io::Error::other("the link left its tree"))?;
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(std::io::Error::other("no parent directory"));
    };
    let tree = keel_fs::beneath::DirHandle::open(&n.root)?;
    let dir = tree
        .subdir(parent)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut moved = None;
    if rustix::fs::statat(dir.fd(), name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok() {
        // The quarantine's own rename: a free name even when the command took the usual ones.
        let mut base = name.to_os_string();
        base.push(".relinked-by-keel");
        let aside = super::git_programs::rename_aside(dir.fd(), name, &base)
            .ok_or_else(|| std::io::Error::other("no free name to move it aside"))?;
        moved = Some(n.link.with_file_name(aside));
    }
    rustix::fs::symlinkat(n.target.as_os_str(), dir.fd(), name)?;
    Ok(moved)
}

/// The report for the command's result, when a link was put back.
pub(crate) fn report(lines: &[String]) -> Option<String> {
    (!lines.is_empty()).then(|| {
        let mut text = String::from(
            "keel: the command changed a link on the way to Keel's own configuration or data, a secret store, or a program the user's git runs (hooks); a later session, ssh or git would have read or run the command's files there:",
        );
        for l in lines {
            text.push_str("\n- ");
            text.push_str(l);
        }
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_re_pointed_store_link_is_put_back() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(home.join("dotfiles/ssh")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("dotfiles/ssh", home.join(".ssh"))
            .unwrap_or_else(|e| panic!("{e}"));
        let store = home.join(".ssh");
        let links = StoreLinks::note(
            std::slice::from_ref(&home),
            std::slice::from_ref(&store),
            &[],
        );
        assert_eq!(links.0.len(), 1, "{links:?}");
        // Unchanged: nothing to say.
        assert!(links.restore().is_empty());
        // Re-pointed to the command's own directory.
        std::fs::create_dir_all(home.join("evil")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::rename(home.join(".ssh"), home.join(".ssh-old")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("evil", home.join(".ssh")).unwrap_or_else(|e| panic!("{e}"));
        let said = links.restore();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("put it back"), "{said:?}");
        assert_eq!(
            std::fs::read_link(home.join(".ssh")).unwrap_or_else(|e| panic!("{e}")),
            PathBuf::from("dotfiles/ssh")
        );
        // Replaced by a directory, then removed: put back each time.
        std::fs::remove_file(home.join(".ssh")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(home.join(".ssh")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(links.restore().len(), 1);
        assert!(std::fs::read_link(home.join(".ssh")).is_ok());
        std::fs::remove_file(home.join(".ssh")).unwrap_or_else(|e| panic!("{e}"));
        assert!(links.restore()[0].contains("was removed"));
        assert!(std::fs::read_link(home.join(".ssh")).is_ok());
        // A store outside every writable tree, or a real directory, notes nothing.
        let other = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            StoreLinks::note(
                &[other.path().to_path_buf()],
                std::slice::from_ref(&store),
                &[]
            )
            .0
            .is_empty()
        );
        std::fs::create_dir_all(home.join("real/.aws")).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            StoreLinks::note(&[home.join("real")], &[home.join("real/.aws")], &[])
                .0
                .is_empty()
        );
    }
}

//! `keel completions SHELL [--install]`: the completion script clap generates from the command
//! tree, printed or written where the shell loads it from.

use std::path::PathBuf;

use clap_complete::Shell;

use crate::args::CompletionsArgs;
use crate::exit;
use crate::setup::UsageError;

pub fn execute(args: CompletionsArgs, mut command: clap::Command) -> anyhow::Result<u8> {
    if !args.install {
        let mut out = crate::out::stdout();
        clap_complete::generate(args.shell, &mut command, "keel", &mut out);
        return Ok(exit::COMPLETED);
    }
    let (path, note) = install_path(args.shell, &|k| std::env::var_os(k))?;
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "keel", &mut script);
    write_script(&path, &script, &|k| std::env::var_os(k))?;
    say!("wrote {}{note}", path.display());
    Ok(exit::COMPLETED)
}

/// Writes `script` at `path` without following a link there: a fresh file beside it renamed
/// over it (a link in its place is replaced, not written through), in a directory that
/// resolves inside the home (red-team pass 8, R8-12: a command in a home workspace planted
/// `~/.local/share/bash-completion/completions/keel` as a link, and `--install` overwrote its
/// target — as root, any file).
fn write_script(
    path: &std::path::Path,
    script: &[u8],
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(), UsageError> {
    use std::io::Write;
    let cannot = |what: &str, p: &std::path::Path, e: &dyn std::fmt::Display| {
        UsageError(format!("cannot {what} {}: {e}", p.display()))
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(UsageError(format!("{} names no file", path.display())));
    };
    std::fs::create_dir_all(dir).map_err(|e| cannot("create", dir, &e))?;
    let real = dir.canonicalize().map_err(|e| cannot("resolve", dir, &e))?;
    let home = env("HOME")
        .map(PathBuf::from)
        .and_then(|h| h.canonicalize().ok());
    if let Some(home) = home
        && !real.starts_with(&home)
    {
        return Err(UsageError(format!(
            "{} leads to {}, outside your home: not writing there (print the script and redirect it yourself if that is intended)",
            dir.display(),
            real.display()
        )));
    }
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = real.join(tmp_name);
    // Not a project file: a fresh file of Keel's own in the user's completions directory.
    #[allow(clippy::disallowed_methods)]
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| cannot("write", &tmp, &e))?;
    let written = file.write_all(script).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, real.join(name))) {
        let _ = std::fs::remove_file(&tmp);
        return Err(cannot("write", path, &e));
    }
    Ok(())
}

/// Where `shell` loads a user's completion scripts from, and what else to do (if anything).
fn install_path(
    shell: Shell,
    env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<(PathBuf, &'static str), UsageError> {
    let home = env("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| UsageError("HOME is not set; print the script and redirect it".into()))?;
    let xdg = |var: &str, default: &str| {
        env(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(default))
    };
    Ok(match shell {
        Shell::Bash => (
            xdg("XDG_DATA_HOME", ".local/share").join("bash-completion/completions/keel"),
            " (new shells load it; bash-completion must be installed)",
        ),
        Shell::Fish => (
            xdg("XDG_CONFIG_HOME", ".config").join("fish/completions/keel.fish"),
            "",
        ),
        Shell::Zsh => (
            env("ZDOTDIR")
                .map(PathBuf::from)
                .unwrap_or(home)
                .join(".zfunc/_keel"),
            "; add `fpath+=~/.zfunc` before `compinit` in ~/.zshrc",
        ),
        other => {
            return Err(UsageError(format!(
                "--install knows bash, zsh and fish; for {other}, print the script and add it to your profile (`keel completions {other} >> $PROFILE`)"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_replaces_a_planted_link_instead_of_writing_through_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let home = dir
            .path()
            .canonicalize()
            .unwrap_or_else(|e| panic!("{e}"))
            .join("home");
        let outside = dir.path().join("victim");
        std::fs::write(&outside, "precious\n").unwrap_or_else(|e| panic!("{e}"));
        let env = |k: &str| (k == "HOME").then(|| home.clone().into_os_string());
        let (path, _) = install_path(Shell::Bash, &env).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(path.parent().unwrap_or(&home)).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&outside, &path).unwrap_or_else(|e| panic!("{e}"));
        write_script(&path, b"complete -F _keel keel\n", &env).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap_or_default(),
            "precious\n",
            "written through the link"
        );
        assert!(
            !path
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap_or_default(),
            "complete -F _keel keel\n"
        );
        // A completions directory that is a link out of the home is refused.
        let (fish, _) = install_path(Shell::Fish, &env).unwrap_or_else(|e| panic!("{e}"));
        let fish_dir = fish.parent().unwrap_or(&home).to_path_buf();
        std::fs::create_dir_all(fish_dir.parent().unwrap_or(&home))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(dir.path(), &fish_dir).unwrap_or_else(|e| panic!("{e}"));
        let e = write_script(&fish, b"x\n", &env)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("outside your home"), "{e}");
        assert!(!dir.path().join("keel.fish").exists());
    }
}

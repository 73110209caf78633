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
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| UsageError(format!("cannot create {}: {e}", dir.display())))?;
    }
    std::fs::write(&path, script)
        .map_err(|e| UsageError(format!("cannot write {}: {e}", path.display())))?;
    say!("wrote {}{note}", path.display());
    Ok(exit::COMPLETED)
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

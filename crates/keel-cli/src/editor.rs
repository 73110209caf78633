//! Opening text in the user's own editor (`$VISUAL`, else `$EDITOR`) for `keel prd edit` and
//! `keel eval promote`: the one place keel starts a program outside the confined runner and
//! the hardened git. It may: the program is the one the user named in their own environment,
//! run at their request on their terminal, on a file in a fresh private directory (0700) that
//! no repository content chose. Nothing from a workspace decides what runs here.

use std::path::Path;
use std::process::ExitStatus;

use anyhow::Context;

/// The user's editor command: `$VISUAL`, else `$EDITOR` (empty values ignored).
pub fn user_editor() -> Option<String> {
    ["VISUAL", "EDITOR"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
}

/// Writes `text` to `file_name` in a new private directory, runs `editor` on it (a shell
/// command line, as `$EDITOR` may hold arguments: `code --wait`), and returns how the editor
/// exited and what the file holds afterwards.
pub fn edit(editor: &str, file_name: &str, text: &str) -> anyhow::Result<(ExitStatus, String)> {
    let dir = tempfile::Builder::new()
        .prefix("keel-edit-")
        .tempdir()
        .context("cannot create a private directory for the editor")?;
    let path = dir
        .path()
        .join(Path::new(file_name).file_name().unwrap_or_default());
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    // The user's own program, at their request (see the module comment) — but `sh` and the
    // editor are looked up only in trusted PATH directories: never in a workspace (an
    // activated `.venv/bin` where the model could plant `sh` or `vi`, red-team R23).
    use keel_tools::shell::lookup;
    let sh = lookup::find_program("sh").unwrap_or_else(|| "/bin/sh".into());
    let search = lookup::trusted_path_value(&std::env::var_os("PATH").unwrap_or_default(), &[]);
    #[allow(clippy::disallowed_methods)]
    let mut command = std::process::Command::new(sh);
    if !search.is_empty() {
        command.env("PATH", search);
    }
    let status = command
        .current_dir(dir.path())
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&path)
        .status()
        .with_context(|| format!("cannot start the editor `{editor}`"))?;
    // The file Keel wrote into its fresh private directory, back from the user's editor.
    #[allow(clippy::disallowed_methods)]
    let edited = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok((status, edited))
}

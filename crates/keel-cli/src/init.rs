//! `keel init`: prepares a workspace — `.keel/config.toml` (commented, written once) and
//! `.keel/project.md`, the detected tech stack (languages, package managers, test command),
//! which the project prompt layer reads. Running it again changes nothing unless the project
//! changed; an empty directory is a new project.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use keel_tools::beneath::{DirHandle, ResolvedPath};
use keel_tools::fs::WriteMode;
use keel_tools::shell::detect_test_command;
use serde::Serialize;

use crate::args::CommonArgs;
use crate::{exit, setup};

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Print what was detected and written as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `keel init` found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stack {
    /// Languages by number of source files, most first.
    pub languages: Vec<String>,
    pub package_managers: Vec<String>,
    pub test_command: Option<String>,
    pub git: bool,
    /// No source files yet: the PRD decides the stack.
    pub new_project: bool,
}

const EXTENSIONS: &[(&str, &str)] = &[
    ("rs", "Rust"),
    ("py", "Python"),
    ("js", "JavaScript"),
    ("mjs", "JavaScript"),
    ("ts", "TypeScript"),
    ("tsx", "TypeScript"),
    ("go", "Go"),
    ("java", "Java"),
    ("kt", "Kotlin"),
    ("rb", "Ruby"),
    ("c", "C"),
    ("h", "C"),
    ("cpp", "C++"),
    ("cs", "C#"),
    ("php", "PHP"),
    ("swift", "Swift"),
    ("sh", "Shell"),
];

/// (marker file, package manager).
const MANAGERS: &[(&str, &str)] = &[
    ("Cargo.toml", "cargo"),
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("package-lock.json", "npm"),
    ("poetry.lock", "poetry"),
    ("uv.lock", "uv"),
    ("requirements.txt", "pip"),
    ("Pipfile", "pipenv"),
    ("go.mod", "go modules"),
    ("Gemfile", "bundler"),
    ("pom.xml", "maven"),
    ("build.gradle", "gradle"),
    ("composer.json", "composer"),
];

const SKIP: &[&str] = &[
    ".git",
    ".keel",
    "target",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    "dist",
    "build",
];

/// Detects the stack of the project at `root`.
pub fn detect(root: &Path, configured_tests: Option<&str>) -> Stack {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut stack = vec![(root.to_path_buf(), 0)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > 20_000 {
                break;
            }
            let path = entry.path();
            if path.is_dir() {
                if depth < 8 && !SKIP.iter().any(|s| entry.file_name() == *s) {
                    stack.push((path, depth + 1));
                }
            } else if let Some(ext) = path.extension().and_then(|e| e.to_str())
                && let Some((_, lang)) = EXTENSIONS.iter().find(|(e, _)| *e == ext)
            {
                *counts.entry(lang).or_default() += 1;
            }
        }
    }
    let mut languages: Vec<(&str, usize)> = counts.into_iter().collect();
    languages.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut managers: Vec<String> = Vec::new();
    for (marker, manager) in MANAGERS {
        if root.join(marker).is_file() && !managers.iter().any(|m| m == manager) {
            managers.push((*manager).to_string());
        }
    }
    if root.join("package.json").is_file()
        && !managers
            .iter()
            .any(|m| ["npm", "yarn", "pnpm"].contains(&m.as_str()))
    {
        managers.push("npm".into());
    }
    if root.join("pyproject.toml").is_file()
        && !managers
            .iter()
            .any(|m| ["poetry", "uv", "pip", "pipenv"].contains(&m.as_str()))
    {
        managers.push("pip".into());
    }
    Stack {
        new_project: languages.is_empty(),
        languages: languages.into_iter().map(|(l, _)| l.to_string()).collect(),
        package_managers: managers,
        test_command: detect_test_command(root, configured_tests).map(|t| t.command),
        git: root.join(".git").exists(),
    }
}

/// `.keel/project.md`: the stack as the project prompt layer shows it to the model.
pub fn project_md(stack: &Stack) -> String {
    let list = |v: &[String]| {
        if v.is_empty() {
            "none detected".to_string()
        } else {
            v.join(", ")
        }
    };
    let mut out = String::from(
        "<!-- Written by `keel init` (run it again to refresh). Read into the agent's project prompt layer. -->\n# Tech stack\n",
    );
    if stack.new_project {
        out.push_str(
            "This is a new project: there is no source code yet. Choose the language and layout the PRD and tasks ask for, keep it minimal, and add a test for every feature.\n",
        );
    }
    out.push_str(&format!("- Languages: {}\n", list(&stack.languages)));
    out.push_str(&format!(
        "- Package managers: {}\n",
        list(&stack.package_managers)
    ));
    out.push_str(&format!(
        "- Test command: {}\n",
        stack
            .test_command
            .as_deref()
            .map(|c| format!("`{c}`"))
            .unwrap_or_else(|| "none yet (set `[shell] test_command` in .keel/config.toml)".into())
    ));
    out.push_str(&format!(
        "- Version control: {}\n",
        if stack.git { "git" } else { "none" }
    ));
    out
}

/// The commented `.keel/config.toml` a new workspace gets.
pub fn config_toml(stack: &Stack) -> String {
    let tests = match &stack.test_command {
        Some(c) => format!("test_command = {}\n", toml::Value::String(c.clone())),
        None => "# test_command = \"pytest -q\"\n".to_string(),
    };
    format!(
        "# Keel project configuration (docs/CONFIG.md lists every key and its default).
# Layers, lowest first: defaults, ~/.config/keel/config.toml, this file, KEEL_* variables, flags.
# A project file may set only some keys (docs/CONFIG.md); the model settings ([llm]) are yours:
# set them in ~/.config/keel/config.toml (here they are only a suggestion, see `keel trust`).

[agent]
# mode = \"react\"                 # or \"plan_exec\" (planning → building → verification → delivery)
# max_iterations = 50

[shell]
# The project's test command: run by run_tests, final verification and each task's proof.
{tests}
[verify]
# enabled = true                  # run the gates (tests, checks) when the agent says it is done
"
    )
}

/// `.keel/.gitignore`: what Keel writes into `.keel/` for itself.
const KEEL_GITIGNORE: &str = "\
# Keel's own data (rebuilt or local to this machine). config.toml, project.md, rules/,
# skills/, flows/*.yaml and constitution.json are the project's: commit them.
index.db*
snapshots/
flows/runs/
";

/// What [`initialise`] found and wrote.
#[derive(Debug, Clone)]
pub struct Initialised {
    pub stack: Stack,
    /// Workspace-relative files written (none when nothing changed).
    pub written: Vec<&'static str>,
    /// The `.keel/project.md` text.
    pub project_md: String,
}

/// Prepares `root`: `.keel/config.toml` written once, `.keel/project.md` (the detected
/// stack) written when it changed, `.keel/.gitignore` written once. `keel init` and chat's
/// `/init`.
pub fn initialise(root: &Path) -> anyhow::Result<Initialised> {
    // The repository may ship `.keel/` or its files as symlinks out (to `~/.bashrc`) or as
    // FIFOs: every file is resolved beneath the open workspace and written in place there.
    let ws = DirHandle::open(root).with_context(|| format!("cannot open {}", root.display()))?;
    let config_path = locate(&ws, ".keel/config.toml")?;
    let config_exists = exists(&config_path)?;
    let configured = if config_exists {
        let config = setup::load_config(root, keel_config::Layer::from_overrides(&[]))?;
        config.shell.test_command
    } else {
        None
    };
    let stack = detect(root, configured.as_deref());
    let mut written = Vec::new();
    if !config_exists {
        write(&config_path, &config_toml(&stack), WriteMode::CreateNew)?;
        written.push(".keel/config.toml");
    }
    let md = project_md(&stack);
    let project = keel_tools::project::ProjectDir::of(&ws);
    let current = project
        .read(".keel/project.md", keel_tools::project::INSTRUCTIONS_LIMIT)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if current.as_deref() != Some(md.as_str()) {
        let md_path = locate(&ws, ".keel/project.md")?;
        write(&md_path, &md, WriteMode::Replace)?;
        written.push(".keel/project.md");
    }
    // Keel's own data in .keel/ (the index, snapshots, flow run files) is not the project's:
    // out of `git status`, while config.toml, project.md, rules, skills, flows and the
    // constitution stay committable. Written once; the user's edits stay.
    let ignore_path = locate(&ws, ".keel/.gitignore")?;
    if !exists(&ignore_path)? {
        write(&ignore_path, KEEL_GITIGNORE, WriteMode::CreateNew)?;
        written.push(".keel/.gitignore");
    }
    Ok(Initialised {
        stack,
        written,
        project_md: md,
    })
}

/// `rel` beneath the workspace, literally: any symlink on the way is an error naming the file
/// (a shipped `.keel/project.md -> ../.husky/pre-commit` would have had the hook overwritten:
/// red-team pass 6, R6-11).
fn locate(ws: &DirHandle, rel: &str) -> anyhow::Result<ResolvedPath> {
    ws.resolve_literal(Path::new(rel)).map_err(|e| {
        anyhow::anyhow!(
            "cannot write `{rel}` in {}: {e}; remove or replace it and run `keel init` again",
            ws.path().display()
        )
    })
}

/// Whether something is at `target`; only a regular file counts as there (anything else,
/// a FIFO or a directory, is an error naming it).
fn exists(target: &ResolvedPath) -> anyhow::Result<bool> {
    let rel = target.rel_string();
    match target.info() {
        Ok(None) => Ok(false),
        Ok(Some(info)) if info.kind == keel_tools::fs::FileKind::File => Ok(true),
        Ok(Some(info)) => anyhow::bail!(
            "`{rel}` is {}, not a regular file; remove it and run `keel init` again",
            info.kind.describe()
        ),
        Err(e) => anyhow::bail!("cannot inspect `{rel}`: {e}"),
    }
}

/// What was written and the detected stack, for a person.
pub fn report(root: &Path, done: &Initialised) -> String {
    let mut out = if done.written.is_empty() {
        format!(
            "{} is already initialised; nothing changed.\n",
            root.display()
        )
    } else {
        format!(
            "Initialised {}: wrote {}.\n",
            root.display(),
            done.written.join(", ")
        )
    };
    out.push_str(
        &done
            .project_md
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n"),
    );
    out
}

pub fn execute(args: InitArgs) -> anyhow::Result<u8> {
    let root = setup::workspace_dir(args.common.workspace.as_deref())?;
    let done = initialise(&root)?;
    let mut out = crate::out::stdout();
    if args.json {
        let report =
            serde_json::json!({"workspace": root, "stack": done.stack, "written": done.written});
        writeln!(out, "{}", crate::out::json_pretty(&report)?)?;
        return Ok(exit::COMPLETED);
    }
    write!(out, "{}", report(&root, &done))?;
    writeln!(
        out,
        "\nNext: keel prd add prd.md && keel task generate && keel work batch"
    )?;
    Ok(exit::COMPLETED)
}

fn write(target: &ResolvedPath, text: &str, mode: WriteMode) -> anyhow::Result<()> {
    if mode == WriteMode::Replace {
        exists(target)?;
    }
    target
        .write_atomic(text.as_bytes(), mode, None)
        .with_context(|| format!("cannot write {}", target.abs().display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_languages_managers_and_tests() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let empty = detect(dir.path(), None);
        assert!(empty.new_project && empty.test_command.is_none());
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"x\"\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join("src")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("tool.py"), "print(1)\n").unwrap_or_else(|e| panic!("{e}"));
        let s = detect(dir.path(), None);
        assert_eq!(s.languages, ["Python", "Rust"]);
        assert_eq!(s.package_managers, ["cargo"]);
        assert!(s.test_command.unwrap_or_default().starts_with("cargo test"));
        let cfg = config_toml(&detect(dir.path(), Some("make check")));
        assert!(cfg.contains("test_command = \"make check\""));
        assert!(toml::from_str::<toml::Value>(&cfg).is_ok());
    }

    /// A repository that ships `.keel/project.md` (or `.keel/` itself) as a symlink out, or
    /// `.keel/config.toml` as a FIFO: `keel init` writes nothing outside and does not hang.
    #[test]
    fn hostile_keel_files_are_refused_and_nothing_outside_changes() {
        use std::os::unix::fs::symlink;
        let base = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (ws, outside) = (base.path().join("ws"), base.path().join("outside"));
        std::fs::create_dir_all(ws.join(".keel")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(&outside).unwrap_or_else(|e| panic!("{e}"));
        let bashrc = outside.join(".bashrc");
        std::fs::write(&bashrc, "alias ls=ls\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join(".keel/config.toml"), "").unwrap_or_else(|e| panic!("{e}"));
        symlink(&bashrc, ws.join(".keel/project.md")).unwrap_or_else(|e| panic!("{e}"));
        let err = initialise(&ws).map(|_| ()).unwrap_err().to_string();
        assert!(
            err.contains("project.md") && err.contains("outside"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(&bashrc).unwrap_or_default(),
            "alias ls=ls\n"
        );

        // `.keel` itself a link out: nothing is created there.
        std::fs::remove_dir_all(ws.join(".keel")).unwrap_or_else(|e| panic!("{e}"));
        symlink(&outside, ws.join(".keel")).unwrap_or_else(|e| panic!("{e}"));
        let err = initialise(&ws).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("outside"), "{err}");
        assert!(!outside.join("config.toml").exists() && !outside.join("project.md").exists());

        // A FIFO as the config: an error naming it, at once.
        std::fs::remove_file(ws.join(".keel")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(ws.join(".keel")).unwrap_or_else(|e| panic!("{e}"));
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            ws.join(".keel/config.toml"),
            rustix::fs::Mode::from_raw_mode(0o644),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let err = initialise(&ws).map(|_| ()).unwrap_err().to_string();
        assert!(err.contains("FIFO"), "{err}");

        // A link inside the workspace is not followed either (red-team pass 6, R6-11: a
        // shipped `.keel/project.md -> ../.husky/pre-commit` had the hook overwritten).
        std::fs::remove_file(ws.join(".keel/config.toml")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("notes.md"), "old\n").unwrap_or_else(|e| panic!("{e}"));
        symlink("../notes.md", ws.join(".keel/project.md")).unwrap_or_else(|e| panic!("{e}"));
        let err = initialise(&ws).map(|_| ()).unwrap_err().to_string();
        assert!(
            err.contains("project.md") && err.contains("symlink"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("notes.md")).unwrap_or_default(),
            "old\n"
        );

        // A clean workspace still initialises.
        std::fs::remove_file(ws.join(".keel/project.md")).unwrap_or_else(|e| panic!("{e}"));
        let _ = std::fs::remove_file(ws.join(".keel/config.toml"));
        let done = initialise(&ws).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            done.written,
            [".keel/config.toml", ".keel/project.md", ".keel/.gitignore"]
        );
        assert_eq!(
            std::fs::read_to_string(ws.join(".keel/project.md")).unwrap_or_default(),
            done.project_md
        );
    }
}

//! `keel init`: prepares a workspace — `.keel/config.toml` (commented, written once) and
//! `.keel/project.md`, the detected tech stack (languages, package managers, test command),
//! which the project prompt layer reads. Running it again changes nothing unless the project
//! changed; an empty directory is a new project.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use keel_tools::shell::detect_test_command;
use serde::Serialize;

use crate::{CommonArgs, exit, setup};

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
    let dir = root.join(".keel");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let config_path = dir.join("config.toml");
    let configured = if config_path.is_file() {
        let config = setup::load_config(root, keel_engine::config::Layer::from_overrides(&[]))?;
        config.shell.test_command
    } else {
        None
    };
    let stack = detect(root, configured.as_deref());
    let mut written = Vec::new();
    if !config_path.exists() {
        write(&config_path, &config_toml(&stack))?;
        written.push(".keel/config.toml");
    }
    let md = project_md(&stack);
    let md_path = dir.join("project.md");
    if std::fs::read_to_string(&md_path).ok().as_deref() != Some(md.as_str()) {
        write(&md_path, &md)?;
        written.push(".keel/project.md");
    }
    // Keel's own data in .keel/ (the index, snapshots, flow run files) is not the project's:
    // out of `git status`, while config.toml, project.md, rules, skills, flows and the
    // constitution stay committable. Written once; the user's edits stay.
    let ignore_path = dir.join(".gitignore");
    if !ignore_path.exists() {
        write(&ignore_path, KEEL_GITIGNORE)?;
        written.push(".keel/.gitignore");
    }
    Ok(Initialised {
        stack,
        written,
        project_md: md,
    })
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
    let mut out = std::io::stdout().lock();
    if args.json {
        let report =
            serde_json::json!({"workspace": root, "stack": done.stack, "written": done.written});
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(exit::COMPLETED);
    }
    write!(out, "{}", report(&root, &done))?;
    writeln!(
        out,
        "\nNext: keel prd add prd.md && keel task generate && keel work batch"
    )?;
    Ok(exit::COMPLETED)
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
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
}

//! Saying so when a command failed because a program is not installed, and what to install.

/// What to install for common programs (Debian/Ubuntu package names where there is one).
const INSTALL: &[(&[&str], &str)] = &[
    (
        &["node", "npm", "npx"],
        "Node.js (Debian/Ubuntu: `apt-get install nodejs npm`)",
    ),
    (
        &["yarn", "pnpm"],
        "it with Node.js's corepack (`corepack enable`) or `npm install -g`",
    ),
    (
        &["tsc"],
        "TypeScript in the project (`npm install --save-dev typescript`)",
    ),
    (
        &["python", "python3"],
        "Python 3 (Debian/Ubuntu: `apt-get install python3`)",
    ),
    (
        &["pip", "pip3"],
        "pip (Debian/Ubuntu: `apt-get install python3-pip`)",
    ),
    (
        &["pytest"],
        "pytest (`pip install pytest`, or Debian/Ubuntu: `apt-get install python3-pytest`)",
    ),
    (
        &["ruff", "black", "mypy"],
        "it with pip (`pip install <name>`)",
    ),
    (
        &["go", "gofmt"],
        "Go (Debian/Ubuntu: `apt-get install golang-go`)",
    ),
    (
        &["cargo", "rustc", "rustup"],
        "Rust with rustup (https://rustup.rs)",
    ),
    (
        &["java", "javac"],
        "a JDK (Debian/Ubuntu: `apt-get install default-jdk`)",
    ),
    (&["mvn"], "Maven (Debian/Ubuntu: `apt-get install maven`)"),
    (
        &["gradle"],
        "Gradle (Debian/Ubuntu: `apt-get install gradle`)",
    ),
    (
        &["ruby", "gem", "bundle", "rake"],
        "Ruby (Debian/Ubuntu: `apt-get install ruby ruby-bundler`)",
    ),
    (
        &["make", "gcc", "cc", "g++", "c++"],
        "build tools (Debian/Ubuntu: `apt-get install build-essential`)",
    ),
    (
        &["rg"],
        "ripgrep (Debian/Ubuntu: `apt-get install ripgrep`)",
    ),
    (&["git"], "git (Debian/Ubuntu: `apt-get install git`)"),
    (&["jq"], "jq (Debian/Ubuntu: `apt-get install jq`)"),
];

/// The program a shell said it could not find (`bash: line 1: node: command not found`,
/// `sh: 1: go: not found`), or a Python module that is missing (`No module named pytest`).
fn missing_program(stderr: &str) -> Option<String> {
    for line in stderr.lines() {
        let line = line.trim();
        for suffix in [": command not found", ": not found"] {
            if let Some(rest) = line.strip_suffix(suffix) {
                let name = rest.rsplit(": ").next().unwrap_or(rest).trim();
                if !name.is_empty() && !name.contains(' ') {
                    return Some(name.to_string());
                }
            }
        }
        // Only tools: a project's own module missing is a bug to fix, not a package.
        if let Some(rest) = line.split("No module named ").nth(1) {
            let name = rest.trim().trim_matches(['\'', '"']);
            let name = name.split('.').next().unwrap_or(name);
            if INSTALL.iter().any(|(names, _)| names.contains(&name)) {
                return Some(name.to_string());
            }
        }
    }
    None
}

/// A note for the model when `stderr` shows a program (or Python module) is not installed:
/// which one, and what to install. `None` when nothing is missing.
pub fn missing_program_hint(exit_code: Option<i32>, stderr: &str) -> Option<String> {
    let name = missing_program(stderr)?;
    // The shell's own "not found" ends with 127; a Python import error with 1.
    if !matches!(exit_code, Some(127) | Some(1) | Some(2)) {
        return None;
    }
    let base = name.rsplit('/').next().unwrap_or(&name);
    let what = INSTALL
        .iter()
        .find(|(names, _)| names.contains(&base))
        .map(|(_, how)| format!("install {how}"))
        .unwrap_or_else(|| format!("install `{base}`"));
    Some(format!(
        "note: `{base}` is not installed here (or not on PATH), so the command could not do its work. To use it, {what} — ask the user if you cannot; otherwise do the task without it."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_programs_are_named_with_what_to_install() {
        let h = missing_program_hint(Some(127), "bash: line 1: node: command not found\n")
            .unwrap_or_default();
        assert!(
            h.contains("`node` is not installed") && h.contains("nodejs"),
            "{h}"
        );
        let h = missing_program_hint(Some(127), "/bin/sh: 1: go: not found").unwrap_or_default();
        assert!(h.contains("golang-go"), "{h}");
        let h = missing_program_hint(Some(1), "/usr/bin/python3: No module named pytest")
            .unwrap_or_default();
        assert!(
            h.contains("`pytest`") && h.contains("pip install pytest"),
            "{h}"
        );
        let h = missing_program_hint(Some(127), "bash: frobnicate: command not found")
            .unwrap_or_default();
        assert!(h.contains("install `frobnicate`"), "{h}");
        assert_eq!(missing_program_hint(Some(0), "all good"), None);
        assert_eq!(
            missing_program_hint(Some(1), "test failed: value not found"),
            None
        );
        assert_eq!(
            missing_program_hint(Some(1), "ModuleNotFoundError: No module named 'app'"),
            None
        );
    }
}

//! Reading a Makefile far enough to know what `make TARGET` runs: the recipe lines of the
//! target and of its prerequisites, with the Makefile's own variables expanded, and every
//! `$(shell …)` it contains (make runs those while reading it).
//!
//! What cannot be known without running make becomes a shell expansion the command analysis
//! treats as unknown: a variable defined twice or inside a conditional (which definition
//! holds depends on the environment), functions (`$(wildcard …)`, `$(call …)`), and variables
//! from outside. A Makefile that includes another, redefines `SHELL` or changes the recipe
//! prefix is not read at all (the caller judges `make` unknown).

use std::collections::{BTreeMap, HashSet};

/// A shell word that stands for a value make computes at run time.
const UNKNOWN_VALUE: &str = "${KEEL_MAKE_VALUE}";

/// What `make TARGETS` runs, as shell command lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recipes {
    /// Recipe lines in the order make runs them (prerequisites first).
    pub lines: Vec<String>,
    /// `$(shell …)` commands found anywhere in the Makefile.
    pub shell_calls: Vec<String>,
    /// Targets asked for that have no rule (make fails, or builds a file by its built-in
    /// rules).
    pub missing: Vec<String>,
}

struct Rule {
    prerequisites: Vec<String>,
    recipe: Vec<String>,
}

struct Makefile {
    vars: BTreeMap<String, Option<String>>,
    rules: BTreeMap<String, Vec<Rule>>,
    first_target: Option<String>,
}

/// Why a Makefile cannot be read.
pub(crate) type Unreadable = String;

/// The recipes `make targets` runs for the Makefile `text` (no target: the default goal).
/// `overrides` are `VAR=value` words from the command line.
pub(crate) fn recipes(
    text: &str,
    targets: &[String],
    overrides: &[(String, String)],
) -> Result<Recipes, Unreadable> {
    let mut mk = parse(text)?;
    for (name, value) in overrides {
        mk.vars.insert(name.clone(), Some(value.clone()));
    }
    let goals: Vec<String> = if targets.is_empty() {
        match mk
            .vars
            .get(".DEFAULT_GOAL")
            .cloned()
            .flatten()
            .or_else(|| mk.first_target.clone())
        {
            Some(goal) => vec![goal],
            None => return Err("the Makefile has no target".into()),
        }
    } else {
        targets.to_vec()
    };
    let mut out = Recipes {
        lines: Vec::new(),
        shell_calls: shell_calls(text),
        missing: Vec::new(),
    };
    let mut seen = HashSet::new();
    for goal in &goals {
        collect(&mk, goal, &mut out, &mut seen, 0, true);
    }
    Ok(out)
}

fn collect(
    mk: &Makefile,
    target: &str,
    out: &mut Recipes,
    seen: &mut HashSet<String>,
    depth: usize,
    asked: bool,
) {
    if depth > 16 || !seen.insert(target.to_string()) {
        return;
    }
    let Some(rules) = mk.rules.get(target) else {
        if asked {
            out.missing.push(target.to_string());
        }
        return;
    };
    for rule in rules {
        for p in &rule.prerequisites {
            collect(mk, p, out, seen, depth + 1, false);
        }
    }
    for rule in rules {
        for line in &rule.recipe {
            let expanded = expand(mk, line, target, &rule.prerequisites, 0);
            out.lines.push(strip_recipe_prefix(&expanded).to_string());
        }
    }
}

/// `@`, `-` and `+` before a recipe line only change how make runs it.
fn strip_recipe_prefix(line: &str) -> &str {
    line.trim_start_matches(['@', '-', '+', ' ', '\t'])
}

fn parse(text: &str) -> Result<Makefile, Unreadable> {
    let mut mk = Makefile {
        vars: BTreeMap::new(),
        rules: BTreeMap::new(),
        first_target: None,
    };
    mk.vars.insert("MAKE".into(), Some("make".into()));
    let mut defined: HashSet<String> = HashSet::new();
    let mut conditional = 0usize;
    let mut current: Option<Vec<String>> = None;
    let lines = logical_lines(text);
    let mut in_define = false;
    for line in lines {
        if in_define {
            if line.trim_start().starts_with("endef") {
                in_define = false;
            }
            continue;
        }
        if let Some(recipe) = line.strip_prefix('\t') {
            if let Some(targets) = &current {
                for t in targets {
                    if let Some(rules) = mk.rules.get_mut(t)
                        && let Some(rule) = rules.last_mut()
                    {
                        rule.recipe.push(recipe.to_string());
                    }
                }
            }
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let first = trimmed.split_whitespace().next().unwrap_or("");
        match first {
            "include" | "-include" | "sinclude" => {
                return Err("it includes other makefiles".into());
            }
            "ifeq" | "ifneq" | "ifdef" | "ifndef" => {
                conditional += 1;
                current = None;
                continue;
            }
            "else" => {
                current = None;
                continue;
            }
            "endif" => {
                conditional = conditional.saturating_sub(1);
                current = None;
                continue;
            }
            "define" => {
                // A multi-line variable: its name's value is not followed.
                if let Some(name) = trimmed.split_whitespace().nth(1) {
                    mk.vars.insert(name.to_string(), None);
                }
                in_define = true;
                continue;
            }
            "vpath" | "unexport" | ".PHONY:" => continue,
            _ => {}
        }
        let body = trimmed
            .strip_prefix("export ")
            .or_else(|| trimmed.strip_prefix("override "))
            .unwrap_or(trimmed);
        if let Some((name, op, value)) = assignment(body) {
            if matches!(name.as_str(), "SHELL" | ".SHELLFLAGS" | ".RECIPEPREFIX") {
                return Err(format!("it sets `{name}`, which changes how recipes run"));
            }
            let value = value.trim().to_string();
            let known = conditional == 0 && op != "!=" && !defined.contains(&name);
            // `?=` keeps a value from the environment, which is Keel's own allowlisted one.
            let entry = match (op.as_str(), mk.vars.get(&name).cloned().flatten()) {
                ("+=", Some(old)) => Some(format!("{old} {value}")),
                ("+=", None) => None,
                ("?=", Some(old)) => Some(old),
                _ if known => Some(value),
                _ => None,
            };
            if op != "+=" {
                defined.insert(name.clone());
            }
            mk.vars
                .insert(name, if conditional > 0 { None } else { entry });
            current = None;
            continue;
        }
        if let Some((targets, prereqs)) = rule_head(body) {
            let targets: Vec<String> = targets.split_whitespace().map(str::to_string).collect();
            let (prereqs, inline) = match prereqs.split_once(';') {
                Some((p, r)) => (p, Some(r.trim().to_string())),
                None => (prereqs, None),
            };
            let prereqs: Vec<String> = prereqs
                .split_whitespace()
                .filter(|p| *p != "|")
                .map(str::to_string)
                .collect();
            for t in &targets {
                if mk.first_target.is_none() && !t.starts_with('.') && !t.contains('%') {
                    mk.first_target = Some(t.clone());
                }
                mk.rules.entry(t.clone()).or_default().push(Rule {
                    prerequisites: prereqs.clone(),
                    recipe: inline.clone().into_iter().collect(),
                });
            }
            current = Some(targets);
            continue;
        }
        current = None;
    }
    Ok(mk)
}

/// Joins backslash-continued lines (a recipe keeps its leading tab).
fn logical_lines(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut pending = String::new();
    for raw in text.lines() {
        if let Some(head) = raw.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(raw);
        out.push(std::mem::take(&mut pending));
    }
    if !pending.is_empty() {
        out.push(pending);
    }
    out
}

/// `NAME = value`, `:=`, `::=`, `?=`, `+=`, `!=` (no `:` of a rule before the operator).
fn assignment(line: &str) -> Option<(String, String, String)> {
    for op in ["::=", ":=", "?=", "+=", "!=", "="] {
        if let Some((name, value)) = line.split_once(op) {
            let name = name.trim();
            if !name.is_empty()
                && !name.contains(':')
                && !name.contains(char::is_whitespace)
                && !name.contains('$')
            {
                return Some((name.to_string(), op.to_string(), value.to_string()));
            }
        }
    }
    None
}

/// `targets: prerequisites` (also `::`), not an assignment.
fn rule_head(line: &str) -> Option<(&str, &str)> {
    let (targets, rest) = line.split_once(':')?;
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    if rest.starts_with('=') || targets.trim().is_empty() {
        return None;
    }
    Some((targets.trim(), rest))
}

/// Expands make references in a recipe line: `$$` → `$`, `$(VAR)`/`${VAR}`/`$V` with known
/// values, `$@`, `$<`, `$^`; anything else becomes [`UNKNOWN_VALUE`].
fn expand(mk: &Makefile, line: &str, target: &str, prereqs: &[String], depth: usize) -> String {
    if depth > 8 {
        return UNKNOWN_VALUE.into();
    }
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '$' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let Some(&next) = chars.get(i + 1) else {
            out.push('$');
            break;
        };
        match next {
            '$' => {
                out.push('$');
                i += 2;
            }
            '(' | '{' => {
                let close = if next == '(' { ')' } else { '}' };
                let mut level = 1;
                let mut j = i + 2;
                while j < chars.len() && level > 0 {
                    if chars[j] == next {
                        level += 1;
                    } else if chars[j] == close {
                        level -= 1;
                    }
                    j += 1;
                }
                let inner: String = chars[i + 2..j.saturating_sub(1).max(i + 2)]
                    .iter()
                    .collect();
                out.push_str(&reference(mk, inner.trim(), target, prereqs, depth));
                i = j;
            }
            c => {
                out.push_str(&reference(mk, &c.to_string(), target, prereqs, depth));
                i += 2;
            }
        }
    }
    out
}

fn reference(mk: &Makefile, name: &str, target: &str, prereqs: &[String], depth: usize) -> String {
    match name {
        "@" => return target.to_string(),
        "<" => return prereqs.first().cloned().unwrap_or_default(),
        "^" | "+" => return prereqs.join(" "),
        _ => {}
    }
    match mk.vars.get(name) {
        Some(Some(value)) => expand(mk, value, target, prereqs, depth + 1),
        _ => UNKNOWN_VALUE.into(),
    }
}

/// The commands of every `$(shell …)` and `${shell …}` in the text.
fn shell_calls(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for open in ["$(shell ", "${shell "] {
        let close = if open.starts_with("$(") { ')' } else { '}' };
        let opener = if close == ')' { '(' } else { '{' };
        let mut rest = text;
        while let Some(at) = rest.find(open) {
            let body = &rest[at + open.len()..];
            let mut level = 1;
            let mut end = body.len();
            for (k, c) in body.char_indices() {
                if c == opener {
                    level += 1;
                } else if c == close {
                    level -= 1;
                    if level == 0 {
                        end = k;
                        break;
                    }
                }
            }
            out.push(body[..end].replace("$$", "$"));
            rest = &body[end..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, targets: &[&str]) -> Result<Recipes, Unreadable> {
        let t: Vec<String> = targets.iter().map(|s| s.to_string()).collect();
        recipes(text, &t, &[])
    }

    #[test]
    fn recipes_of_a_target_and_its_prerequisites() {
        let mk = "CC = gcc\nRM := rm -rf\n\nall: build\n\nbuild: main.c\n\t@$(CC) -o app main.c\n\ntest: build\n\t-./app --self-test\n\t$(RM) $@.tmp\n\nclean:\n\t$(RM) build\n";
        let r = run(mk, &["test"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.lines,
            ["gcc -o app main.c", "./app --self-test", "rm -rf test.tmp"]
        );
        let r = run(mk, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.lines, ["gcc -o app main.c"], "the default goal is `all`");
        let r = run(mk, &["nope"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.missing, ["nope"]);
    }

    #[test]
    fn what_depends_on_the_environment_stays_unknown() {
        let mk = "ifeq ($(OS),x)\nRM = rm -rf /\nelse\nRM = echo\nendif\ntest:\n\t$(RM) src\n\techo $(wildcard *.c) $(HOME)\n";
        let r = run(mk, &["test"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.lines[0], format!("{UNKNOWN_VALUE} src"));
        assert!(r.lines[1].contains(UNKNOWN_VALUE));
        let r = run("X := $(shell touch pwned)\ntest:\n\ttrue\n", &["test"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.shell_calls, ["touch pwned"]);
        assert!(run("include other.mk\ntest:\n\ttrue\n", &["test"]).is_err());
        assert!(run("SHELL = ./evil\ntest:\n\ttrue\n", &["test"]).is_err());
        let r = run("test: ; rm -rf src\n", &["test"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.lines, ["rm -rf src"], "an inline recipe");
        let r =
            run("test:\n\techo a \\\n\t  && rm x\n", &["test"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.lines.len(), 1);
        assert!(r.lines[0].contains("rm x"));
    }
}

//! Reading a Makefile far enough to know what `make TARGET` runs: the recipe lines of the
//! target and of its prerequisites, with the Makefile's own variables expanded, and every
//! `$(shell …)` it contains (make runs those while reading it).
//!
//! Every makefile make reads is read here too, through the caller's reader (which records
//! each file, and each one looked for and not found, in the judgement's fingerprint): the
//! makefiles given (`-f`, or the first of `GNUmakefile`, `makefile`, `Makefile`) and each one
//! they `include`, `-include` or `sinclude`, in place, as make reads them (red-team pass 6,
//! R6-14: `-include local.mk` created after the approval).
//!
//! What cannot be known without running make becomes a shell expansion the command analysis
//! treats as unknown: a variable defined twice or inside a conditional (which definition
//! holds depends on the environment), functions (`$(wildcard …)`, `$(call …)`), variables
//! from outside, and a variable a target sets for its own recipe (`test: RM = rm -rf`). What
//! makes the set of files or rules itself unknowable is an error (the caller judges `make`
//! unknown): an include named at run time (a variable, a glob), a missing `include` (make
//! tries to build it), a rule that remakes a makefile it reads (make runs it, then reads the
//! result), `load`, `$(eval …)`, `$(file …)`, `$(guile …)`, and settings that change how
//! recipes run or which files are read (`SHELL`, `.SHELLFLAGS`, `.RECIPEPREFIX`,
//! `.EXTRA_PREREQS`, a `MAKEFLAGS` beyond quiet/parallel options).

use std::collections::{BTreeMap, HashSet};

/// A shell word that stands for a value make computes at run time.
const UNKNOWN_VALUE: &str = "${KEEL_MAKE_VALUE}";

/// The target a rule is filed under when make computes its targets and Keel cannot (`$(T):`):
/// its recipe may be any target's, so it is judged with every goal.
const ANY_TARGET: &str = "\u{0}any";

/// How deep includes may nest.
const MAX_INCLUDE_DEPTH: usize = 8;

/// Functions make runs while it reads a makefile that define rules, read or write files, or
/// run code: what they do is not in the text.
const READ_TIME_FUNCTIONS: &[&str] = &["eval", "file", "guile"];

/// `MAKEFLAGS` words that change neither which files are read nor how recipes run.
const QUIET_FLAGS: &[&str] = &[
    "-s",
    "--silent",
    "--quiet",
    "-r",
    "--no-builtin-rules",
    "-R",
    "--no-builtin-variables",
    "--no-print-directory",
    "-w",
    "--print-directory",
    "-k",
    "--keep-going",
    "--warn-undefined-variables",
];

/// What `make TARGETS` runs, as shell command lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recipes {
    /// Recipe lines in the order make runs them (prerequisites first).
    pub lines: Vec<String>,
    /// `$(shell …)` commands found anywhere in the makefiles read.
    pub shell_calls: Vec<String>,
    /// Targets asked for that have no rule (make fails, or builds a file by its built-in
    /// rules).
    pub missing: Vec<String>,
    /// Every target the makefiles name by itself (no pattern, no special target): the files
    /// make builds, and reuses while they look newer than what they are made from.
    pub targets: Vec<String>,
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

/// Reads a makefile by name (relative to where make runs): `Ok(None)` when it is not there.
pub(crate) type Reader<'r> = dyn FnMut(&str) -> Result<Option<String>, String> + 'r;

/// The recipes `make targets` runs with the makefiles `files` (read in order through `read`;
/// the first that exists when `files` are make's defaults, all of them otherwise). No target:
/// the default goal. `overrides` are `VAR=value` words from the command line.
pub(crate) fn recipes(
    files: &[String],
    defaults: bool,
    targets: &[String],
    overrides: &[(String, String)],
    read: &mut Reader<'_>,
) -> Result<Recipes, Unreadable> {
    let mut p = Parser {
        mk: Makefile {
            vars: BTreeMap::new(),
            rules: BTreeMap::new(),
            first_target: None,
        },
        defined: HashSet::new(),
        conditional: 0,
        read,
        read_files: Vec::new(),
        shell_calls: Vec::new(),
        fixed: HashSet::new(),
    };
    p.mk.vars.insert("MAKE".into(), Some("make".into()));
    // Command-line variables hold before any makefile is read, and win over its assignments
    // (red-team pass 8, R8-7: `make test SHELL=tools/sh.sh`).
    for (name, value) in overrides {
        settable(name)?;
        if matches!(name.as_str(), "MAKEFLAGS" | "GNUMAKEFLAGS" | "MAKEFILES") {
            return Err(format!(
                "`{name}` set on the command line changes what make reads or runs"
            ));
        }
        p.mk.vars.insert(name.clone(), Some(value.clone()));
        p.fixed.insert(name.clone());
    }
    let mut found = false;
    for f in files {
        match (p.read)(f)? {
            Some(text) => {
                p.read_files.push(f.clone());
                p.parse(&text, 0)?;
                found = true;
                if defaults {
                    break;
                }
            }
            None if defaults => {}
            None => return Err(format!("`{f}` does not exist")),
        }
    }
    if !found {
        return Err("make finds no makefile here".into());
    }
    // make first brings every makefile it read up to date, runs what remade one and reads
    // them all again: the result is not in any file judged here.
    for f in &p.read_files {
        if let Some(rule) = p.mk.rule_for(f) {
            return Err(format!(
                "it has a rule that remakes `{f}` (`{}`), which make runs before reading the result",
                rule.0
            ));
        }
    }
    let mk = p.mk;
    let shell_calls = p.shell_calls;
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
        shell_calls,
        missing: Vec::new(),
        targets: mk
            .rules
            .keys()
            .filter(|t| *t != ANY_TARGET && !t.contains('%') && !t.starts_with('.'))
            .cloned()
            .collect(),
    };
    let mut seen = HashSet::new();
    for goal in &goals {
        collect(&mk, goal, &mut out, &mut seen, 0, true);
    }
    if mk.rules.contains_key(ANY_TARGET) {
        collect(&mk, ANY_TARGET, &mut out, &mut seen, 0, false);
    }
    Ok(out)
}

impl Makefile {
    /// The rule that builds `name`: its own, else the first pattern rule matching it
    /// (`%.o:`, a match-anything `%:`) or old-fashioned suffix rule (`.c.o:`), with the
    /// target as written.
    fn rule_for(&self, name: &str) -> Option<(&str, &Vec<Rule>)> {
        if let Some((t, r)) = self.rules.get_key_value(name) {
            return Some((t, r));
        }
        self.rules
            .iter()
            .find(|(t, _)| pattern_matches(t, name) || suffix_rule_matches(t, name))
            .map(|(t, r)| (t.as_str(), r))
    }
}

/// Whether the pattern target `pattern` (`pre%suf`) matches `name`.
fn pattern_matches(pattern: &str, name: &str) -> bool {
    let Some((pre, suf)) = pattern.split_once('%') else {
        return false;
    };
    name.len() >= pre.len() + suf.len() && name.starts_with(pre) && name.ends_with(suf)
}

/// Whether the double-suffix rule `.a.b` builds `name` (`x.b`).
fn suffix_rule_matches(rule: &str, name: &str) -> bool {
    let Some(rest) = rule.strip_prefix('.') else {
        return false;
    };
    match rest.split_once('.') {
        Some((from, to)) if !from.is_empty() && !to.is_empty() && !to.contains(['.', '/']) => {
            name.len() > to.len() + 1 && name.ends_with(&format!(".{to}"))
        }
        _ => false,
    }
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
    // A prerequisite with no rule of its own is built by a pattern rule that matches it, or
    // by `.DEFAULT`'s recipe.
    let rule = mk.rule_for(target).or_else(|| {
        (!asked)
            .then(|| mk.rules.get_key_value(".DEFAULT"))
            .flatten()
            .map(|(t, r)| (t.as_str(), r))
    });
    let Some((_, rules)) = rule else {
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

/// Reads makefiles into one [`Makefile`], includes in place.
struct Parser<'p, 'r> {
    mk: Makefile,
    /// Variables assigned once already (a second definition's value depends on order).
    defined: HashSet<String>,
    /// How many conditionals the line being read lies in (across includes).
    conditional: usize,
    read: &'p mut Reader<'r>,
    /// Every makefile make reads or tries to (included ones too, found or not).
    read_files: Vec<String>,
    shell_calls: Vec<String>,
    /// Variables set on the command line (`make test V=1`): a makefile's own assignment of
    /// one does not count (or, with `override`, does): its value is not known (R8-7).
    fixed: HashSet<String>,
}

impl Parser<'_, '_> {
    fn parse(&mut self, text: &str, depth: usize) -> Result<(), Unreadable> {
        for name in READ_TIME_FUNCTIONS {
            let called = ["$(", "${"].iter().any(|open| {
                [' ', '\t']
                    .iter()
                    .any(|sep| text.contains(&format!("{open}{name}{sep}")))
            });
            if called {
                return Err(format!(
                    "it calls `$({name} …)`, which make runs while reading it"
                ));
            }
        }
        self.shell_calls.extend(shell_calls(text));
        let mut current: Option<Vec<String>> = None;
        let mut in_define = false;
        for line in logical_lines(text) {
            if in_define {
                if line.trim_start().starts_with("endef") {
                    in_define = false;
                }
                continue;
            }
            // A tab starts a recipe line only after a rule; elsewhere make reads the line as
            // any other (`\tinclude evil.mk` after a variable is an include).
            if let (Some(recipe), Some(targets)) = (line.strip_prefix('\t'), &current) {
                for t in targets {
                    if let Some(rules) = self.mk.rules.get_mut(t)
                        && let Some(rule) = rules.last_mut()
                    {
                        rule.recipe.push(recipe.to_string());
                    }
                }
                continue;
            }
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            // `export`, `override`, `private` in any combination only change where a variable
            // is seen; what follows is judged the same.
            let mut body = trimmed;
            while let Some(rest) = ["export ", "override ", "private "]
                .iter()
                .find_map(|m| body.strip_prefix(m))
            {
                body = rest.trim_start();
            }
            let first = body.split_whitespace().next().unwrap_or("");
            match first {
                "include" | "-include" | "sinclude" => {
                    let rest = trimmed[first.len()..].trim();
                    self.include(rest, first == "include", depth)?;
                    current = None;
                    continue;
                }
                "load" | "-load" => {
                    return Err("it `load`s an object into make".into());
                }
                // A conditional inside a recipe keeps the rule's context: the recipe lines of
                // every branch are the rule's.
                "ifeq" | "ifneq" | "ifdef" | "ifndef" => {
                    self.conditional += 1;
                    continue;
                }
                "else" => continue,
                "endif" => {
                    self.conditional = self.conditional.saturating_sub(1);
                    continue;
                }
                "define" => {
                    // A multi-line variable: its name's value is not followed.
                    if let Some(name) = body.split_whitespace().nth(1) {
                        settable(name)?;
                        self.mk.vars.insert(name.to_string(), None);
                    }
                    in_define = true;
                    continue;
                }
                "vpath" | "unexport" | ".PHONY:" => continue,
                _ => {}
            }
            if let Some((name, op, value)) = assignment(body) {
                self.assign(name, &op, value.trim())?;
                current = None;
                continue;
            }
            if let Some((targets, prereqs)) = rule_head(body) {
                // `$(T): …`: targets make computes; unknown ones may be any target.
                let expanded = expand(&self.mk, targets, "", &[], 0);
                let any = expanded.contains(UNKNOWN_VALUE);
                let targets: Vec<String> = if any {
                    vec![ANY_TARGET.to_string()]
                } else {
                    expanded.split_whitespace().map(str::to_string).collect()
                };
                // `test: RM = rm -rf`: a variable for this target's recipe (and its
                // prerequisites'), which no global value stands for.
                let mut specific = prereqs.trim();
                while let Some(rest) = ["export ", "override ", "private "]
                    .iter()
                    .find_map(|m| specific.strip_prefix(m))
                {
                    specific = rest.trim_start();
                }
                if let Some((name, _, _)) = assignment(specific) {
                    settable(&name)?;
                    self.mk.vars.insert(name.clone(), None);
                    self.defined.insert(name);
                    current = None;
                    continue;
                }
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
                    if self.mk.first_target.is_none() && !t.starts_with('.') && !t.contains('%') {
                        self.mk.first_target = Some(t.clone());
                    }
                    self.mk.rules.entry(t.clone()).or_default().push(Rule {
                        prerequisites: prereqs.clone(),
                        recipe: inline.clone().into_iter().collect(),
                    });
                }
                current = Some(targets);
                continue;
            }
            // A line that is neither (`$(X)`, `$(foo …)`): make expands it and reads the result
            // as makefile text. Only messages are known to read as nothing.
            if body.starts_with('$')
                && !["$(info ", "$(warning ", "$(error "]
                    .iter()
                    .any(|m| body.starts_with(m))
            {
                return Err(format!(
                    "it has a line make expands into makefile text (`{}`)",
                    body.chars().take(60).collect::<String>()
                ));
            }
            current = None;
        }
        Ok(())
    }

    fn assign(&mut self, name: String, op: &str, value: &str) -> Result<(), Unreadable> {
        settable(&name)?;
        if self.fixed.contains(&name) {
            // The command line's value stands, unless an `override` (not told apart here).
            if op != "?=" {
                self.mk.vars.insert(name, None);
            }
            return Ok(());
        }
        if matches!(name.as_str(), "MAKEFLAGS" | "GNUMAKEFLAGS")
            && let Some(flag) = value.split_whitespace().find(|w| {
                !QUIET_FLAGS.contains(w) && !w.starts_with("-j") && !w.starts_with("--jobs")
            })
        {
            return Err(format!(
                "it sets `MAKEFLAGS` to `{flag}`, which may change which files make reads or what it runs"
            ));
        }
        let known = self.conditional == 0 && op != "!=" && !self.defined.contains(&name);
        // `?=` keeps a value from the environment, which is Keel's own allowlisted one.
        let entry = match (op, self.mk.vars.get(&name).cloned().flatten()) {
            ("+=", Some(old)) => Some(format!("{old} {value}")),
            ("+=", None) => None,
            ("?=", Some(old)) => Some(old),
            _ if known => Some(value.to_string()),
            _ => None,
        };
        if op != "+=" {
            self.defined.insert(name.clone());
        }
        let entry = if self.conditional > 0 { None } else { entry };
        self.mk.vars.insert(name, entry);
        Ok(())
    }

    /// `include NAMES` (`required`) or `-include`/`sinclude NAMES`: each read in place.
    fn include(&mut self, names: &str, required: bool, depth: usize) -> Result<(), Unreadable> {
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(format!("its includes nest deeper than {MAX_INCLUDE_DEPTH}"));
        }
        let expanded = expand(&self.mk, names, "", &[], 0);
        if expanded.contains(UNKNOWN_VALUE) || expanded.contains(['*', '?', '[']) {
            return Err(format!(
                "it includes `{names}`, a makefile named only when make runs"
            ));
        }
        for name in expanded.split_whitespace() {
            self.read_files.push(name.to_string());
            match (self.read)(name)? {
                Some(text) => self.parse(&text, depth + 1)?,
                None if required => {
                    return Err(format!(
                        "it includes `{name}`, which does not exist (make tries to build it)"
                    ));
                }
                // Looked for and recorded so: creating it ends an approval of this judgement.
                None => {}
            }
        }
        Ok(())
    }
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

/// Whether a makefile may set the variable `name` and still be judged: not one that changes
/// how recipes run or what make reads, and not a name make computes (`$(A)FLAGS` may be
/// `.SHELLFLAGS`: red-team pass 7, R7-12).
fn settable(name: &str) -> Result<(), Unreadable> {
    if name.contains('$') {
        return Err(format!(
            "it sets a variable named only when make runs (`{name}`)"
        ));
    }
    if matches!(
        name,
        "SHELL" | ".SHELLFLAGS" | ".RECIPEPREFIX" | ".EXTRA_PREREQS"
    ) {
        return Err(format!("it sets `{name}`, which changes how recipes run"));
    }
    Ok(())
}

/// `NAME = value`, `:=`, `::=`, `?=`, `+=`, `!=`: the first `=` or `:` outside a reference
/// decides (a `:` not followed by `=` makes a rule). The name may hold references (the
/// caller refuses those: [`settable`]).
fn assignment(line: &str) -> Option<(String, String, String)> {
    let bytes = line.as_bytes();
    let mut level = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'{' if i > 0 && bytes[i - 1] == b'$' => level += 1,
            b'(' | b'{' if level > 0 => level += 1,
            b')' | b'}' if level > 0 => level -= 1,
            b':' if level == 0 => {
                let op = if line[i..].starts_with("::=") {
                    "::="
                } else if line[i..].starts_with(":=") {
                    ":="
                } else {
                    return None;
                };
                return named(&line[..i], op, &line[i + op.len()..]);
            }
            b'=' if level == 0 => {
                let (at, op) = match i.checked_sub(1).map(|k| bytes[k]) {
                    Some(b'?') => (i - 1, "?="),
                    Some(b'+') => (i - 1, "+="),
                    Some(b'!') => (i - 1, "!="),
                    _ => (i, "="),
                };
                return named(&line[..at], op, &line[i + 1..]);
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn named(name: &str, op: &str, value: &str) -> Option<(String, String, String)> {
    let name = name.trim();
    (!name.is_empty() && !name.contains(char::is_whitespace))
        .then(|| (name.to_string(), op.to_string(), value.to_string()))
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
    // A substitution reference, `$(OBJS:.o=.d)` / `$(SRC:%.c=build/%.d)`: each word of the
    // variable's value with the suffix (or pattern) replaced (an include of generated
    // dependency files is the usual use).
    if let Some((var, subst)) = name.split_once(':')
        && let Some((from, to)) = subst.split_once('=')
        && !var.is_empty()
        && !var.contains(['$', '(', '{', ' '])
        && !subst.contains('$')
    {
        let value = reference(mk, var, target, prereqs, depth);
        if value.contains(UNKNOWN_VALUE) {
            return UNKNOWN_VALUE.into();
        }
        let (from, to) = if from.contains('%') {
            (from.to_string(), to.to_string())
        } else {
            (format!("%{from}"), format!("%{to}"))
        };
        return value
            .split_whitespace()
            .map(|w| substitute(w, &from, &to))
            .collect::<Vec<_>>()
            .join(" ");
    }
    match mk.vars.get(name) {
        Some(Some(value)) => expand(mk, value, target, prereqs, depth + 1),
        _ => UNKNOWN_VALUE.into(),
    }
}

/// `$(patsubst from,to,word)` for one word (`from`, `to` holding one `%` each, or none).
fn substitute(word: &str, from: &str, to: &str) -> String {
    let Some((pre, post)) = from.split_once('%') else {
        return if word == from {
            to.to_string()
        } else {
            word.to_string()
        };
    };
    match word
        .strip_prefix(pre)
        .and_then(|rest| rest.strip_suffix(post))
    {
        Some(stem) => to.replacen('%', stem, 1),
        None => word.to_string(),
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
        let mut read = |name: &str| -> Result<Option<String>, String> {
            Ok((name == "Makefile").then(|| text.to_string()))
        };
        recipes(&["Makefile".into()], true, &t, &[], &mut read)
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

    #[test]
    fn substitution_references_expand() {
        let mk = "OBJS := build/a.o build/b.o\nSRC := x.c\ntest:\n\techo $(OBJS:.o=.d) $(SRC:%.c=build/%.d) $(NOPE:.o=.d)\n";
        let r = run(mk, &["test"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.lines,
            [format!(
                "echo build/a.d build/b.d build/x.d {UNKNOWN_VALUE}"
            )]
        );
    }
}

//! The options of a command rule, compared by what they mean (red-team pass 8, R8-26): a rule
//! `rm -rf` names the option set {recursive, force}, so `rm -r -f`, `rm -fr`, `rm -Rf` and
//! `rm --recursive --force` (or GNU's unambiguous abbreviations, `rm --rec --for`) match it,
//! wherever the options stand among the operands. A rule's operands (`git push --force
//! origin`) must each be an operand of the command (or the value of a `--name=value`).
//!
//! A word not known before the line runs (`rm $FLAGS src`, xargs' input) may be any option:
//! when the known words do not satisfy the rule, such a word makes it a possible match.

use super::rules::RuleMatch;
use super::words::Word;

/// Options with another spelling: `(program, spelling, canonical)`; `*` for every program.
/// Short and long forms of the same option share the canonical form (the short one).
const ALIASES: &[(&str, &str, &str)] = &[
    ("rm", "-R", "-r"),
    ("rm", "--recursive", "-r"),
    ("rm", "--force", "-f"),
    ("rm", "--dir", "-d"),
    ("rm", "--interactive", "-i"),
    ("cp", "-R", "-r"),
    ("cp", "--recursive", "-r"),
    ("cp", "--force", "-f"),
    ("mv", "--force", "-f"),
    ("ln", "--force", "-f"),
    ("ln", "--symbolic", "-s"),
    ("chmod", "--recursive", "-R"),
    ("chown", "--recursive", "-R"),
    ("chgrp", "--recursive", "-R"),
    ("sed", "--in-place", "-i"),
    ("git", "--force", "-f"),
    ("git", "--delete", "-d"),
    ("git", "--dry-run", "-n"),
    ("git", "--quiet", "-q"),
    ("git", "--all", "-a"),
    ("git", "--tags", "-t"),
    ("curl", "--insecure", "-k"),
    ("curl", "--output", "-o"),
    ("curl", "--upload-file", "-T"),
    ("curl", "--data", "-d"),
    ("*", "--force", "-f"),
];

/// The canonical form of the option `spelling` of `program`.
fn canonical<'a>(program: &str, spelling: &'a str) -> &'a str {
    ALIASES
        .iter()
        .find(|(p, s, _)| (*p == program || *p == "*") && *s == spelling)
        .map_or(spelling, |(_, _, c)| c)
}

/// What a command's words after its program and subcommands say.
#[derive(Default)]
struct Given {
    /// Canonical option keys (`-r`, `--color`), clusters split (`-rf` → `-r`, `-f`).
    keys: Vec<String>,
    /// Long options as written (`--rec`), for abbreviations.
    longs: Vec<String>,
    /// Operands, and the values of `--name=value` options.
    operands: Vec<String>,
    /// A word not known before the line runs (it may be any option or operand).
    unknown: bool,
}

fn given(program: &str, words: &[Word]) -> Given {
    let mut g = Given::default();
    let mut ended = false;
    for w in words {
        let Some(t) = w.value() else {
            g.unknown = true;
            continue;
        };
        if w.glob && w.could_be_option() {
            g.unknown = true;
        }
        if ended || !t.starts_with('-') || t == "-" {
            g.operands.push(t.to_string());
        } else if t == "--" {
            ended = true;
        } else if t.starts_with("--") {
            let (name, value) = t.split_once('=').map_or((t, None), |(n, v)| (n, Some(v)));
            g.keys.push(canonical(program, name).to_string());
            g.longs.push(name.to_string());
            g.operands.extend(value.map(str::to_string));
        } else {
            for c in t.chars().skip(1) {
                let short = format!("-{c}");
                g.keys.push(canonical(program, &short).to_string());
            }
        }
    }
    g
}

impl Given {
    /// Whether the option with canonical key `key` (the rule's long spelling `long`, if it
    /// used one) was given, abbreviations of long options included.
    fn has(&self, program: &str, key: &str, long: Option<&str>) -> bool {
        if self.keys.iter().any(|k| k == key) {
            return true;
        }
        // `--rec` for `--recursive`: any long spelling of the same option it begins.
        self.longs.iter().any(|written| {
            written.len() > 2
                && (long.is_some_and(|l| l.starts_with(written.as_str()))
                    || ALIASES.iter().any(|(p, s, c)| {
                        (*p == program || *p == "*")
                            && *c == key
                            && s.starts_with("--")
                            && s.starts_with(written.as_str())
                    }))
        })
    }
}

/// How the rule's words after its program and subcommands (`tail`: options and operands,
/// e.g. `-rf`, `--force origin`) match the command's words after them (`rest`).
pub(crate) fn tail_match(program: &str, tail: &[String], rest: &[Word]) -> RuleMatch {
    let g = given(program, rest);
    let satisfied = tail.iter().all(|want| {
        if want.starts_with("--") {
            let (name, value) = want
                .split_once('=')
                .map_or((want.as_str(), None), |(n, v)| (n, Some(v)));
            g.has(program, canonical(program, name), Some(name))
                && value.is_none_or(|v| g.operands.iter().any(|o| o == v))
        } else if want.starts_with('-') && want != "-" {
            want.chars().skip(1).all(|c| {
                let short = format!("-{c}");
                g.has(program, canonical(program, &short), None)
            })
        } else {
            g.operands.iter().any(|o| o == want)
        }
    });
    match (satisfied, g.unknown) {
        (true, _) => RuleMatch::Yes,
        (false, true) => RuleMatch::Maybe,
        (false, false) => RuleMatch::No,
    }
}

/// Splits a rule at its first option: the words compared in order (the program and its
/// subcommands, `git push`) and the rest (`--force origin`).
pub(crate) fn split_at_options(rule: &[String]) -> (&[String], &[String]) {
    let at = rule
        .iter()
        .skip(1)
        .position(|w| w.starts_with('-') && w != "-")
        .map_or(rule.len(), |p| p + 1);
    rule.split_at(at)
}

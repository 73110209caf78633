//! The labelled command corpus: Keel's own cases plus Codex's command-safety test cases, run
//! as one table. Every mutating command must be classified as something other than
//! `read_only`; exact labels must match; the read-only false-positive rate is reported.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_tools::shell::{SafetyClass, classify};
use serde_json::Value;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/shell_safety");

#[derive(Debug, Clone, Copy, PartialEq)]
enum Label {
    Exact(SafetyClass),
    /// Any class but read_only.
    Mutating,
    /// Truly read-only; classifying it otherwise is a false positive.
    ReadOnlyIdeally,
    /// Not judged (parse errors and the like): only counted.
    Any,
}

struct Case {
    command: String,
    label: Label,
    source: &'static str,
}

fn parse_label(s: &str) -> Label {
    match s {
        "read_only" => Label::Exact(SafetyClass::ReadOnly),
        "writes_workspace" => Label::Exact(SafetyClass::WritesWorkspace),
        "network" => Label::Exact(SafetyClass::Network),
        "unknown" => Label::Exact(SafetyClass::Unknown),
        "destructive" => Label::Exact(SafetyClass::Destructive),
        "mutating" => Label::Mutating,
        "ideally_read_only" => Label::ReadOnlyIdeally,
        other => panic!("unknown label `{other}` in corpus.txt"),
    }
}

fn keel_cases() -> Vec<Case> {
    let text = std::fs::read_to_string(format!("{FIXTURES}/corpus.txt")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (label, cmd) = l
                .split_once(" | ")
                .unwrap_or_else(|| panic!("bad line: {l}"));
            Case {
                command: cmd.replace('␤', "\n"),
                label: parse_label(label.trim()),
                source: "keel",
            }
        })
        .collect()
}

/// Quotes argv words for bash, so a Codex argv becomes the command line it stands for.
fn shell_join(argv: &[Value]) -> String {
    argv.iter()
        .map(|v| {
            let s = v.as_str().unwrap();
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./=:,+@%-".contains(c));
            if plain {
                s.to_string()
            } else {
                format!("'{}'", s.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Codex's "needs approval" cases that are in fact read-only (Codex asks before any git
/// command; Keel lets read-only git through and judges the rest).
const CODEX_UNSAFE_BUT_READ_ONLY: &[&str] = &[
    "git status",
    "git diff -p",
    "git log -p -1",
    "git show -p HEAD",
    "git branch --show-current",
    "bash -lc 'git status'",
    "bash -lc 'git log -p -1'",
    "bash -lc git status",
    "rg --search-zip files",
    "rg -z files",
    "bash -lc '(ls)'",
    "bash -lc 'ls || (pwd && echo hi)'",
];

fn codex_cases() -> Vec<Case> {
    let text = std::fs::read_to_string(format!("{FIXTURES}/codex/codex_command_safety_cases.json"))
        .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    fn argv_case(argv: &Value, label: Label) -> Case {
        Case {
            command: shell_join(argv.as_array().unwrap()),
            label,
            source: "codex",
        }
    }
    let list = |section: &str, key: &str| -> Vec<Value> {
        v[section][key].as_array().cloned().unwrap_or_default()
    };

    for a in list("is_known_safe_command_current", "safe")
        .iter()
        .chain(&list("is_known_safe_command_current", "safe_only_on_linux"))
        .chain(&list("is_known_safe_command_older_core", "safe"))
        .chain(&list("dangerous_command_older_core", "not_dangerous"))
    {
        out.push(argv_case(a, Label::ReadOnlyIdeally));
    }
    for a in list("is_known_safe_command_current", "unsafe")
        .iter()
        .chain(&list("is_known_safe_command_older_core", "unsafe"))
    {
        let cmd = shell_join(a.as_array().unwrap());
        let label = if CODEX_UNSAFE_BUT_READ_ONLY.contains(&cmd.as_str()) {
            Label::ReadOnlyIdeally
        } else if cmd == "bash -lc ''\\''git status'\\'''" {
            Label::Any // a program literally named "git status": not found
        } else {
            Label::Mutating
        };
        out.push(argv_case(a, label));
    }
    for a in list("dangerous_command_current", "dangerous_forced_rm")
        .iter()
        .chain(&list("dangerous_command_older_core", "dangerous"))
    {
        out.push(argv_case(a, Label::Mutating));
    }
    for a in list("dangerous_command_current", "not_dangerous") {
        // Not a *forced* rm, but still mutating, except the one that only echoes.
        let cmd = shell_join(a.as_array().unwrap());
        let label = if cmd.contains("echo 'rm") || cmd.contains("echo '\\''rm") {
            Label::ReadOnlyIdeally
        } else {
            Label::Mutating
        };
        out.push(argv_case(&a, label));
    }
    // The plain-script parser cases: judged by what they do.
    let parser = &v["bash_plain_script_parser"];
    let script_label = |s: &str| {
        if ["ls &&", "&& ls", "ls ;; pwd", "ls | | wc"].contains(&s) {
            Label::Any
        } else if s.contains("git commit") || s.contains('>') && !s.contains("<<") {
            Label::Mutating
        } else {
            Label::ReadOnlyIdeally
        }
    };
    for item in parser["accept"].as_array().unwrap() {
        let command = match item.get("script") {
            Some(s) => s.as_str().unwrap().to_string(),
            None => shell_join(item["argv"].as_array().unwrap()),
        };
        out.push(Case {
            label: script_label(&command),
            command,
            source: "codex",
        });
    }
    for s in parser["reject"].as_array().unwrap() {
        let command = s.as_str().unwrap().to_string();
        out.push(Case {
            label: script_label(&command),
            command,
            source: "codex",
        });
    }
    let heredoc = &parser["heredoc_single_command_prefix"];
    for item in heredoc["accept"].as_array().unwrap() {
        out.push(argv_case(&item["argv"], Label::Exact(SafetyClass::Unknown)));
    }
    for a in heredoc["reject"].as_array().unwrap() {
        let cmd = shell_join(a.as_array().unwrap());
        let label = if cmd.contains("$((1<<2))'") && !cmd.contains("python3") {
            Label::ReadOnlyIdeally
        } else {
            Label::Mutating
        };
        out.push(argv_case(a, label));
    }
    // The legacy exec policy's argument lists.
    for p in v["execpolicy_legacy_default_policy"]["programs"]
        .as_array()
        .unwrap()
    {
        let program = p["program"].as_str().unwrap();
        for key in ["should_match", "should_not_match"] {
            for args in p[key].as_array().unwrap() {
                let mut argv = vec![Value::String(program.into())];
                argv.extend(args.as_array().unwrap().iter().cloned());
                let label = if program == "cp" && args.as_array().unwrap().len() == 2 {
                    Label::Mutating
                } else if program == "cp" {
                    Label::Any
                } else {
                    Label::ReadOnlyIdeally
                };
                out.push(argv_case(&Value::Array(argv), label));
            }
        }
    }
    out
}

#[test]
fn corpus_never_calls_a_mutating_command_read_only() {
    let mut cases = keel_cases();
    let keel_count = cases.len();
    cases.extend(codex_cases());
    assert!(
        cases.len() >= 200,
        "the corpus has only {} commands",
        cases.len()
    );

    let mut missed = Vec::new(); // mutating judged read_only: must be empty
    let mut wrong = Vec::new(); // exact labels not matched
    let mut false_positives = Vec::new();
    let (mut read_only_total, mut mutating_total) = (0, 0);
    for case in &cases {
        let a = classify(&case.command);
        let expected_read_only = matches!(
            case.label,
            Label::Exact(SafetyClass::ReadOnly) | Label::ReadOnlyIdeally
        );
        let expected_mutating = matches!(case.label, Label::Mutating)
            || matches!(case.label, Label::Exact(c) if c != SafetyClass::ReadOnly);
        if expected_read_only {
            read_only_total += 1;
            if !a.is_read_only() {
                false_positives.push(format!(
                    "[{}] {:?} → {} {:?}",
                    case.source, case.command, a.class, a.reasons
                ));
            }
        }
        if expected_mutating {
            mutating_total += 1;
            if a.is_read_only() {
                missed.push(format!(
                    "[{}] {:?} → {:?}",
                    case.source, case.command, a.reasons
                ));
            }
        }
        if let Label::Exact(want) = case.label
            && a.class != want
        {
            wrong.push(format!(
                "[{}] {:?}: expected {want}, got {} {:?}",
                case.source, case.command, a.class, a.reasons
            ));
        }
    }
    let rate = false_positives.len() as f64 / read_only_total.max(1) as f64;
    println!(
        "shell corpus: {} commands ({} Keel, {} Codex); {} mutating, {} read-only; \
         mutating classified read_only: {}; read-only false positives: {}/{} = {:.1}%",
        cases.len(),
        keel_count,
        cases.len() - keel_count,
        mutating_total,
        read_only_total,
        missed.len(),
        false_positives.len(),
        read_only_total,
        rate * 100.0
    );
    for fp in &false_positives {
        println!("  false positive: {fp}");
    }
    assert!(
        missed.is_empty(),
        "mutating commands classified read_only:\n{}",
        missed.join("\n")
    );
    assert!(
        wrong.is_empty(),
        "labels not matched:\n{}",
        wrong.join("\n")
    );
    assert!(
        rate <= 0.10,
        "read-only false-positive rate {:.1}% is above 10%",
        rate * 100.0
    );
}

/// Everyday read-only commands (what agents run to look around a repository): at most 3% may
/// be rated anything but read_only — every one of them is a question a person is asked for
/// nothing. `cargo bench --bench readonly_fp` prints the same rate beside an older classifier.
#[test]
fn everyday_read_only_commands_are_rated_read_only() {
    let text = std::fs::read_to_string(format!("{FIXTURES}/everyday_read_only.txt")).unwrap();
    let commands: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.replace('␤', "\n"))
        .collect();
    assert!(commands.len() >= 300, "only {} commands", commands.len());
    let flagged: Vec<String> = commands
        .iter()
        .filter_map(|c| {
            let a = classify(c);
            (!a.is_read_only()).then(|| format!("{c:?} → {} {:?}", a.class, a.reasons))
        })
        .collect();
    let rate = flagged.len() as f64 / commands.len() as f64;
    println!(
        "everyday read-only commands: {}/{} rated otherwise = {:.1}%",
        flagged.len(),
        commands.len(),
        rate * 100.0
    );
    for f in &flagged {
        println!("  {f}");
    }
    assert!(
        rate <= 0.03,
        "{:.1}% of everyday read-only commands are not rated read_only:\n{}",
        rate * 100.0,
        flagged.join("\n")
    );
}

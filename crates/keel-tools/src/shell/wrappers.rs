//! Programs that run other code: wrappers whose payload is judged as a command of its own
//! (`env`, `nice`, `timeout`, `sudo`, `xargs`, `find -exec`, `fd -x`), shells whose `-c` string,
//! here-document or here-string is parsed recursively, `eval`-like words joined into a script,
//! and interpreters, whose code Keel cannot judge.

use super::options::{only_help, short_flags};
use super::safety::{Analyzer, SafetyClass, Stdin};
use super::words::Word;

use SafetyClass::{Destructive, Unknown, WritesWorkspace};

/// A wrapper (`nice`, `timeout`, `sudo`, …) runs the rest as a command.
pub(crate) fn wrap(a: &mut Analyzer, wrapper: &str, rest: &[Word], stdin: &Stdin) {
    if rest.is_empty() {
        a.read_only(wrapper);
    } else {
        a.simple_command(rest, stdin);
    }
}

/// `eval`, `watch`, `trap`: the words joined form a script.
pub(crate) fn script_from_words(a: &mut Analyzer, program: &str, words: &[Word]) {
    if words.is_empty() {
        return a.read_only(program);
    }
    let mut text = Vec::new();
    for w in words {
        match w.value() {
            Some(v) => text.push(v.to_string()),
            None => {
                return a.flag(
                    Unknown,
                    format!(
                        "`{program} {}`: the code is not known before it runs",
                        w.source
                    ),
                );
            }
        }
    }
    a.script(&text.join(" "));
}

/// GNU env's long options.
const ENV_LONG: &[&str] = &[
    "ignore-environment",
    "null",
    "unset",
    "chdir",
    "split-string",
    "block-signal",
    "default-signal",
    "ignore-signal",
    "list-signal-handling",
    "debug",
    "help",
    "version",
];

pub(crate) fn env(a: &mut Analyzer, args: &[Word], stdin: &Stdin) {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let Some(v) = w.value() else { break };
        if v == "--" {
            i += 1;
            break;
        }
        if let Some(l) = v.strip_prefix("--") {
            let (raw, value) = match l.split_once('=') {
                Some((n, val)) => (n, Some(val)),
                None => (l, None),
            };
            match super::options::resolve_long(raw, ENV_LONG) {
                Some("split-string") => {
                    // `env --split-string='prog args'` splits the string into words.
                    return match value {
                        Some(val) => script_from_words(a, "env -S", &[Word::lit(val)]),
                        None => script_from_words(a, "env -S", &args[i + 1..]),
                    };
                }
                Some("chdir") => {
                    match value {
                        Some(dir) => a.cd(&Word::lit(dir)),
                        None => {
                            if let Some(dir) = args.get(i + 1) {
                                a.cd(dir);
                            }
                        }
                    }
                    i += if value.is_none() { 2 } else { 1 };
                }
                Some("unset") if value.is_none() => i += 2,
                Some(_) => i += 1,
                None => {
                    a.flag(
                        Unknown,
                        format!("`env {v}` is an option Keel does not know"),
                    );
                    return;
                }
            }
            continue;
        }
        if let Some(flags) = v.strip_prefix('-').filter(|f| !f.is_empty()) {
            for (k, c) in flags.char_indices() {
                match c {
                    'i' | '0' | 'v' => {}
                    // `-S'prog args'` (attached) or `-S 'prog args'`.
                    'S' => {
                        let attached = &flags[k + 1..];
                        return if attached.is_empty() {
                            script_from_words(a, "env -S", &args[i + 1..])
                        } else {
                            script_from_words(a, "env -S", &[Word::lit(attached)])
                        };
                    }
                    'u' | 'C' => {
                        let attached = &flags[k + 1..];
                        if c == 'C' {
                            // The command runs in that directory.
                            match (attached.is_empty(), args.get(i + 1)) {
                                (false, _) => a.cd(&Word::lit(attached)),
                                (true, Some(dir)) => a.cd(dir),
                                (true, None) => {}
                            }
                        }
                        if attached.is_empty() {
                            i += 1;
                        }
                        break;
                    }
                    _ => {
                        a.flag(
                            Unknown,
                            format!("`env -{c}` is an option Keel does not know"),
                        );
                        return;
                    }
                }
            }
            i += 1;
            continue;
        }
        if let Some((name, _)) = v.split_once('=') {
            if super::safety::is_code_env(name) {
                a.flag(
                    Unknown,
                    format!("setting `{name}` for the command changes which code runs"),
                );
            } else if super::hidden::changes_command(name) {
                a.flag(
                    Unknown,
                    format!(
                        "setting `{name}` for the command: a program may read it as options or a module path (as tar reads TAR_OPTIONS)"
                    ),
                );
            }
            i += 1;
            continue;
        }
        break;
    }
    wrap(a, "env", args.get(i..).unwrap_or(&[]), stdin);
}

/// GNU xargs' options that take a separate value; `-i`, `-l` and `-e` take one only attached.
const XARGS_VALUE: &[&str] = &["-I", "-L", "-n", "-P", "-s", "-d", "-E", "-a"];

pub(crate) fn xargs(a: &mut Analyzer, args: &[Word]) {
    // The replace string: `-I R`, `-iR`/`-i` (`{}`), `--replace[=R]`.
    let mut replace: Option<String> = None;
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let Some(v) = w.value() else { break };
        if v == "--" {
            i += 1;
            break;
        }
        if !v.starts_with('-') || v == "-" {
            break;
        }
        if v == "-I" {
            replace = args.get(i + 1).map(|r| r.text.clone());
        } else if let Some(r) = v.strip_prefix("-I") {
            replace = Some(r.to_string());
        } else if let Some(r) = v.strip_prefix("-i") {
            replace = Some(if r.is_empty() { "{}".into() } else { r.into() });
        } else if let Some(r) = v.strip_prefix("--replace") {
            replace = Some(r.strip_prefix('=').unwrap_or("{}").to_string());
        }
        if XARGS_VALUE.contains(&v) {
            i += 1;
        }
        i += 1;
    }
    let rest = args.get(i..).unwrap_or(&[]);
    if rest.is_empty() {
        return a.read_only("xargs");
    }
    let mut cmd: Vec<Word> = rest.to_vec();
    match replace.filter(|r| !r.is_empty()) {
        // Each input line replaces the string wherever it appears, code included
        // (`xargs -I{} sh -c 'echo {}'`): those words are not known before it runs.
        Some(r) => {
            for w in &mut cmd {
                if w.text.contains(&r) || !w.literal {
                    *w = Word::unknown(&w.source);
                }
            }
        }
        None => cmd.push(Word::unknown("(xargs input)")),
    }
    a.simple_command(&cmd, &Stdin::Inherited);
}

pub(crate) fn find(a: &mut Analyzer, args: &[Word]) {
    // The starting points: the operands before the expression (`.` when none); what `{}`
    // may be in an `-exec` command ([`super::unrecorded::FOUND`]).
    let mut roots: Vec<Option<String>> = args
        .iter()
        .take_while(|w| {
            w.value()
                .is_none_or(|v| !(v.starts_with('-') || matches!(v, "(" | ")" | "!" | ",")))
        })
        .map(|w| w.value().map(str::to_string))
        .collect();
    if roots.is_empty() {
        roots.push(Some(".".to_string()));
    }
    let mut i = 0;
    while let Some(w) = args.get(i) {
        match w.value() {
            Some("-delete") => a.flag(Destructive, "`find -delete` deletes files".into()),
            Some(op @ ("-exec" | "-execdir" | "-ok" | "-okdir")) => {
                let mut cmd = Vec::new();
                i += 1;
                while let Some(w) = args.get(i) {
                    if w.is(";") || w.is("+") {
                        break;
                    }
                    cmd.push(if w.is("{}") {
                        Word::lit(super::unrecorded::FOUND)
                    } else {
                        w.clone()
                    });
                    i += 1;
                }
                if cmd.is_empty() {
                    a.flag(Unknown, format!("`find {op}` without a command"));
                } else {
                    let outer = a
                        .project
                        .as_mut()
                        .map(|p| p.line.found_roots.replace(roots.clone()));
                    a.simple_command(&cmd, &Stdin::Inherited);
                    if let (Some(p), Some(outer)) = (a.project.as_mut(), outer) {
                        p.line.found_roots = outer;
                    }
                }
            }
            Some(op @ ("-fls" | "-fprint" | "-fprint0" | "-fprintf")) => {
                match args.get(i + 1) {
                    Some(t) => a.write_target(t, &format!("`find {op}`")),
                    None => a.flag(WritesWorkspace, format!("`find {op}` writes a file")),
                }
                i += 1;
            }
            Some(_) => {}
            None => {
                if w.could_be_option() {
                    a.flag(
                        Unknown,
                        format!("`{}` could expand to an action of `find`", w.source),
                    );
                }
            }
        }
        i += 1;
    }
    a.read_only("find");
}

pub(crate) fn fd(a: &mut Analyzer, program: &str, args: &[Word]) {
    let pos = args
        .iter()
        .position(|w| w.is("-x") || w.is("--exec") || w.is("-X") || w.is("--exec-batch"));
    match pos {
        Some(p) => {
            let cmd: Vec<Word> = args[p + 1..]
                .iter()
                .take_while(|w| !w.is(";"))
                .cloned()
                .collect();
            if cmd.is_empty() {
                a.flag(Unknown, format!("`{program} --exec` without a command"));
            } else {
                a.simple_command(&cmd, &Stdin::Inherited);
            }
        }
        None => a.read_only(program),
    }
}

pub(crate) fn shell(a: &mut Analyzer, program: &str, args: &[Word], stdin: &Stdin) {
    if only_help(args) {
        return a.read_only(program);
    }
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let Some(v) = w.value() else {
            return a.flag(
                Unknown,
                format!("`{program} {}` is not known before it runs", w.source),
            );
        };
        if v == "-o" || v == "+o" || v == "-O" || v == "+O" {
            i += 2;
            continue;
        }
        if v.starts_with('-') && !v.starts_with("--") && v.len() > 1 && v.contains('c') {
            return match args.get(i + 1) {
                Some(code) => match code.value() {
                    Some(code) => a.script(code),
                    None => a.flag(
                        Unknown,
                        format!("`{program} -c {}`: the code is not known", code.source),
                    ),
                },
                None => a.flag(Unknown, format!("`{program} -c` without code")),
            };
        }
        if v.starts_with('-') || v.starts_with('+') {
            i += 1;
            continue;
        }
        return a.flag(
            Unknown,
            format!("`{program} {v}` runs a script Keel cannot see"),
        );
    }
    match stdin {
        Stdin::Text(Some(code)) => {
            let code = code.clone();
            a.script(&code);
        }
        Stdin::Pipe => a.flag(Unknown, format!("code is piped into `{program}`")),
        Stdin::Text(None) | Stdin::File(_) => a.flag(
            Unknown,
            format!("`{program}` runs code from its input, which is not known"),
        ),
        Stdin::Inherited => a.flag(Unknown, format!("`{program}` starts a shell")),
    }
}

pub(crate) fn interpreter(a: &mut Analyzer, program: &str, args: &[Word], stdin: &Stdin) {
    let version = args.len() == 1
        && [
            "--version",
            "-V",
            "-v",
            "--help",
            "-h",
            "version",
            "-version",
        ]
        .iter()
        .any(|f| args[0].is(f));
    if version {
        return a.read_only(program);
    }
    if program == "node" && args.len() == 2 && (args[0].is("--check") || args[0].is("-c")) {
        return a.read_only("node --check");
    }
    if program == "perl" {
        for w in args {
            if short_flags(w, &['e', 'E', 'I', 'M', 'm', 'l', '0', 'x']).contains(&'i')
                || w.value().is_some_and(|v| v.starts_with("-i"))
            {
                a.flag(WritesWorkspace, "`perl -i` edits files in place".into());
            }
        }
    }
    if program.starts_with("python")
        && let [m, module, rest @ ..] = args
        && m.is("-m")
        && (module.is("pip") || module.is("pip3"))
    {
        return super::toolchains::judge_pip(a, "python -m pip", rest);
    }
    let code_flag = args.iter().find(|w| {
        ["-c", "-e", "-E", "-p", "--eval", "--print", "-r"]
            .iter()
            .any(|f| w.is(f))
    });
    // Code not in a file the command names: what it imports is named nowhere (R6-5).
    let mut inline = true;
    let reason = if let Some(f) = code_flag {
        format!("`{program} {}` runs code Keel cannot analyse", f.text)
    } else if let Some(m) = args.iter().position(|w| w.is("-m")) {
        let module = args.get(m + 1).map_or("", |w| w.source.as_str());
        format!("`{program} -m {module}` runs a module Keel cannot analyse")
    } else if let Some(script) = args.iter().find(|w| !w.could_be_option()) {
        inline = false;
        format!("`{program} {}` runs a program", script.source)
    } else if *stdin == Stdin::Pipe {
        format!("code is piped into `{program}`")
    } else {
        format!("`{program}` runs code from its input")
    };
    a.inline_code |= inline;
    a.flag(Unknown, reason);
}

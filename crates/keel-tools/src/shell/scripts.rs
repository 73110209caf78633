//! Programs that take a script as an argument: `sed` (only print/delete/substitute-style
//! commands are read-only; `w`, `e`, `s///w`, `s///e` and `-i` are not) and `awk` (no
//! `system()`, pipes, output redirection or extensions).

use super::options::{resolve_long, short_flags};

/// GNU sed's long options; anything else (or an ambiguous prefix) is unknown.
const SED_LONG: &[&str] = &[
    "expression",
    "file",
    "in-place",
    "line-length",
    "null-data",
    "zero-terminated",
    "quiet",
    "silent",
    "regexp-extended",
    "separate",
    "sandbox",
    "unbuffered",
    "posix",
    "debug",
    "follow-symlinks",
    "binary",
    "help",
    "version",
];

/// awk options known to change nothing but parsing (`-F`, `-v` take a value).
const AWK_SAFE_SHORT: &[char] = &['F', 'v', 'b', 'c', 'P', 'r', 'S', 'n', 'N', 'O', 'M'];
const AWK_SAFE_LONG: &[&str] = &[
    "field-separator",
    "assign",
    "characters-as-bytes",
    "traditional",
    "posix",
    "re-interval",
    "sandbox",
    "use-lc-numeric",
    "optimize",
    "no-optimize",
    "bignum",
    "non-decimal-data",
    "version",
    "help",
    "copyright",
];
use super::safety::{Analyzer, SafetyClass};
use super::words::Word;

use SafetyClass::{Destructive, Network, Unknown, WritesWorkspace};

pub(crate) fn sed(a: &mut Analyzer, args: &[Word]) {
    let mut scripts: Vec<&Word> = Vec::new();
    let mut files: Vec<Word> = Vec::new();
    let mut explicit_script = false;
    let mut operands = 0;
    let mut i = 0;
    let mut options_done = false;
    while let Some(w) = args.get(i) {
        let Some(v) = w.value() else {
            if !options_done && w.could_be_option() {
                a.flag(
                    Unknown,
                    format!("`{}` could expand to an option of `sed`", w.source),
                );
            }
            if !explicit_script && operands == 0 {
                a.flag(
                    Unknown,
                    format!("the sed script `{}` is not known", w.source),
                );
            } else {
                files.push(w.clone());
            }
            operands += 1;
            i += 1;
            continue;
        };
        if !options_done && v == "--" {
            options_done = true;
        } else if !options_done && v.starts_with("--") {
            let raw = v.trim_start_matches('-').split('=').next().unwrap_or("");
            let Some(name) = resolve_long(raw, SED_LONG) else {
                a.flag(
                    Unknown,
                    format!("`sed {v}` is an option Keel does not know (or an ambiguous one)"),
                );
                i += 1;
                continue;
            };
            match name {
                "in-place" => a.flag(
                    WritesWorkspace,
                    "`sed --in-place` edits files in place".into(),
                ),
                "expression" => {
                    explicit_script = true;
                    if let Some((_, s)) = v.split_once('=') {
                        judge_sed_script(a, &Word::lit(s));
                    } else if let Some(n) = args.get(i + 1) {
                        scripts.push(n);
                        i += 1;
                    }
                }
                "file" => {
                    explicit_script = true;
                    a.flag(Unknown, "`sed --file` runs a script Keel cannot see".into());
                    if !v.contains('=') {
                        i += 1;
                    }
                }
                _ => {}
            }
        } else if !options_done && v.starts_with('-') && v.len() > 1 {
            let flags = short_flags(w, &['e', 'f', 'l', 'i', 'I']);
            for (k, c) in flags.iter().enumerate() {
                match c {
                    // GNU `-i`, BSD `-I`.
                    'i' | 'I' => a.flag(WritesWorkspace, format!("`sed {v}` edits files in place")),
                    'e' | 'f' => {
                        explicit_script = true;
                        let attached = k + 2 < v.len();
                        if *c == 'f' {
                            a.flag(Unknown, "`sed -f` runs a script Keel cannot see".into());
                            if !attached {
                                i += 1;
                            }
                        } else if attached {
                            // `-es/a/b/`: judge the attached script.
                            let s = &v[k + 2..];
                            judge_sed_script(a, &Word::lit(s));
                        } else if let Some(n) = args.get(i + 1) {
                            scripts.push(n);
                            i += 1;
                        }
                    }
                    'l' if k + 2 >= v.len() => i += 1,
                    _ => {}
                }
            }
        } else {
            if !explicit_script && operands == 0 {
                scripts.push(w);
            } else {
                files.push(w.clone());
            }
            operands += 1;
        }
        i += 1;
    }
    let in_place = args.iter().any(|w| {
        w.value().is_some_and(|v| {
            (v.starts_with("--")
                && v.len() > 3
                && "--in-place".starts_with(v.split('=').next().unwrap_or(v)))
                || (v.starts_with('-')
                    && !v.starts_with("--")
                    && v[1..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphabetic())
                        .any(|c| c == 'i' || c == 'I'))
        })
    });
    if in_place
        && scripts
            .iter()
            .any(|s| s.value().is_some_and(deletes_every_line))
    {
        a.flag(
            Destructive,
            "`sed -i` with a script deleting every line empties the files".into(),
        );
    }
    if in_place {
        // Each file is rewritten: one no snapshot records is lost (R7-14's rest).
        let keeps = std::mem::replace(&mut a.keeps_content, false);
        a.log_writes(&files);
        a.keeps_content = keeps;
    }
    if in_place && quiet(args) {
        // In place, `-n` keeps only what the script prints (R7-14).
        a.flag(
            Destructive,
            "`sed -n -i` keeps only the lines the script prints and discards the rest".into(),
        );
    }
    for s in scripts {
        judge_sed_script(a, s);
    }
    a.read_only("sed");
}

/// A sed script that deletes every line (`d`, `1,$d`, `/^/d`, `/./d`): in place, it empties
/// the files (R7-14).
fn deletes_every_line(script: &str) -> bool {
    let t: String = script.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(address) = t.strip_suffix('d').or_else(|| t.strip_suffix('D')) else {
        return false;
    };
    matches!(
        address,
        "" | "1,$"
            | "0,$"
            | "/^/"
            | "/$/"
            | "/./"
            | "/.*/"
            | "/^.*/"
            | "/^.*$/"
            | "/.*$/"
            | "$!"
            | "1!"
    ) || (address.starts_with('/') && address.ends_with("/!") && address.len() > 3)
}

/// `-n`, `--quiet`, `--silent`, or `n` in a short-option cluster before an option that takes
/// the rest of the word (`-ni`, not `-in`, whose `n` is `-i`'s backup suffix).
fn quiet(args: &[Word]) -> bool {
    args.iter().filter_map(Word::value).any(|v| {
        if v.starts_with("--") {
            return v == "--quiet" || v == "--silent";
        }
        v.starts_with('-')
            && v[1..]
                .chars()
                .take_while(|c| !matches!(c, 'i' | 'e' | 'f' | 'l'))
                .any(|c| c == 'n')
    })
}

/// Accepts sed scripts made of print/delete/substitute/… commands only; `w`, `W`, `e`, `r`,
/// `R` and the `s///w`/`s///e` flags write files or run commands.
fn judge_sed_script(a: &mut Analyzer, script: &Word) {
    let Some(text) = script.value() else {
        return a.flag(
            Unknown,
            format!("the sed script `{}` is not known", script.source),
        );
    };
    if let Err(why) = sed_script_is_read_only(text) {
        a.flag(Unknown, format!("sed script `{text}`: {why}"));
    }
}

fn sed_script_is_read_only(script: &str) -> Result<(), String> {
    let chars: Vec<char> = script.chars().collect();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && (chars[*i].is_whitespace() || chars[*i] == ';') {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= chars.len() {
            return Ok(());
        }
        // Address: numbers, $, /re/, \cREc, ranges, steps, negation.
        loop {
            match chars.get(i) {
                Some(c) if c.is_ascii_digit() || matches!(c, '$' | ',' | '~' | '+' | '!' | ' ') => {
                    i += 1
                }
                Some('/') => i = skip_delimited(&chars, i + 1, '/')?,
                Some('\\') => {
                    let d = *chars.get(i + 1).ok_or("unterminated address")?;
                    i = skip_delimited(&chars, i + 2, d)?;
                }
                _ => break,
            }
        }
        let Some(&cmd) = chars.get(i) else {
            return Err("an address without a command".into());
        };
        i += 1;
        match cmd {
            'p' | 'P' | 'd' | 'D' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x' | '=' | 'l' | 'z'
            | 'F' | '{' | '}' => {}
            'q' | 'Q' => {
                while chars
                    .get(i)
                    .is_some_and(|c| c.is_ascii_digit() || *c == ' ')
                {
                    i += 1;
                }
            }
            'b' | 't' | 'T' | ':' => {
                while chars.get(i).is_some_and(|c| *c != ';' && *c != '\n') {
                    i += 1;
                }
            }
            'a' | 'i' | 'c' => {
                // Text to the end of the line.
                while chars.get(i).is_some_and(|c| *c != '\n') {
                    i += 1;
                }
            }
            's' | 'y' => {
                let d = *chars.get(i).ok_or("unterminated command")?;
                if d == '\\' || d == '\n' {
                    return Err("an unusual delimiter".into());
                }
                i = skip_delimited(&chars, i + 1, d)?;
                i = skip_delimited(&chars, i, d)?;
                if cmd == 's' {
                    while let Some(&f) = chars.get(i) {
                        match f {
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => i += 1,
                            'w' | 'W' => return Err("the `w` flag writes a file".into()),
                            'e' => return Err("the `e` flag runs a command".into()),
                            _ => break,
                        }
                    }
                }
            }
            'w' | 'W' => return Err(format!("the `{cmd}` command writes a file")),
            'e' => return Err("the `e` command runs a command".into()),
            'r' | 'R' => {
                while chars.get(i).is_some_and(|c| *c != '\n') {
                    i += 1;
                }
            }
            other => return Err(format!("`{other}` is not a command Keel vouches for")),
        }
        // A command must end here.
        while chars.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
            i += 1;
        }
        match chars.get(i) {
            None | Some(';' | '\n' | '}') => {}
            Some(c) => return Err(format!("unexpected `{c}` after a command")),
        }
    }
}

/// Skips to just after the next unescaped `delim`.
fn skip_delimited(chars: &[char], mut i: usize, delim: char) -> Result<usize, String> {
    while let Some(&c) = chars.get(i) {
        if c == '\\' {
            i += 2;
            continue;
        }
        if c == delim {
            return Ok(i + 1);
        }
        i += 1;
    }
    Err("an unterminated expression".into())
}

pub(crate) fn awk(a: &mut Analyzer, program: &str, args: &[Word]) {
    let mut i = 0;
    let mut code: Option<&Word> = None;
    while let Some(w) = args.get(i) {
        let Some(v) = w.value() else {
            if w.could_be_option() {
                return a.flag(
                    Unknown,
                    format!("`{}` could expand to an option of `{program}`", w.source),
                );
            }
            code = Some(w);
            break;
        };
        if v == "--" {
            code = args.get(i + 1);
            break;
        }
        if let Some(l) = v.strip_prefix("--") {
            let (raw, value) = match l.split_once('=') {
                Some((n, val)) => (n, Some(val)),
                None => (l, None),
            };
            match resolve_long(raw, AWK_SAFE_LONG) {
                Some("field-separator" | "assign") if value.is_none() => i += 1,
                Some(_) => {}
                None => {
                    // --file, --source, --include, --load, --exec, --dump-variables,
                    // --profile, --pretty-print, --debug…: code or output Keel cannot see.
                    return a.flag(
                        Unknown,
                        format!("`{program} {v}` loads code, writes a file, or is not known"),
                    );
                }
            }
        } else if v.starts_with('-') && v.len() > 1 {
            for (k, c) in v[1..].char_indices() {
                if !AWK_SAFE_SHORT.contains(&c) {
                    return a.flag(
                        Unknown,
                        format!("`{program} -{c}` loads code, writes a file, or is not known"),
                    );
                }
                if c == 'F' || c == 'v' {
                    // The rest of the word is the value; else the next word is.
                    if k + 2 >= v.len() {
                        i += 1;
                    }
                    break;
                }
            }
        } else {
            code = Some(w);
            break;
        }
        i += 1;
    }
    let Some(code) = code else {
        return a.flag(Unknown, format!("`{program}` without a program"));
    };
    let Some(text) = code.value() else {
        return a.flag(
            Unknown,
            format!("the {program} program `{}` is not known", code.source),
        );
    };
    match awk_effect(text) {
        Some((class, why)) => a.flag(class, format!("the {program} program {why}")),
        None => a.read_only(program),
    }
}

/// What an awk program does besides reading and printing, found by reading it as awk does
/// (strings, regular expressions and comments are skipped, so `/a|b/` and `"x;}"` are text):
/// `system()`, a pipe (`|`, `|&`), a redirection of `print`/`printf` (`> "f"`, `>> "f"`,
/// not a comparison in parentheses), gawk's `@` directives and indirect calls, and its
/// `/inet/` network files.
fn awk_effect(text: &str) -> Option<(SafetyClass, &'static str)> {
    let chars: Vec<char> = text.chars().collect();
    let n = chars.len();
    let mut i = 0;
    let mut depth = 0i32;
    // Inside a print statement: the parenthesis depth it started at.
    let mut print_at: Option<i32> = None;
    // The last token ends an operand: a `/` after it divides instead of starting a regex.
    let mut operand = false;
    while i < n {
        let c = chars[i];
        match c {
            '"' => {
                let start = i;
                i += 1;
                while i < n && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
                let lit: String = chars[start..n.min(i + 1)].iter().collect();
                if lit.contains("/inet") {
                    return Some((Network, "opens a network connection (gawk's /inet files)"));
                }
                operand = true;
            }
            '/' if !operand => {
                i += 1;
                while i < n && chars[i] != '/' && chars[i] != '\n' {
                    match chars[i] {
                        '\\' => i += 1,
                        '[' => {
                            // A bracket expression may hold `/` and starts with `]` literally.
                            i += 1;
                            if chars.get(i) == Some(&']') {
                                i += 1;
                            }
                            while i < n && chars[i] != ']' {
                                i += 1;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                operand = true;
            }
            '#' => {
                while i < n && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '|' => {
                if chars.get(i + 1) == Some(&'|') {
                    i += 2;
                    operand = false;
                    continue;
                }
                return Some((Unknown, "pipes to or from a command"));
            }
            '>' => {
                if print_at.is_some_and(|d| depth <= d) {
                    return Some((Unknown, "redirects output to a file"));
                }
                operand = false;
            }
            '@' => {
                return Some((
                    Unknown,
                    "uses gawk's `@` directives or indirect calls, which load or call any code",
                ));
            }
            '(' => {
                depth += 1;
                operand = false;
            }
            ')' | ']' => {
                depth -= i32::from(c == ')');
                operand = true;
            }
            ';' | '\n' | '{' | '}' => {
                print_at = None;
                operand = false;
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while i < n && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                match word.as_str() {
                    "system" => return Some((Unknown, "calls `system()`")),
                    "print" | "printf" => {
                        print_at = Some(depth);
                        operand = false;
                    }
                    "in" | "return" | "getline" | "case" | "do" | "else" => operand = false,
                    _ => operand = true,
                }
                continue;
            }
            c if c.is_ascii_digit() || c == '.' => {
                while i < n && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
                operand = true;
                continue;
            }
            c if c.is_whitespace() => {}
            _ => operand = false,
        }
        i += 1;
    }
    None
}

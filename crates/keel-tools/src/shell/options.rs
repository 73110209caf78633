//! Reading command-line options the way programs do: combined short flags (`-ni`), attached
//! values (`-ofile`, `--output=file`), `--` ends options, and words whose expansion could turn
//! into an option (`$x`, `*`).

use super::safety::{Analyzer, SafetyClass};
use super::words::Word;

use SafetyClass::{Destructive, Unknown, WritesWorkspace};

/// True when `--name` selects the long option `option` the way getopt_long reads it: the
/// full name or any prefix of it (`--out` for `--output`, `--in-pl` for `--in-place`).
/// Prefixes shared with another option are ambiguous to getopt (an error), so counting them
/// is only ever more careful.
pub(crate) fn abbreviates(name: &str, option: &str) -> bool {
    let option = option.trim_start_matches('-');
    !name.is_empty() && option.starts_with(name)
}

/// The long option `--name` selects among `known` (full names without dashes), as
/// getopt_long resolves it: an exact name, else a unique prefix. `None` when unknown or
/// ambiguous: the caller treats it as unknown.
pub(crate) fn resolve_long<'k>(name: &str, known: &[&'k str]) -> Option<&'k str> {
    if let Some(exact) = known.iter().find(|k| **k == name) {
        return Some(exact);
    }
    let mut hits = known.iter().filter(|k| abbreviates(name, k));
    match (hits.next(), hits.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

/// `--version` / `--help` (or Java's `-version`) alone.
pub(crate) fn only_help(args: &[Word]) -> bool {
    args.len() == 1 && (args[0].is("--version") || args[0].is("--help") || args[0].is("-version"))
}

/// The literal short flags of an option word (`-abc` → a, b, c), stopping after a flag that
/// takes a value (listed in `with_value`), whose value is attached.
pub(crate) fn short_flags(word: &Word, with_value: &[char]) -> Vec<char> {
    let Some(v) = word.value() else {
        return Vec::new();
    };
    let Some(rest) = v.strip_prefix('-') else {
        return Vec::new();
    };
    if rest.starts_with('-') {
        return Vec::new();
    }
    let mut out = Vec::new();
    for c in rest.chars() {
        out.push(c);
        if with_value.contains(&c) {
            break;
        }
    }
    out
}

/// True when one of the short flags (in any combined form) or long options is present, before
/// a `--` end-of-options marker.
pub(crate) fn has_option(args: &[Word], short: &[char], long: &[&str]) -> bool {
    find_option(args, short, long).is_some()
}

fn find_option<'w>(args: &'w [Word], short: &[char], long: &[&str]) -> Option<&'w Word> {
    for w in args {
        if w.is("--") {
            return None;
        }
        // A non-literal word still shows its option when its literal prefix does (`-i$x`,
        // `--output=$f`).
        let shows_option = w.literal || (w.text.len() >= 2 && w.text.starts_with('-'));
        if !shows_option {
            continue;
        }
        let v = w.text.as_str();
        if let Some(l) = v.strip_prefix("--") {
            let name = l.split('=').next().unwrap_or("");
            if long.iter().any(|o| abbreviates(name, o)) {
                return Some(w);
            }
        } else if v.starts_with('-') && v[1..].chars().any(|c| short.contains(&c)) {
            return Some(w);
        }
    }
    None
}

/// Flags a program that has one of these options as `class`-worthy (`what` says why).
pub(crate) fn forbid(
    a: &mut Analyzer,
    program: &str,
    args: &[Word],
    short: &[char],
    long: &[&str],
    what: &str,
) {
    if let Some(w) = find_option(args, short, long) {
        let class = if what.contains("runs") {
            Unknown
        } else if what.contains("clock") {
            Destructive
        } else {
            WritesWorkspace
        };
        a.flag(class, format!("`{program} {}` {what}", w.text));
    }
}

/// Options whose value (attached or next word) is an output file.
pub(crate) fn option_writes(
    a: &mut Analyzer,
    program: &str,
    args: &[Word],
    short: &[char],
    long: &[&str],
) {
    let mut i = 0;
    while i < args.len() {
        let w = &args[i];
        if w.is("--") {
            break;
        }
        if let Some(v) = w.value() {
            if let Some(l) = v.strip_prefix("--") {
                let (name, value) = match l.split_once('=') {
                    Some((n, val)) => (n, Some(val)),
                    None => (l, None),
                };
                if long.iter().any(|o| abbreviates(name, o)) {
                    let target = match value {
                        Some(val) => Some(Word::lit(val)),
                        None => args.get(i + 1).cloned(),
                    };
                    write_option_target(a, program, target, v);
                }
            } else if v.starts_with('-') {
                let flags = short_flags(w, short);
                if let Some(c) = flags.last().filter(|c| short.contains(c)) {
                    let attached = v.split_once(*c).map(|(_, r)| r).unwrap_or("");
                    let target = if attached.is_empty() {
                        args.get(i + 1).cloned()
                    } else {
                        Some(Word::lit(attached))
                    };
                    write_option_target(a, program, target, v);
                }
            }
        }
        i += 1;
    }
    unknown_options(a, program, args);
    a.read_only(program);
}

fn write_option_target(a: &mut Analyzer, program: &str, target: Option<Word>, opt: &str) {
    match target {
        Some(t) => a.write_target(&t, &format!("`{program} {opt}`")),
        None => a.flag(WritesWorkspace, format!("`{program} {opt}` writes a file")),
    }
}

/// A word that is not literal but may expand to an option of a program with dangerous options.
pub(crate) fn unknown_options(a: &mut Analyzer, program: &str, args: &[Word]) {
    unknown_options_except(a, program, args, &[]);
}

/// Like [`unknown_options`], but `-X$value` is fine when `X` is one of `value_letters` (the
/// expansion is that option's value).
pub(crate) fn unknown_options_except(
    a: &mut Analyzer,
    program: &str,
    args: &[Word],
    value_letters: &[char],
) {
    for w in args {
        if w.is("--") {
            return;
        }
        let known_value = !w.literal
            && ((w.text.starts_with("--") && w.text.contains('='))
                || (w.text.len() == 2
                    && w.text.starts_with('-')
                    && w.text[1..].chars().all(|c| value_letters.contains(&c))));
        if known_value {
            continue;
        }
        if w.could_be_option() && !w.literal {
            a.flag(
                Unknown,
                format!("`{}` could expand to an option of `{program}`", w.source),
            );
        } else if w.literal && w.glob && w.could_be_option() {
            a.flag(
                Unknown,
                format!(
                    "the pattern `{}` could match a file named like an option of `{program}`",
                    w.source
                ),
            );
        }
    }
}

/// The operands: words that are not options, skipping the values of `with_value` options.
pub(crate) fn positionals<'w>(args: &'w [Word], with_value: &[&str]) -> Vec<&'w Word> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let w = &args[i];
        if !options_done && w.is("--") {
            options_done = true;
        } else if !options_done && w.literal && w.text.starts_with('-') && w.text.len() > 1 {
            if with_value.contains(&w.text.as_str()) {
                i += 1;
            }
        } else {
            out.push(w);
        }
        i += 1;
    }
    out
}

/// Skips leading options (flags only).
pub(crate) fn skip_flags<'w>(args: &'w [Word], _flags: &[&str]) -> &'w [Word] {
    let n = args
        .iter()
        .take_while(|w| w.literal && w.text.starts_with('-') && w.text != "--")
        .count();
    let rest = &args[n..];
    match rest.first() {
        Some(w) if w.is("--") => &rest[1..],
        _ => rest,
    }
}

/// Skips leading options, including the values of those listed in `with_value`.
pub(crate) fn skip_options<'w>(args: &'w [Word], with_value: &[&str]) -> &'w [Word] {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        if w.is("--") {
            return &args[i + 1..];
        }
        if !(w.literal && w.text.starts_with('-') && w.text.len() > 1) {
            break;
        }
        let name = w.text.split('=').next().unwrap_or("");
        if with_value.contains(&name) && !w.text.contains('=') {
            i += 1;
        }
        i += 1;
    }
    args.get(i..).unwrap_or(&[])
}

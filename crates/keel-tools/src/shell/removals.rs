//! What removes data or moves it out of the workspace, rated `destructive` (red-team pass 7,
//! R7-14): a git-ignored directory moved to the command's temp directory (deleted with it),
//! archived with `--remove-files`, or a file emptied by a write with nothing to write, is
//! gone — no snapshot holds ignored files, and `keel undo` cannot bring them back.
//!
//! - a move whose destination is the temp directory, outside the workspace, or not known
//!   before it runs (`mv data $TMPDIR/d`, `mv -t "$D" src`);
//! - archivers that delete what they archive: `tar --remove-files`, `zip -m`/`--move`,
//!   `7z -sdel`; `cp /dev/null f`;
//! - writes with nothing to write: `tee f` or `sort -o f` fed nothing (`< /dev/null`,
//!   `cat /dev/null |`, `printf '' |`), `sort -o f /dev/null`; with a redirection,
//!   `printf '' > f`, `cat /dev/null > f`, `echo -n > f` as `: > f` already was.
//!
//! Forced and contents-over copies ([`overwrites`]) were already here in spirit (red-team B17).

use super::options::{has_option, positionals};
use super::safety::{Analyzer, PathScope, SafetyClass, Stdin, path_scope};
use super::words::Word;

use SafetyClass::Destructive;

/// Commands that write nothing to their standard output (`: > f` empties `f`).
pub(crate) fn writes_nothing(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    matches!(
        words.as_slice(),
        [":"]
            | ["true"]
            | ["false"]
            | ["printf", "''" | "\"\""]
            | ["echo", "-n"]
            | ["echo", "-n", "''" | "\"\""]
            | ["cat", "/dev/null"]
            | ["cat", "<", "/dev/null"]
    )
}

/// What a command's input is when redirected by `node` (`< f`): `/dev/null` is no input
/// at all.
pub(crate) fn input_from(node: tree_sitter::Node, src: &str) -> Stdin {
    let mut cursor = node.walk();
    let target = node
        .children_by_field_name("destination", &mut cursor)
        .next()
        .map(|d| super::words::resolve(d, src));
    match target {
        Some(w) if w.is("/dev/null") => Stdin::Text(Some(String::new())),
        Some(w) => Stdin::File(w.value().map(str::to_string)),
        None => Stdin::File(None),
    }
}

fn no_input(stdin: &Stdin) -> bool {
    matches!(stdin, Stdin::Text(Some(t)) if t.is_empty())
}

/// Judges the removals and emptying writes of `program args` (the rest of the command is
/// judged as usual).
pub(crate) fn judge(a: &mut Analyzer, program: &str, args: &[Word], stdin: &Stdin) {
    let word = |v: &str| args.iter().any(|w| w.value() == Some(v));
    let why = match program {
        "tar" if word("--remove-files") => Some("`tar --remove-files` deletes what it archives"),
        "zip" if word("--move") || short_flag(args, 'm') => {
            Some("`zip -m` deletes what it archives")
        }
        "7z" | "7za" | "7zr" if word("-sdel") => Some("`7z -sdel` deletes what it archives"),
        "tee" if no_input(stdin) && !has_option(args, &['a'], &["--append"]) => {
            Some("`tee` with nothing to write empties its files")
        }
        "sort" if has_option(args, &['o'], &["--output"]) && sorts_nothing(args, stdin) => {
            Some("`sort -o` with nothing to sort empties its output file")
        }
        _ => None,
    };
    if let Some(why) = why {
        a.flag(Destructive, why.into());
    }
}

/// A short-option cluster (`-rm`) holds `flag`.
fn short_flag(args: &[Word], flag: char) -> bool {
    args.iter().any(|w| {
        w.value()
            .is_some_and(|v| v.starts_with('-') && !v.starts_with("--") && v[1..].contains(flag))
    })
}

/// `sort -o f /dev/null`, `sort -o f < /dev/null`: no input but nothing.
fn sorts_nothing(args: &[Word], stdin: &Stdin) -> bool {
    let inputs = positionals(
        args,
        &[
            "-o",
            "-k",
            "-t",
            "-S",
            "-T",
            "--output",
            "--key",
            "--field-separator",
            "--buffer-size",
            "--temporary-directory",
        ],
    );
    if inputs.is_empty() {
        return no_input(stdin);
    }
    inputs.iter().all(|w| w.is("/dev/null"))
}

/// A copy or move (`ops`: its operands, the destination last) that replaces existing files
/// wholesale, moves them out of the workspace, or empties them.
pub(crate) fn overwrites(a: &mut Analyzer, program: &str, args: &[Word], ops: &[Word]) {
    if let Some(why) = bulk_overwrite(program, args, ops) {
        a.flag(Destructive, why);
    }
    if program == "mv"
        && let Some(dest) = ops.last()
    {
        match dest.value() {
            None => a.flag(
                Destructive,
                format!(
                    "`mv` moves files to `{}`, not known before it runs (it may be outside the workspace)",
                    dest.source
                ),
            ),
            Some(d) if path_scope(d) == PathScope::Temp => a.flag(
                Destructive,
                format!("`mv` moves files out of the workspace to `{d}`"),
            ),
            Some(_) => {}
        }
    }
    if matches!(program, "cp" | "install")
        && ops.len() >= 2
        && ops[..ops.len() - 1].iter().any(|w| w.is("/dev/null"))
    {
        a.flag(
            Destructive,
            format!("`{program} /dev/null` empties its destination"),
        );
    }
}

/// Why a copy or move replaces existing files wholesale (red-team B17), if it does: an
/// explicitly forced one (`-f`, `--remove-destination`), a recursive copy of a directory's
/// contents over another (`cp -r DIR/. dst`, `cp -rT DIR dst`) or onto the workspace itself
/// (`dst` = `.`), rsync deleting what its source lacks. `-n`/`--no-clobber`/`--update=none`
/// (`rsync --ignore-existing`) keep existing files: an ordinary write then.
fn bulk_overwrite(program: &str, args: &[Word], ops: &[Word]) -> Option<String> {
    let text = |w: &Word| w.value().map(str::to_string);
    let words: Vec<String> = args.iter().filter_map(text).collect();
    let long = |names: &[&str]| {
        words.iter().any(|w| {
            names
                .iter()
                .any(|n| w == n || w.starts_with(&format!("{n}=")))
        })
    };
    match program {
        "cp" | "mv" => {
            let keeps = has_option(args, &['n'], &["--no-clobber"])
                || words
                    .iter()
                    .any(|w| w == "--update=none" || w == "--update=none-fail");
            if keeps {
                return None;
            }
            if has_option(args, &['f'], &["--force"]) || long(&["--remove-destination"]) {
                return Some(format!("`{program} -f` overwrites existing files"));
            }
            let recursive = program == "mv"
                || has_option(args, &['r', 'R', 'a'], &["--recursive", "--archive"]);
            let contents = ops.iter().rev().skip(1).any(|w| {
                w.value()
                    .is_some_and(|p| p.ends_with("/.") || p.ends_with("/*") || p == "*")
            });
            let onto_root = ops
                .last()
                .and_then(Word::value)
                .is_some_and(|d| matches!(d, "." | "./"));
            let no_target = has_option(args, &['T'], &["--no-target-directory"]);
            (recursive && ops.len() >= 2 && (contents || no_target || onto_root))
                .then(|| format!("`{program}` copies a directory's contents over existing files"))
        }
        "rsync" => {
            if words.iter().any(|w| w == "--ignore-existing") {
                return None;
            }
            let deletes = words
                .iter()
                .any(|w| w.starts_with("--del") || w == "--remove-source-files");
            let onto_root = ops
                .last()
                .and_then(Word::value)
                .is_some_and(|d| matches!(d, "." | "./"));
            if deletes {
                Some("`rsync --delete` removes files the source does not have".into())
            } else {
                onto_root.then(|| "`rsync` copies over the workspace's own files".into())
            }
        }
        "ln" if has_option(args, &['f'], &["--force"]) => {
            Some("`ln -f` replaces existing files with links".into())
        }
        "patch" if has_option(args, &['R'], &["--reverse"]) => {
            Some("`patch -R` reverts changes in the files it names".into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::shell::{SafetyClass, classify};

    #[test]
    fn removals_and_emptying_writes_are_destructive() {
        for cmd in [
            "mv data $TMPDIR/d",
            "mv data /tmp/d",
            "mv -t \"$TMPDIR\" src",
            "mv --target-directory=/tmp src",
            "find src -mindepth 1 -exec mv -t $TMPDIR {} +",
            "tar -cf x.tar --remove-files data2",
            "zip -m a.zip f",
            "zip -rm a.zip d",
            "zip --move a.zip f",
            "7z a -sdel a.7z f",
            "tee f < /dev/null",
            "cat /dev/null | tee f",
            "printf '' | tee -p f",
            "sort -o f /dev/null",
            "sort -o f < /dev/null",
            "printf '' > f",
            "cat /dev/null > f",
            "echo -n > f",
            "cp /dev/null f",
            "sed -i '/^/d' f",
            "sed -i '/./d' f",
            "sed -i '$!d' f",
            "sed -i '/keep/!d' f",
            "sed -i -n '/NOMATCH/p' f",
            "sed -ni 's/a/b/p' f",
            "sed --quiet -i p f",
        ] {
            let a = classify(cmd);
            assert_eq!(a.class, SafetyClass::Destructive, "{cmd}: {a:?}");
        }
    }

    #[test]
    fn ordinary_moves_copies_and_writes_stay_writes() {
        for cmd in [
            "mv a b",
            "mv a sub/",
            "cp a b",
            "cp -r data $TMPDIR/copy",
            "tee f < in.txt",
            "echo x | tee f",
            "sort -o out in.txt",
            "sed -i 's/a/b/' f",
            // `-in`: in place with the backup suffix `n`.
            "sed -in 's/a/b/' f",
            "sed -i '/^#/d' f",
            "zip -r a.zip d",
            "tar -cf x.tar d",
            "echo hi > f",
        ] {
            let a = classify(cmd);
            assert_eq!(a.class, SafetyClass::WritesWorkspace, "{cmd}: {a:?}");
        }
        for cmd in [
            "git status | tee /dev/null",
            "sort < /dev/null",
            "sed -n p f",
        ] {
            assert_eq!(classify(cmd).class, SafetyClass::ReadOnly, "{cmd}");
        }
    }
}

//! Programs that read and print unless an option says otherwise: an output file (`time -o`,
//! `zstd -o`), editing in place (`yq -i`), a directory to extract into (`tar -C`, `unzip -d`),
//! removing the input (`zstd --rm`), or a command to run (`man -P`, `less +!cmd`,
//! `zip -TT`). Each is judged by the effect of the options it is given.

use super::options::{has_option, option_writes, short_flags};
use super::safety::{Analyzer, SafetyClass, Stdin};
use super::words::Word;
use super::wrappers::wrap;

use SafetyClass::{Destructive, Unknown, WritesWorkspace};

/// GNU `time [-p] [-v] [-q] [-a] [-o FILE] [-f FORMAT] command…` (also `command time`,
/// `/usr/bin/time`): `-o` writes the timing to a file (appends with `-a`).
pub(crate) fn time(a: &mut Analyzer, args: &[Word], stdin: &Stdin) {
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
        if let Some(long) = v.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, val)) => (n, Some(val)),
                None => (long, None),
            };
            if super::options::abbreviates(name, "output") && name.len() >= 2 {
                match value {
                    Some(f) => a.write_target(&Word::lit(f), "`time --output`"),
                    None => {
                        match args.get(i + 1) {
                            Some(f) => a.write_target(f, "`time --output`"),
                            None => a.flag(WritesWorkspace, "`time --output` writes a file".into()),
                        }
                        i += 1;
                    }
                }
            } else if super::options::abbreviates(name, "format") && value.is_none() {
                i += 1;
            }
        } else {
            let flags = short_flags(w, &['o', 'f']);
            if let Some(c) = flags.last().filter(|c| matches!(c, 'o' | 'f')) {
                let attached = v.split_once(*c).map_or("", |(_, r)| r);
                let value = if attached.is_empty() {
                    i += 1;
                    args.get(i).cloned()
                } else {
                    Some(Word::lit(attached))
                };
                if *c == 'o' {
                    match value {
                        Some(f) => a.write_target(&f, "`time -o`"),
                        None => a.flag(WritesWorkspace, "`time -o` writes a file".into()),
                    }
                }
            }
        }
        i += 1;
    }
    wrap(a, "time", args.get(i..).unwrap_or(&[]), stdin);
}

/// gzip, zstd, xz, lz4, bzip2 and their un-/cat variants: read-only only when they write to
/// standard output or only list/test, and no option names an output file or removes input.
pub(crate) fn compressor(a: &mut Analyzer, program: &str, args: &[Word]) {
    let mut judged = false;
    // `-o FILE` (zstd, lz4, xz's `--output` does not exist but is harmless to check).
    let mut i = 0;
    while let Some(w) = args.get(i) {
        if w.is("--") {
            break;
        }
        if let Some(v) = w.value() {
            let long = v
                .strip_prefix("--")
                .map(|l| l.split('=').next().unwrap_or(l));
            if matches!(long, Some("output-dir-flat" | "output-dir-mirror")) {
                let dir = v
                    .split_once('=')
                    .map(|(_, d)| Word::lit(d))
                    .or_else(|| args.get(i + 1).cloned());
                match dir {
                    Some(d) => a.write_target(&d, &format!("`{program} {v}`")),
                    None => a.flag(WritesWorkspace, format!("`{program} {v}` writes files")),
                }
                judged = true;
            }
            if matches!(
                program,
                "zstd" | "unzstd" | "zstdcat" | "zstdmt" | "lz4" | "unlz4"
            ) && !v.starts_with("--")
                && v.starts_with('-')
                && short_flags(w, &['o', 'D', 'T', 'B', 'L', 'M']).last() == Some(&'o')
            {
                let attached = v.split_once('o').map_or("", |(_, r)| r);
                let target = if attached.is_empty() {
                    args.get(i + 1).cloned()
                } else {
                    Some(Word::lit(attached))
                };
                match target {
                    Some(t) => a.write_target(&t, &format!("`{program} -o`")),
                    None => a.flag(WritesWorkspace, format!("`{program} -o` writes a file")),
                }
                judged = true;
            }
        }
        i += 1;
    }
    if has_option(args, &[], &["rm"]) {
        a.flag(
            Destructive,
            format!("`{program} --rm` deletes the input files"),
        );
        judged = true;
    }
    let to_stdout = program.ends_with("cat")
        || has_option(
            args,
            &['c', 'l', 't'],
            &["stdout", "to-stdout", "list", "test"],
        );
    if to_stdout || judged {
        a.read_only(program);
    } else {
        a.flag(
            WritesWorkspace,
            format!("`{program}` replaces files with (de)compressed ones"),
        );
    }
}

/// `yq`: `-i`/`--inplace`/`--in-place` edits files, `-s`/`--split-exp` writes one file per
/// document.
pub(crate) fn yq(a: &mut Analyzer, args: &[Word]) {
    let mut short = Vec::new();
    let mut long_in_place = false;
    let mut long_split = false;
    for w in args {
        if w.is("--") {
            break;
        }
        let Some(v) = w.value() else { continue };
        if let Some(l) = v.strip_prefix("--") {
            let name = l.split('=').next().unwrap_or(l);
            long_in_place |= name.len() >= 3
                && (super::options::abbreviates(name, "inplace")
                    || super::options::abbreviates(name, "in-place"));
            long_split |= name.len() >= 2 && super::options::abbreviates(name, "split-exp");
        } else if v.starts_with('-') {
            // Options with a value: output/input format, indent, expression file, split.
            short.extend(short_flags(w, &['o', 'p', 'I', 's', 'f', 'c', 'a']));
        }
    }
    if long_in_place || short.contains(&'i') {
        a.flag(WritesWorkspace, "`yq -i` edits files in place".into());
    }
    if long_split || short.contains(&'s') {
        a.flag(
            WritesWorkspace,
            "`yq --split-exp` writes a file for each document".into(),
        );
    }
    a.read_only("yq");
}

/// `unzip`: extracts (into `-d DIR`) unless only listing, testing or piping.
pub(crate) fn unzip(a: &mut Analyzer, args: &[Word]) {
    if has_option(args, &['l', 't', 'Z', 'v', 'p'], &[]) {
        return a.read_only("unzip");
    }
    let dir = args
        .iter()
        .position(|w| w.is("-d"))
        .and_then(|p| args.get(p + 1))
        .cloned()
        .or_else(|| {
            args.iter().find_map(|w| {
                w.value()?
                    .strip_prefix("-d")
                    .filter(|d| !d.is_empty())
                    .map(Word::lit)
            })
        });
    match dir {
        Some(d) => a.write_target(&d, "`unzip -d`"),
        None => a.flag(WritesWorkspace, "`unzip` extracts files".into()),
    }
    if has_option(args, &['o'], &[]) && !has_option(args, &['n'], &[]) {
        a.flag(
            Destructive,
            "`unzip -o` overwrites existing files without asking".into(),
        );
    }
}

/// `less`/`more`: `-o`/`-O` log to a file; a `+cmd` argument runs a pager command at start
/// (`+!cmd` is a shell command).
pub(crate) fn pager(a: &mut Analyzer, program: &str, args: &[Word]) {
    for w in args {
        if w.text.starts_with('+') {
            a.flag(
                Unknown,
                format!("`{program} {}` runs a pager command at start", w.source),
            );
        }
    }
    option_writes(a, program, args, &['o', 'O'], &["--log-file", "--LOG-FILE"]);
}

/// `man`: read-only for looking pages up (`-k`, `-f`, `-w`, `-a`, a section); `-P`/`--pager`,
/// `-H`/`--html` (a browser) and preprocessors name programs to run.
pub(crate) fn man(a: &mut Analyzer, args: &[Word]) {
    for w in args {
        let Some(v) = w.value() else {
            if w.could_be_option() {
                return a.flag(
                    Unknown,
                    format!("`{}` could expand to an option of `man`", w.source),
                );
            }
            continue;
        };
        if v == "--" {
            break;
        }
        let safe = matches!(
            v,
            "-k" | "-f" | "-w" | "-W" | "-a" | "--apropos" | "--whatis" | "--where" | "--all"
        ) || !v.starts_with('-');
        if !safe {
            return a.flag(
                Unknown,
                format!("`man {v}` may run a pager, browser or preprocessor"),
            );
        }
    }
    a.read_only("man");
}

/// `zip`: writes the archive; `-TT`/`--unzip-command` also runs a command to test it.
pub(crate) fn zip(a: &mut Analyzer, args: &[Word]) -> bool {
    if args.iter().any(|w| {
        w.is("-TT")
            || w.value()
                .is_some_and(|v| v.starts_with("--unzip-command") || v.starts_with("-TT"))
    }) {
        a.flag(
            Unknown,
            "`zip -TT` runs a command to test the archive".into(),
        );
        return true;
    }
    false
}

/// `rsync -e CMD`/`--rsh`/`--rsync-path` run a command of the caller's choosing.
pub(crate) fn rsync_runs(a: &mut Analyzer, args: &[Word]) {
    let runs = args.iter().any(|w| {
        w.value().is_some_and(|v| {
            v.starts_with("--rsh")
                || v.starts_with("--rsync-path")
                || (v.starts_with('-') && !v.starts_with("--") && v.contains('e'))
        })
    });
    if runs {
        a.flag(
            Unknown,
            "`rsync -e`/`--rsync-path` runs a command of its own".into(),
        );
    }
}

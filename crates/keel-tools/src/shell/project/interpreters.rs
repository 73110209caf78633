//! The project file an interpreter runs (`python3 gen.py`, `node x.js`, `python3 -m pkg.mod`),
//! recorded as a source of the judgement (red-team pass 2, R12): the command stays what the
//! analyser says (the project's code: unknown outside a test run), but an approval remembered
//! for the session carries the file's fingerprint, so a rewritten script asks again.

use super::super::safety::Analyzer;
use super::super::words::Word;
use super::SCRIPT_RUNNERS;

/// Whether `option` of `program` takes the next word as its value (not a script).
fn takes_value(program: &str, option: &str) -> bool {
    let list: &[&str] = match program {
        p if p.starts_with("python") => &["-W", "-X", "-Q"],
        "ruby" => &["-I", "-C", "-r", "-E"],
        "perl" => &["-I", "-M", "-m"],
        "php" => &["-c", "-d", "-z"],
        // node, deno, bun, tsx, ts-node
        _ => &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "--env-file",
            "-C",
            "--conditions",
        ],
    };
    list.contains(&option)
}

/// Options whose value is a file the interpreter loads as code before the script.
const CODE_VALUES: &[&str] = &[
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
];

/// Whether `program` is an interpreter whose operand is a project file of code.
pub(super) fn is_interpreter(program: &str) -> bool {
    SCRIPT_RUNNERS.contains(&program) || program.starts_with("python")
}

/// Records the project files `program args` runs as code (the script, a `-m` module, a
/// `--require`d file) as sources of the analysis. Inline code (`-c`, `-e`) is in the
/// command line itself.
pub(super) fn record_scripts(a: &mut Analyzer, program: &str, args: &[Word]) {
    if !is_interpreter(program) {
        return;
    }
    let python = program.starts_with("python");
    let mut files: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let Some(v) = args[i].value() else {
            // A word not known before the command runs: no file to record.
            return;
        };
        if python && v == "-m" {
            if let Some(module) = args.get(i + 1).and_then(Word::value) {
                files.extend(module_files(module));
            }
            break;
        }
        let inline = match program {
            p if p.starts_with("python") => v == "-c",
            "ruby" => v == "-e",
            "perl" => v == "-e" || v == "-E",
            "php" => v == "-r",
            _ => ["-e", "-p", "--eval", "--print"].contains(&v),
        };
        if inline {
            // Inline code: the command line is the code — and every file it names in a
            // string (`exec(open('g.py').read())`, `do "./x.pl"`, `require('./x.js')`) is
            // fingerprinted too (red-team pass 5, R5-15).
            if let Some(code) = args.get(i + 1).and_then(Word::value) {
                files.extend(quoted_names(code));
            }
            break;
        }
        if matches!(program, "deno" | "bun") && files.is_empty() && v == "run" {
            i += 1;
            continue;
        }
        if takes_value(program, v) {
            if CODE_VALUES.contains(&v)
                && !python
                && let Some(file) = args.get(i + 1).and_then(Word::value)
            {
                files.push(file.to_string());
            }
            i += 2;
            continue;
        }
        if let Some((opt, file)) = v.split_once('=')
            && CODE_VALUES.contains(&opt)
        {
            files.push(file.to_string());
            i += 1;
            continue;
        }
        if v.starts_with('-') {
            i += 1;
            continue;
        }
        files.push(v.to_string());
        break;
    }
    for file in files {
        // Read beneath the workspace and fingerprinted; a file that is not there (a
        // module on `sys.path`, a package name) or not text is simply not recorded.
        super::record_program_file(a, &file);
    }
}

/// The contents of the quoted strings in `code` that could name a file (no space, not empty):
/// candidates only — a name that is not a workspace file is not recorded.
fn quoted_names(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for quote in ['\'', '"', '`'] {
        let mut parts = code.split(quote);
        parts.next();
        while let Some(inner) = parts.next() {
            if !inner.is_empty() && inner.len() < 512 && !inner.contains(char::is_whitespace) {
                out.push(inner.to_string());
            }
            // Skip the text between this string and the next.
            parts.next();
        }
    }
    out
}

/// Options whose value is a file `program` reads as its program (awk's, sed's, jq's
/// script, gawk's includes) or as the words it runs (`xargs -a`).
fn program_file_options(program: &str) -> &'static [&'static str] {
    match program {
        "awk" | "gawk" | "mawk" | "nawk" => &["-f", "--file", "-i", "--include", "-E", "--exec"],
        "sed" | "gsed" => &["-f", "--file"],
        "jq" | "gojq" | "jaq" => &["-f", "--from-file"],
        "xargs" => &["-a", "--arg-file"],
        _ => &[],
    }
}

/// Records the project files `program args` reads as its program — `awk -f p.awk`, `sed
/// --file=s.sed`, `jq -f q.jq`, `xargs -a list`, `source ./env.sh` — and, for a command inside
/// a substitution (`bash -c "$(cat r.sh)"`, `eval "$(head r.sh)"`), every file it names:
/// its output becomes part of the command line (red-team pass 4, R4-8).
pub(super) fn record_program_files(a: &mut Analyzer, program: &str, args: &[Word]) {
    let mut files: Vec<String> = Vec::new();
    if matches!(program, "source" | ".") {
        files.extend(args.first().and_then(Word::value).map(str::to_string));
    }
    let options = program_file_options(program);
    let mut i = 0;
    while i < args.len() {
        let Some(v) = args[i].value() else {
            i += 1;
            continue;
        };
        if options.contains(&v) {
            files.extend(args.get(i + 1).and_then(Word::value).map(str::to_string));
            i += 2;
            continue;
        }
        if let Some((opt, file)) = v.split_once('=')
            && options.contains(&opt)
        {
            files.push(file.to_string());
        } else if let Some(short) = options
            .iter()
            .find(|o| o.len() == 2 && v.len() > 2 && v.starts_with(**o) && !v.starts_with("--"))
        {
            // `-fprog.awk`
            files.push(v[short.len()..].to_string());
        }
        i += 1;
    }
    if a.substitution > 0 {
        files.extend(
            args.iter()
                .filter_map(Word::value)
                .filter(|v| !v.starts_with('-'))
                .map(str::to_string),
        );
    }
    for file in files {
        super::record_program_file(a, &file);
    }
}

/// The files `python -m pkg.mod` may run from where it runs: `pkg/mod.py`, or the package's
/// `pkg/mod/__main__.py` (both recorded when present: either may be what runs).
fn module_files(module: &str) -> Vec<String> {
    if module.is_empty()
        || !module
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'))
    {
        return Vec::new();
    }
    let path = module.replace('.', "/");
    vec![format!("{path}.py"), format!("{path}/__main__.py")]
}

//! What each known program does with its arguments: the reviewed allow-list of read-only
//! programs and their read-only flags, the writers, the destroyers, the network clients, the
//! wrappers whose payload is judged recursively (`env`, `sudo`, `xargs`, `find -exec`, `sh -c`,
//! `eval`), and the interpreters whose code cannot be judged. Anything not listed is unknown.
//! Version control and language toolchains live in [`super::toolchains`].

use super::options::{
    forbid, has_option, only_help, option_writes, positionals, short_flags, skip_flags,
    skip_options, unknown_options, unknown_options_except,
};
use super::safety::{Analyzer, PathScope, SafetyClass, Stdin, path_scope};
use super::scripts::{awk, sed};
use super::words::Word;
use super::wrappers::{env, fd, find, interpreter, script_from_words, shell, wrap, xargs};

use SafetyClass::{Destructive, Network, Unknown, WritesWorkspace};

/// Programs that only read and print, whatever their arguments (reviewed: none of them has an
/// option that writes a file, runs a program or talks to the network).
#[rustfmt::skip]
const READ_ONLY: &[&str] = &[
    ":", "[", "arch", "b2sum", "basename", "bzcat", "cat", "cd", "cksum", "cmp", "column",
    "comm", "cut", "df", "diff", "dirname", "dirs", "du", "echo", "egrep", "expand", "expr",
    "factor", "false", "fgrep", "fmt", "fold", "free", "getconf", "getopts", "grep", "groups",
    "head", "hexdump", "id", "jobs", "join", "jq", "let", "locale", "ls",
    "lsblk", "lscpu", "md5sum", "nl", "nproc", "numfmt", "od", "paste",
    "pgrep", "pidof", "popd", "pr", "printenv", "printf", "ps", "pushd", "pwd", "read",
    "readlink", "realpath", "return", "rev", "seq", "set", "sha1sum", "sha224sum",
    "sha256sum", "sha384sum", "sha512sum", "shift", "shopt", "sleep", "stat", "strings", "sum",
    "tac", "tail", "test", "times", "tr", "true", "tty", "type", "ulimit", "umask", "uname",
    "unexpand", "uptime", "wait", "wc", "which", "who", "whoami", "xzcat", "yes", "zcat",
    "zgrep", "exit", "break", "continue", "whereis", "cal", "tput",
];

/// Programs that create or change files.
#[rustfmt::skip]
const WRITERS: &[&str] = &[
    "mkdir", "touch", "cp", "mv", "ln", "install", "chmod", "chown", "chgrp", "patch", "split",
    "csplit", "mkfifo", "mknod", "mktemp", "sponge", "dos2unix", "unix2dos", "zip", "7z", "ar",
    "strip", "setfacl", "chattr", "javac", "cc", "c++", "gcc",
    "g++", "clang", "clang++", "ld", "as",
];

/// Programs that delete, overwrite, repartition or end things.
const DESTROYERS: &[(&str, &str)] = &[
    ("rm", "deletes files"),
    ("rmdir", "deletes directories"),
    ("unlink", "deletes a file"),
    ("shred", "overwrites and deletes files"),
    ("truncate", "cuts files to a size, discarding data"),
    ("wipefs", "erases file-system signatures"),
    ("fdisk", "repartitions disks"),
    ("sfdisk", "repartitions disks"),
    ("parted", "repartitions disks"),
    ("mkswap", "formats a device"),
    ("mount", "changes mounts"),
    ("umount", "changes mounts"),
    ("kill", "ends processes"),
    ("pkill", "ends processes"),
    ("killall", "ends processes"),
    ("reboot", "restarts the machine"),
    ("shutdown", "stops the machine"),
    ("halt", "stops the machine"),
    ("poweroff", "stops the machine"),
    ("systemctl", "starts and stops system services"),
    ("service", "starts and stops system services"),
    ("crontab", "changes scheduled jobs"),
    ("useradd", "changes system users"),
    ("userdel", "changes system users"),
    ("passwd", "changes passwords"),
    ("chpasswd", "changes passwords"),
    ("su", "switches user"),
    ("apt", "changes system packages"),
    ("apt-get", "changes system packages"),
    ("dpkg", "changes system packages"),
    ("dnf", "changes system packages"),
    ("yum", "changes system packages"),
    ("pacman", "changes system packages"),
    ("brew", "changes system packages"),
    ("snap", "changes system packages"),
];

/// Programs whose job is talking to the network.
#[rustfmt::skip]
const NETWORK: &[&str] = &[
    "curl", "wget", "ssh", "scp", "sftp", "ftp", "telnet", "nc", "ncat", "netcat", "socat",
    "ping", "ping6", "dig", "nslookup", "host", "whois", "traceroute", "http", "https", "xh",
    "gh", "glab", "aws", "gcloud", "az", "aria2c", "lftp",
];

/// Interpreters: with code or a script they run a program Keel cannot judge.
#[rustfmt::skip]
const INTERPRETERS: &[&str] = &[
    "python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "deno", "bun", "ruby",
    "perl", "php", "lua", "luajit", "Rscript", "R", "julia", "tclsh", "wish", "osascript",
    "pwsh", "powershell", "java", "irb", "ipython",
];

/// Shells: `-c STRING`, here-documents and here-strings are parsed recursively.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox"];

/// Judges `program args…`.
pub(crate) fn judge(a: &mut Analyzer, program: &str, args: &[Word], stdin: &Stdin) {
    if matches!(stdin, Stdin::Pipe) && applies_a_patch(program, args) {
        // `git diff -R | git apply`, `git diff | patch -R`: a patch made by another command
        // can revert uncommitted work as surely as `git apply -R` (red-team pass 2, R6).
        a.flag(
            Destructive,
            format!("`{program}` applies a patch another command produced; it can revert uncommitted changes"),
        );
    }
    // What removes data or moves it out of the workspace (R7-14); what a patch changes.
    super::removals::judge(a, program, args, stdin);
    a.patch_writes(program, args, stdin);
    if is_interpreter(program) {
        return interpreter(a, program, args, stdin);
    }
    if SHELLS.contains(&program) {
        return shell(a, program, args, stdin);
    }
    if super::toolchains::judge(a, program, args) {
        return;
    }
    if matches!(program, "let" | "read" | "printf" | "test") {
        variable_builtin(a, program, args);
    }
    if READ_ONLY.contains(&program) {
        return a.read_only(program);
    }
    if let Some((_, what)) = DESTROYERS.iter().find(|(p, _)| *p == program) {
        if only_help(args) {
            return a.read_only(program);
        }
        return a.flag(Destructive, format!("`{program}` {what}"));
    }
    if program.starts_with("mkfs") {
        return a.flag(Destructive, format!("`{program}` formats a device"));
    }
    if program == "zip" && super::outputs::zip(a, args) {
        return;
    }
    if WRITERS.contains(&program) {
        return writer(a, program, args);
    }
    if NETWORK.contains(&program) {
        return network(a, program, args);
    }
    match program {
        "env" => env(a, args, stdin),
        "command" => {
            if args.first().is_some_and(|w| w.is("-v") || w.is("-V")) {
                return a.read_only("command");
            }
            let rest = skip_flags(args, &["-p"]);
            wrap(a, "command", rest, stdin);
        }
        "builtin" | "nohup" | "setsid" | "unbuffer" | "caffeinate" => wrap(a, program, args, stdin),
        "exec" => {
            let rest = skip_options(args, &["-a"]);
            wrap(a, "exec", rest, stdin);
        }
        "time" => super::outputs::time(a, args, stdin),
        "nice" => wrap(
            a,
            "nice",
            skip_options(args, &["-n", "--adjustment"]),
            stdin,
        ),
        "ionice" => wrap(
            a,
            "ionice",
            skip_options(args, &["-c", "-n", "-p", "-t"]),
            stdin,
        ),
        "stdbuf" => wrap(a, "stdbuf", skip_options(args, &["-i", "-o", "-e"]), stdin),
        "timeout" => {
            let rest = skip_options(args, &["-s", "--signal", "-k", "--kill-after"]);
            // The first operand is the duration.
            wrap(a, "timeout", rest.get(1..).unwrap_or(&[]), stdin);
        }
        "watch" => {
            let rest = skip_options(args, &["-n", "--interval", "-d"]);
            script_from_words(a, "watch", rest);
        }
        "sudo" | "doas" => {
            a.flag(
                Unknown,
                format!("`{program}` runs the command with elevated privileges"),
            );
            let rest = skip_options(
                args,
                &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"],
            );
            wrap(a, program, rest, stdin);
        }
        "xargs" => xargs(a, args),
        "find" => find(a, args),
        "fd" | "fdfind" => fd(a, program, args),
        "eval" => script_from_words(a, "eval", args),
        "source" | "." => a.flag(
            Unknown,
            format!(
                "`{program}` runs the shell code in `{}`",
                args.first().map_or("", |w| w.source.as_str())
            ),
        ),
        "trap" => {
            // `trap [-lp] [--] ACTION SIGNAL…`: the action runs when a signal (or EXIT, ERR,
            // DEBUG, RETURN) comes.
            let rest = skip_flags(args, &[]);
            if let Some(action) = rest.first().filter(|_| rest.len() > 1) {
                if action
                    .value()
                    .is_some_and(|v| v.starts_with('-') && v.len() > 1)
                {
                    a.flag(
                        Unknown,
                        format!("`trap {}` is an option Keel does not know", action.source),
                    );
                } else if !action.is("-") {
                    script_from_words(a, "trap", std::slice::from_ref(action));
                }
            }
            a.read_only("trap");
        }
        "alias" => {
            for w in args {
                match w.value().and_then(|v| v.split_once('=')) {
                    Some((_, body)) => a.script(body),
                    None if w.literal => {}
                    None => a.flag(Unknown, format!("`alias {}` is not literal", w.source)),
                }
            }
            a.read_only("alias");
        }
        "tee" => {
            let files = positionals(args, &[]);
            let appends = super::options::has_option(args, &['a'], &["--append"]);
            let keeps = std::mem::replace(&mut a.keeps_content, appends);
            for f in &files {
                a.write_target(f, "`tee`");
            }
            a.keeps_content = keeps;
            a.read_only("tee");
        }
        "dd" => {
            for w in args {
                match w.value() {
                    Some(v) if v.starts_with("of=") => {
                        a.flag(Destructive, format!("`dd {v}` overwrites `{}`", &v[3..]));
                    }
                    Some(_) => {}
                    None => a.flag(Unknown, format!("`dd {}` is not literal", w.source)),
                }
            }
            a.read_only("dd");
        }
        "sed" => sed(a, args),
        "awk" | "gawk" | "mawk" | "nawk" => awk(a, program, args),
        "sort" => {
            option_writes(a, "sort", args, &['o'], &["--output"]);
            forbid(
                a,
                "sort",
                args,
                &[],
                &["--compress-program"],
                "runs a program",
            );
        }
        "shuf" | "iconv" => option_writes(a, program, args, &['o'], &["--output"]),
        "tree" => option_writes(a, "tree", args, &['o'], &[]),
        "base64" => option_writes(a, "base64", args, &['o'], &["--output"]),
        "uniq" | "xxd" => {
            // The second operand is an output file.
            let ops = positionals(args, &["-f", "-s", "-w", "-c", "-g", "-l", "-o", "-s"]);
            if let Some(out) = ops.get(1) {
                a.write_target(out, &format!("`{program}`"));
            }
            unknown_options(a, program, args);
            a.read_only(program);
        }
        "file" => {
            forbid(
                a,
                "file",
                args,
                &['C'],
                &["--compile"],
                "writes a magic file",
            );
            a.read_only("file");
        }
        "rg" => {
            forbid(
                a,
                "rg",
                args,
                &[],
                &["--pre", "--hostname-bin"],
                "runs another program on each file",
            );
            unknown_options_except(
                a,
                "rg",
                args,
                &[
                    'g', 'e', 't', 'T', 'm', 'A', 'B', 'C', 'f', 'j', 'M', 'r', 'E',
                ],
            );
            a.read_only("rg");
        }
        "date" => {
            forbid(a, "date", args, &['s'], &["--set"], "sets the system clock");
            a.read_only("date");
        }
        "hostname" => {
            if !positionals(args, &[]).is_empty() || has_option(args, &['F', 'b'], &["--file"]) {
                a.flag(Destructive, "`hostname NAME` renames the machine".into());
            } else {
                a.read_only("hostname");
            }
        }
        "yq" => super::outputs::yq(a, args),
        "tar" => tar(a, args),
        "unzip" => super::outputs::unzip(a, args),
        "gzip" | "gunzip" | "zstd" | "unzstd" | "zstdmt" | "zstdcat" | "lz4" | "unlz4"
        | "lz4cat" | "xz" | "unxz" | "bzip2" | "bunzip2" => {
            super::outputs::compressor(a, program, args)
        }
        "man" => super::outputs::man(a, args),
        "rsync" => {
            super::outputs::rsync_runs(a, args);
            let remote = args
                .iter()
                .any(|w| w.text.contains(':') && !w.text.starts_with('-'));
            if remote {
                a.flag(Network, "`rsync` copies to or from another machine".into());
            }
            writer(a, "rsync", args);
        }
        "vi" | "vim" | "nvim" | "nano" | "emacs" | "ed" | "ex" => a.flag(
            Unknown,
            format!("`{program}` is an editor: it can change files and run commands"),
        ),
        "make" | "gmake" | "cmake" | "ninja" | "just" | "gradle" | "gradlew" | "mvn" | "ant"
        | "bazel" | "meson" | "rake" | "scons" => a.flag(
            Unknown,
            format!("`{program}` runs the project's build recipes"),
        ),
        "docker" | "podman" | "kubectl" | "helm" | "terraform" | "ansible" | "vagrant" => a.flag(
            Unknown,
            format!("`{program}` controls containers or infrastructure"),
        ),
        "dc" => a.flag(Unknown, "`dc` can run shell commands (`!`)".into()),
        "less" | "more" | "most" => super::outputs::pager(a, program, args),
        "hash" => {
            if has_option(args, &['p'], &[]) {
                a.flag(
                    Unknown,
                    "`hash -p` changes which program a name runs".into(),
                );
            } else {
                a.read_only("hash");
            }
        }
        "mapfile" | "readarray" => {
            if has_option(args, &['C'], &[]) {
                a.flag(Unknown, format!("`{program} -C` runs a callback"));
            } else {
                a.read_only(program);
            }
        }
        "bc" => a.read_only("bc"),
        _ => {
            a.flag(
                Unknown,
                format!("`{program}` is not a program Keel knows to be safe"),
            );
        }
    }
}

/// Builtins that evaluate arithmetic (`let`) or assign to a variable named by an argument
/// (`read NAME`, `printf -v NAME`, `test -v NAME`): a name or expression not fixed by the
/// command can run commands through an array subscript.
fn variable_builtin(a: &mut Analyzer, program: &str, args: &[Word]) {
    let name = |a: &mut Analyzer, w: &Word, what: &str| {
        super::arith::variable_name_text(a, w.value(), &w.source, what);
    };
    match program {
        "let" => {
            for w in args {
                match w.value() {
                    Some(expr) => {
                        // `x=…`, `x+=…`: the target is assigned, the rest is evaluated.
                        let rhs = assignment_rhs(expr).unwrap_or(expr);
                        super::arith::expression(a, rhs, &format!("`let {expr}`"));
                    }
                    None => a.flag(
                        Unknown,
                        format!(
                            "`let {}` evaluates an expression not known before it runs",
                            w.source
                        ),
                    ),
                }
            }
        }
        "read" => {
            let mut i = 0;
            while let Some(w) = args.get(i) {
                match w.value() {
                    Some("-a") => {
                        if let Some(n) = args.get(i + 1) {
                            name(a, n, "`read -a`");
                        }
                        i += 1;
                    }
                    Some("-d" | "-i" | "-n" | "-N" | "-p" | "-t" | "-u") => i += 1,
                    Some(v) if v.starts_with('-') && v.len() > 1 => {}
                    _ => name(a, w, "`read`"),
                }
                i += 1;
            }
        }
        "printf" => {
            if let Some(p) = args.iter().position(|w| w.is("-v"))
                && let Some(n) = args.get(p + 1)
            {
                name(a, n, "`printf -v`");
            }
        }
        _ => {
            // `test -v NAME`.
            for pair in args.windows(2) {
                if pair[0].is("-v") {
                    name(a, &pair[1], "`test -v`");
                }
            }
        }
    }
}

/// Whether `program args…` applies a patch read from its input (`patch`, `git apply` without
/// `--check`-like options).
fn applies_a_patch(program: &str, args: &[Word]) -> bool {
    let checks = |w: &Word| {
        w.value().is_some_and(|v| {
            matches!(
                v,
                "--check" | "--stat" | "--numstat" | "--summary" | "--dry-run" | "--help"
            )
        })
    };
    match program {
        "patch" => !args.iter().any(checks),
        "git" => {
            let words: Vec<&str> = args.iter().filter_map(Word::value).collect();
            words.contains(&"apply") && !args.iter().any(checks)
        }
        _ => false,
    }
}

/// The right-hand side of an arithmetic assignment `name op= rhs` (not a comparison `==`).
fn assignment_rhs(expr: &str) -> Option<&str> {
    let name_end = expr
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map_or(expr.len(), |(i, _)| i);
    if name_end == 0 {
        return None;
    }
    let rest = expr[name_end..].trim_start();
    let op_len = [
        "<<=", ">>=", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=", "=",
    ]
    .iter()
    .find(|op| rest.starts_with(**op))
    .map(|op| op.len())?;
    let rhs = &rest[op_len..];
    (!rhs.starts_with('=')).then_some(rhs)
}

fn is_interpreter(program: &str) -> bool {
    INTERPRETERS.contains(&program)
        || program
            .strip_prefix("python")
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

fn writer(a: &mut Analyzer, program: &str, args: &[Word]) {
    if only_help(args) {
        return a.read_only(program);
    }
    let mut ops: Vec<Word> = positionals(
        args,
        &["-t", "--target-directory", "-m", "--mode", "-o", "-g", "-S"],
    )
    .into_iter()
    .cloned()
    .collect();
    // `cp -t DIR`, `--target-directory=DIR`, `-tDIR`: where the files go.
    for (i, w) in args.iter().enumerate() {
        let Some(v) = w.value() else { continue };
        if v == "-t" || v == "--target-directory" {
            ops.extend(args.get(i + 1).cloned());
        } else if let Some(d) = v.strip_prefix("--target-directory=") {
            ops.push(Word::lit(d));
        } else if let Some(d) = v
            .strip_prefix("-t")
            .filter(|d| !d.is_empty() && !v.starts_with("--"))
        {
            ops.push(Word::lit(d));
        }
    }
    super::removals::overwrites(a, program, args, &ops);
    let outside = ops.iter().find(|w| {
        w.value()
            .is_some_and(|p| path_scope(p) == PathScope::Outside)
    });
    match outside {
        Some(w) if !matches!(program, "cc" | "gcc" | "g++" | "clang" | "clang++" | "c++") => {
            a.flag(
                Destructive,
                format!("`{program}` changes `{}`, outside the workspace", w.text),
            );
        }
        _ => {
            let what = match program {
                "cp" | "install" => "copies files (overwriting existing ones)",
                "mv" => "moves files (overwriting existing ones)",
                "ln" => "creates links",
                "mkdir" => "creates directories",
                "touch" => "creates or touches files",
                "chmod" | "chown" | "chgrp" | "setfacl" | "chattr" => "changes file permissions",
                "rsync" => "copies files",
                _ => "writes files",
            };
            a.flag_operand_writes(program, &ops, format!("`{program}` {what}"));
        }
    }
    // After its own writes: the names it makes reach what they lead to from now on.
    a.names_content(program, args, &ops);
}

fn network(a: &mut Analyzer, program: &str, args: &[Word]) {
    if only_help(args) {
        return a.read_only(program);
    }
    a.flag(Network, format!("`{program}` talks to the network"));
    match program {
        "curl"
            if has_option(
                args,
                &['o', 'O', 'D', 'c'],
                &[
                    "--output",
                    "--remote-name",
                    "--output-dir",
                    "--dump-header",
                    "--cookie-jar",
                    "--remote-name-all",
                ],
            ) =>
        {
            a.flag(WritesWorkspace, "`curl` saves a file".into());
        }
        "wget" => {
            let to_stdout = args.windows(2).any(|p| {
                (p[0].is("-O") || p[0].is("--output-document"))
                    && (p[1].is("-") || p[1].is("/dev/null"))
            }) || args
                .iter()
                .any(|w| w.is("-O-") || w.is("--spider") || w.is("--output-document=-"));
            if !to_stdout {
                a.flag(WritesWorkspace, "`wget` saves files".into());
            }
        }
        "scp" | "sftp" => a.flag(WritesWorkspace, format!("`{program}` copies files")),
        _ => {}
    }
}

/// tar's long options that run a program or write a side file, matched by any prefix.
const TAR_RUNS_OR_WRITES: &[&str] = &[
    "checkpoint-action",
    "to-command",
    "use-compress-program",
    "info-script",
    "new-volume-script",
    "rsh-command",
    "rmt-command",
    "index-file",
    "listed-incremental",
    "volno-file",
];

fn tar(a: &mut Analyzer, args: &[Word]) {
    let mut mode: Vec<char> = Vec::new();
    // Where it extracts (`-C DIR`, `--directory`) and the archive it writes (`-f FILE`).
    let mut dirs: Vec<Word> = Vec::new();
    let mut archives: Vec<Word> = Vec::new();
    let mut pending: Vec<char> = Vec::new();
    for (i, w) in args.iter().enumerate() {
        if let Some(c) = pending.first().copied() {
            pending.remove(0);
            match c {
                'C' => dirs.push(w.clone()),
                'f' => archives.push(w.clone()),
                _ => {}
            }
            continue;
        }
        let Some(v) = w.value() else { continue };
        if i == 0 && !v.starts_with('-') {
            mode.extend(v.chars());
            // Old style (`tar xzfC a.tar dir`): values follow in order.
            pending.extend(
                v.chars()
                    .filter(|c| matches!(c, 'f' | 'C' | 'T' | 'X' | 'b')),
            );
        } else if let Some(l) = v.strip_prefix("--") {
            let (name, value) = match l.split_once('=') {
                Some((n, val)) => (n, Some(val)),
                None => (l, None),
            };
            if name.len() >= 3 && super::options::abbreviates(name, "directory") {
                match value {
                    Some(d) => dirs.push(Word::lit(d)),
                    None => pending.push('C'),
                }
            } else if name.len() >= 3 && super::options::abbreviates(name, "file") {
                match value {
                    Some(f) => archives.push(Word::lit(f)),
                    None => pending.push('f'),
                }
            }
            let name = l.split('=').next().unwrap_or("");
            let mode_option = [
                "list",
                "extract",
                "get",
                "create",
                "append",
                "update",
                "delete",
                "to-stdout",
            ]
            .contains(&name);
            if !mode_option
                && TAR_RUNS_OR_WRITES
                    .iter()
                    .any(|o| super::options::abbreviates(name, o))
            {
                return a.flag(
                    Unknown,
                    format!("`tar {v}` runs a program or writes a file Keel cannot see"),
                );
            }
            match l {
                "list" => mode.push('t'),
                "extract" | "get" => mode.push('x'),
                "create" => mode.push('c'),
                "append" => mode.push('r'),
                "update" => mode.push('u'),
                "delete" => mode.push('x'),
                "to-stdout" => mode.push('O'),
                _ => {}
            }
        } else if v.starts_with('-') {
            let flags = short_flags(
                w,
                &['f', 'C', 'T', 'X', 'b', 'H', 'I', 'F', 'g', 'K', 'N', 'V'],
            );
            if let Some(c) = flags.iter().find(|c| matches!(c, 'I' | 'F' | 'g')) {
                return a.flag(
                    Unknown,
                    format!("`tar -{c}` runs a program or writes a file Keel cannot see"),
                );
            }
            if let Some(&last) = flags.last().filter(|c| matches!(c, 'f' | 'C')) {
                let attached = v.split_once(last).map_or("", |(_, r)| r);
                if attached.is_empty() {
                    pending.push(last);
                } else if last == 'C' {
                    dirs.push(Word::lit(attached));
                } else {
                    archives.push(Word::lit(attached));
                }
            }
            mode.extend(flags);
        }
    }
    let writes = mode
        .iter()
        .any(|c| matches!(c, 'x' | 'c' | 'r' | 'u' | 'A'));
    if writes && !mode.contains(&'O') {
        a.flag(WritesWorkspace, "`tar` creates or extracts archives".into());
        let keeps = args.iter().any(|w| {
            w.value().is_some_and(|v| {
                ["--keep-old-files", "--skip-old-files", "--keep-newer-files"].contains(&v)
            })
        }) || mode.contains(&'k');
        let forced = args.iter().any(|w| {
            w.value().is_some_and(|v| {
                ["--overwrite", "--recursive-unlink", "--unlink-first"].contains(&v)
            })
        }) || mode.contains(&'U');
        // From a pipe (`git archive HEAD | tar -x`): what it overwrites is not known.
        let from_pipe = archives.is_empty() || archives.iter().any(|f| f.is("-"));
        // GNU tar replaces an existing file with the archive's by default (pass 2, R6).
        if mode.contains(&'x') && !keeps {
            let why = if forced || from_pipe {
                "`tar -x` overwrites existing files with an archive's (forced, or an archive read from a pipe)"
            } else {
                "`tar -x` replaces existing files with the archive's (`-k`/`--skip-old-files` keeps them)"
            };
            a.flag(Destructive, why.into());
        }
        let targets = if mode.contains(&'x') {
            &dirs
        } else {
            &archives
        };
        for t in targets {
            if !t.is("-") {
                a.write_target(t, "`tar`");
            }
        }
    } else if mode.contains(&'t') || mode.contains(&'O') {
        a.read_only("tar");
    } else {
        a.flag(Unknown, "`tar` without a known mode".into());
    }
}

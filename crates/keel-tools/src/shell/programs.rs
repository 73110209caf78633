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
    "csplit", "mkfifo", "mknod", "mktemp", "sponge", "dos2unix", "unix2dos", "zip", "bzip2",
    "bunzip2", "xz", "unxz", "7z", "ar", "strip", "setfacl", "chattr", "javac", "cc", "c++", "gcc",
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
    if is_interpreter(program) {
        return interpreter(a, program, args, stdin);
    }
    if SHELLS.contains(&program) {
        return shell(a, program, args, stdin);
    }
    if super::toolchains::judge(a, program, args) {
        return;
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
        "time" => wrap(a, "time", skip_flags(args, &["-p", "-v"]), stdin),
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
            if let Some(action) = args.first().filter(|w| !w.could_be_option()) {
                script_from_words(a, "trap", std::slice::from_ref(action));
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
            for f in &files {
                a.write_target(f, "`tee`");
            }
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
        "yq" => {
            if has_option(args, &['i'], &["--inplace"]) {
                a.flag(WritesWorkspace, "`yq -i` edits files in place".into());
            } else {
                a.read_only("yq");
            }
        }
        "tar" => tar(a, args),
        "unzip" => {
            if has_option(args, &['l', 't', 'Z', 'v'], &[]) || has_option(args, &['p'], &[]) {
                a.read_only("unzip");
            } else {
                a.flag(WritesWorkspace, "`unzip` extracts files".into());
            }
        }
        "gzip" | "gunzip" | "zstd" | "unzstd" | "lz4" => {
            if has_option(args, &['c', 'l', 't'], &["--stdout", "--list", "--test"]) {
                a.read_only(program);
            } else {
                a.flag(
                    WritesWorkspace,
                    format!("`{program}` replaces files with (de)compressed ones"),
                );
            }
        }
        "rsync" => {
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
        "less" | "more" | "most" => {
            option_writes(a, program, args, &['o', 'O'], &["--log-file", "--LOG-FILE"]);
        }
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
    let ops = positionals(
        args,
        &["-t", "--target-directory", "-m", "--mode", "-o", "-g", "-S"],
    );
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
            a.flag(WritesWorkspace, format!("`{program}` {what}"));
        }
    }
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
    for (i, w) in args.iter().enumerate() {
        let Some(v) = w.value() else { continue };
        if i == 0 && !v.starts_with('-') {
            mode.extend(v.chars());
        } else if let Some(l) = v.strip_prefix("--") {
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
            mode.extend(flags);
        }
    }
    let writes = mode
        .iter()
        .any(|c| matches!(c, 'x' | 'c' | 'r' | 'u' | 'A'));
    if writes && !mode.contains(&'O') {
        a.flag(WritesWorkspace, "`tar` creates or extracts archives".into());
    } else if mode.contains(&'t') || mode.contains(&'O') {
        a.read_only("tar");
    } else {
        a.flag(Unknown, "`tar` without a known mode".into());
    }
}

//! Command rules (`git push`, `make lint`): word prefixes matched against each simple command
//! of a parsed line, never against the line's text.
//!
//! - A **deny** (or ask) rule matches when *any* simple command of the line starts with its
//!   words — nested ones included (`env rm`, `bash -c 'rm …'`, `xargs rm`, `$(rm …)`). The
//!   program is compared by its name (`/bin/rm` is `rm`). When a word the rule would compare
//!   is not known before the line runs (`$cmd`, `git $sub`), the rule *may* match
//!   ([`RuleMatch::Maybe`]): callers treat that as a match that needs a person.
//! - An **allow** rule vouches for one simple command only ([`Analyzer`]'s vouching): the
//!   program (a bare name or a system binary path, never `./git`), its words matched whole
//!   (`git status` does not match `git statusx`), every word of the command literal. Whatever
//!   else the line runs — another command after `;`, `&&` or `|`, a substitution, a
//!   redirection, the payload of a wrapper (`env`, `timeout`, `xargs`, `sh -c`, `find -exec`)
//!   — is judged on its own.
//!
//! [`Analyzer`]: super::safety::Analyzer

use super::safety::program_name;
use super::words::Word;

/// How a rule relates to a command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleMatch {
    /// A simple command of the line starts with the rule's words.
    Yes,
    /// A word the rule would compare is not known before the line runs.
    Maybe,
    No,
}

/// A rule's words (`"git push"` → `git`, `push`); `None` when it has none.
pub(crate) fn rule_words(rule: &str) -> Option<Vec<String>> {
    let words: Vec<String> = rule.split_whitespace().map(str::to_string).collect();
    (!words.is_empty()).then_some(words)
}

/// Whether the simple command `words` starts with `rule` (program compared by name). Options
/// between the program and the rule's next word do not hide it: `git -c a=b push`,
/// `git --no-pager push` and `git -C . push` match `git push` (Yes, for programs whose global
/// options Keel knows); for other programs a word after an option may be that option's value,
/// so `npm --prefix x publish` *may* match `npm publish` (Maybe: a person decides). The rule's
/// words from its first option on are compared by meaning, not spelling
/// ([`super::rule_options`]): `rm -r -f src`, `rm -fr src` and `rm --recursive --force src`
/// match `rm -rf`.
pub(crate) fn prefix_match(rule: &[String], words: &[Word]) -> RuleMatch {
    let (head, tail) = super::rule_options::split_at_options(rule);
    let program = words
        .first()
        .and_then(|w| w.value())
        .map(program_name)
        .unwrap_or_default();
    let mut best = RuleMatch::No;
    for (found, end, certain) in head_matches(head, words) {
        let found = match found {
            RuleMatch::Yes if !tail.is_empty() => {
                super::rule_options::tail_match(program, tail, words.get(end..).unwrap_or(&[]))
            }
            other => other,
        };
        let found = match found {
            RuleMatch::Yes if !certain => RuleMatch::Maybe,
            other => other,
        };
        match found {
            RuleMatch::Yes => return RuleMatch::Yes,
            RuleMatch::Maybe => best = RuleMatch::Maybe,
            RuleMatch::No => {}
        }
    }
    best
}

/// Where `words` may start with the rule's leading words `head` (program and subcommands):
/// each a match, the index just past the matched words, and whether a match is certain (not
/// for a program whose options Keel does not know: a word after one may be its value).
fn head_matches(head: &[String], words: &[Word]) -> Vec<(RuleMatch, usize, bool)> {
    let direct = prefix_match_at(head, words);
    if direct != RuleMatch::No || head.len() < 2 {
        return vec![(direct, head.len(), true)];
    }
    if prefix_match_at(&head[..1], words) != RuleMatch::Yes {
        return vec![(RuleMatch::No, 0, true)];
    }
    let program = words.first().and_then(|w| w.value()).map(program_name);
    let rest = &words[1..];
    let at = |start: Option<usize>, certain: bool| match start {
        Some(s) => (
            prefix_match_at_words(&head[1..], &rest[s..]),
            1 + s + head.len() - 1,
            certain,
        ),
        None => (RuleMatch::Maybe, 0, certain),
    };
    match program.and_then(global_value_options) {
        Some(takes_value) => {
            let start = after_global_options(rest, |o| takes_value.contains(&o));
            // `git WORD`: an alias or push's plumbing may be the rule's command (R8-26).
            if program == Some("git")
                && let Some(s) = start
                && let Some(sub) = rest.get(s).and_then(Word::value)
            {
                let end = 1 + s + head.len() - 1;
                match super::git_aliases::stands_for(sub, &head[1], &rest[..s]) {
                    Some(true) if sub != head[1] => {
                        let found = prefix_match_at_words(&head[2..], &rest[s + 1..]);
                        return vec![(found, end, true)];
                    }
                    None => return vec![(RuleMatch::Maybe, end, true)],
                    _ => {}
                }
            }
            vec![at(start, true)]
        }
        // Options of a program Keel does not know: each might or might not take a value.
        None => vec![
            at(after_global_options(rest, |_| false), false),
            at(after_global_options(rest, |o| !o.contains('=')), false),
        ],
    }
}

/// The global options of programs Keel knows that take their value as the next word.
fn global_value_options(program: &str) -> Option<&'static [&'static str]> {
    match program {
        "git" => Some(&[
            "-c",
            "-C",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--super-prefix",
            "--config-env",
            "--exec-path",
            "--list-cmds",
            "--attr-source",
        ]),
        _ => None,
    }
}

/// Where the words after a program's leading options start: options start with `-` (`--`
/// ends them); an option for which `takes_value` holds also consumes the next word. `None`
/// when an option word is not known before the line runs.
fn after_global_options(words: &[Word], takes_value: impl Fn(&str) -> bool) -> Option<usize> {
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let text = w.value()?;
        if text == "--" {
            return Some(i + 1);
        }
        if !text.starts_with('-') || text == "-" {
            return Some(i);
        }
        if takes_value(text) {
            // A value not known before the line runs may split into more words.
            words.get(i + 1).map_or(Some(""), Word::value)?;
            i += 2;
        } else {
            i += 1;
        }
    }
    Some(words.len().min(i))
}

/// Whether `words` (a command's words after its program) start with the rule's later words.
fn prefix_match_at_words(rule: &[String], words: &[Word]) -> RuleMatch {
    for (i, want) in rule.iter().enumerate() {
        let Some(w) = words.get(i) else {
            return RuleMatch::No;
        };
        let Some(have) = w.value() else {
            return RuleMatch::Maybe;
        };
        if have != want {
            return RuleMatch::No;
        }
    }
    RuleMatch::Yes
}

/// The literal prefix comparison, word for word from the program on.
fn prefix_match_at(rule: &[String], words: &[Word]) -> RuleMatch {
    for (i, want) in rule.iter().enumerate() {
        let Some(w) = words.get(i) else {
            return RuleMatch::No;
        };
        let Some(have) = w.value() else {
            // `$x` may expand to any word, or to several.
            return RuleMatch::Maybe;
        };
        let same = if i == 0 {
            program_name(have) == want
        } else {
            have == want
        };
        if !same {
            return RuleMatch::No;
        }
    }
    RuleMatch::Yes
}

/// Whether an allow rule vouches for the simple command `words`: the words match whole, the
/// program is the real one (a bare name, or the same name in a system binary directory),
/// and every word is known before it runs.
pub(crate) fn vouches(rule: &[String], words: &[Word]) -> bool {
    if words.len() < rule.len() || words.iter().any(|w| !w.literal) {
        return false;
    }
    // A rule covers a command by what it does: options after the rule's words that make it
    // run another program or load other code are not covered (R8-11).
    if swaps_program(words, rule.len()) {
        return false;
    }
    rule.iter().zip(words).enumerate().all(|(i, (want, w))| {
        if i == 0 {
            let name = if w.text.contains('/') {
                match super::safety::system_program(&w.text) {
                    Some(p) => p,
                    None => return false,
                }
            } else {
                w.text.as_str()
            };
            name == want
        } else {
            w.text == *want
        }
    })
}

/// Options that make a program run another program or load code it names, beyond what its
/// command does without them: `(program or python module, short letters, long options)`.
/// A short letter also counts inside a cluster (`-qp plug`) and with its value attached
/// (`-ptools.plug`); a long option with `=value` too.
const PROGRAM_SWAPS: &[(&str, &str, &[&str])] = &[
    // `--config target.*.linker=…`, `build.rustc-wrapper=…`, `-Z` unstable flags.
    ("cargo", "Z", &["--config"]),
    // A plug-in module, another ini file (its addopts), another root or conftest bound,
    // an ini override (`-o addopts=-p x`), a debugger class imported by name.
    (
        "pytest",
        "pco",
        &[
            "--config-file",
            "--rootdir",
            "--override-ini",
            "--confcutdir",
            "--pdbcls",
            "--inifile",
        ],
    ),
    // `go test -exec prog`, `-toolexec prog`, an overlay replacing source files.
    (
        "go",
        "",
        &[
            "-exec",
            "-toolexec",
            "--exec",
            "--toolexec",
            "-overlay",
            "--overlay",
        ],
    ),
    // A module preloaded by name.
    (
        "node",
        "r",
        &["--require", "--import", "--loader", "--experimental-loader"],
    ),
    // Another shell, node options, another npm configuration or package.
    (
        "npm",
        "C",
        &[
            "--script-shell",
            "--node-options",
            "--userconfig",
            "--globalconfig",
            "--prefix",
        ],
    ),
    // Another makefile, code evaluated, another include directory, another directory.
    (
        "make",
        "fEIC",
        &[
            "--file",
            "--makefile",
            "--eval",
            "--include-dir",
            "--directory",
        ],
    ),
];

/// Whether the words of a command after its first `covered` (a rule's) hold an option that
/// swaps the program it runs ([`PROGRAM_SWAPS`]); for make, any variable override
/// (`SHELL=…`, `CC=…`) does.
fn swaps_program(words: &[Word], covered: usize) -> bool {
    let Some(program) = words.first().and_then(Word::value).map(program_name) else {
        return false;
    };
    // `python3 -m pytest`: the module's options.
    let (key, from) = match words.get(1).zip(words.get(2)) {
        Some((m, module)) if program.starts_with("python") && m.is("-m") => {
            (module.text.as_str(), 3)
        }
        _ => (program, 1),
    };
    let key = if key == "py.test" { "pytest" } else { key };
    let Some((_, short, long)) = PROGRAM_SWAPS.iter().find(|(p, _, _)| *p == key) else {
        return false;
    };
    let rest = words.get(covered.max(from)..).unwrap_or(&[]);
    let mut after_dashdash = false;
    rest.iter().enumerate().any(|(i, w)| {
        let t = w.text.as_str();
        if after_dashdash || t == "--" {
            after_dashdash = true;
            return false;
        }
        if key == "make" && !t.starts_with('-') && t.contains('=') {
            return true;
        }
        if let Some(name) = t.strip_prefix("--") {
            let name = name.split('=').next().unwrap_or(name);
            return long.iter().any(|l| l.trim_start_matches('-') == name);
        }
        if long.contains(&t.split('=').next().unwrap_or(t)) {
            return true;
        }
        let Some(cluster) = t.strip_prefix('-') else {
            return false;
        };
        // `-p no:cacheprovider` / `-pno:x` only turns a plug-in off.
        let disables = |rest: &str| rest.starts_with("no:");
        cluster.char_indices().any(|(at, c)| {
            short.contains(c)
                && !(key == "pytest"
                    && c == 'p'
                    && match &cluster[at + 1..] {
                        "" => rest.get(i + 1).is_some_and(|n| disables(&n.text)),
                        attached => disables(attached),
                    })
        })
    })
}

/// The strongest match of `rule` against any of `commands`.
pub(crate) fn match_any(rule: &str, commands: &[Vec<Word>]) -> RuleMatch {
    let Some(rule) = rule_words(rule) else {
        return RuleMatch::No;
    };
    let mut best = RuleMatch::No;
    for words in commands {
        match prefix_match(&rule, words) {
            RuleMatch::Yes => return RuleMatch::Yes,
            RuleMatch::Maybe => best = RuleMatch::Maybe,
            RuleMatch::No => {}
        }
    }
    best
}

/// [`RuleMatch::Maybe`] when the rule's words follow a later word of a simple command (a
/// program may run its arguments as a command: `taskset 1 rm f`, `setpriv rm f`) or start
/// within a word of several words (`script -qc "rm f"`, `su -c 'git push'`,
/// `python3 -c "os.system('curl x')"`); else No.
pub(crate) fn match_as_payload(rule: &str, commands: &[Vec<Word>]) -> RuleMatch {
    let Some(rule) = rule_words(rule) else {
        return RuleMatch::No;
    };
    for words in commands {
        for (i, w) in words.iter().enumerate() {
            if i > 0 && prefix_match(&rule, &words[i..]) != RuleMatch::No {
                return RuleMatch::Maybe;
            }
            // Code given inline names its commands between quotes and brackets too
            // (`os.system('curl x')`, `run(["git", "push"])`).
            let separator = |c: char| c.is_whitespace() || "'\"`;()[]{},|&<>".contains(c);
            let Some(text) = w.value().filter(|t| t.contains(separator)) else {
                continue;
            };
            let inner: Vec<Word> = text
                .split(separator)
                .filter(|t| !t.is_empty())
                .map(Word::lit)
                .collect();
            if (0..inner.len()).any(|k| prefix_match(&rule, &inner[k..]) != RuleMatch::No) {
                return RuleMatch::Maybe;
            }
        }
    }
    RuleMatch::No
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::CommandSafety;

    fn allow(rules: &[&str], cmd: &str) -> crate::shell::SafetyClass {
        let rules: Vec<String> = rules.iter().map(|s| s.to_string()).collect();
        CommandSafety::with_allow(&rules).classify(cmd).class
    }

    #[test]
    fn an_allow_rule_covers_its_own_command_and_nothing_else() {
        use crate::shell::SafetyClass::*;
        let rules = &["git status"];
        assert_eq!(allow(rules, "git status"), ReadOnly);
        assert_eq!(allow(rules, "git status --short"), ReadOnly);
        for cmd in [
            "git status; rm -rf src",
            "git status && rm -rf src",
            "git status || rm -rf src",
            "git status | sh",
            "git status $(rm -rf src)",
            "rm -rf src; git status",
            "env rm -rf src",
            "timeout 5 rm -rf src",
            "bash -c 'git status; rm -rf src'",
        ] {
            assert_ne!(allow(rules, cmd), ReadOnly, "{cmd}");
        }
        assert_eq!(
            allow(rules, "git status > /etc/x"),
            Destructive,
            "redirections judged"
        );
        // Word boundaries, the real program, literal words.
        assert_ne!(allow(&["cargo test"], "cargo testx"), WritesWorkspace);
        assert_eq!(allow(&["cargo test"], "cargo testx"), Unknown);
        assert_eq!(allow(&["cargo test"], "cargo test -p x"), ReadOnly);
        assert_eq!(allow(&["cargo test"], "./cargo test"), Unknown);
        assert_eq!(allow(&["cargo test"], "/usr/bin/cargo test"), ReadOnly);
        assert_eq!(allow(&["cargo test"], "cargo test $NAME"), Unknown);
        // A wrapper's rule does not carry its payload; the payload's own rule does.
        assert_eq!(allow(&["timeout"], "timeout 5 rm -rf src"), Destructive);
        assert_eq!(allow(&["cargo test"], "timeout 60 cargo test"), ReadOnly);
        assert_eq!(
            allow(&["cargo test"], "env RUST_LOG=1 cargo test"),
            ReadOnly
        );
        assert_eq!(allow(&["bash"], "bash -c 'rm -rf src'"), Destructive);
        assert_eq!(allow(&["xargs"], "ls | xargs rm"), Destructive);
        assert_eq!(allow(&["find"], "find . -exec rm {} +"), Destructive);
        assert_eq!(
            allow(
                &["cargo test", "git status"],
                "cargo test 2>&1 | tail -5 && git status"
            ),
            ReadOnly
        );
    }

    #[test]
    fn an_allow_rule_does_not_cover_options_that_swap_the_program() {
        // Red-team pass 8, R8-11: these ran under allow rules for `cargo test` and
        // `python3 -m pytest`; each is `unknown` (or asked) without the rule.
        use crate::shell::SafetyClass::*;
        let rules = &[
            "cargo test",
            "python3 -m pytest",
            "pytest",
            "go test",
            "npm test",
            "make test",
            "node scripts/t.js",
        ];
        for cmd in [
            "cargo test --offline --config 'target.x86_64-unknown-linux-gnu.linker=\"tools/ld.sh\"'",
            "cargo test --config=build.rustc-wrapper=tools/w.sh",
            "cargo test -Zbuild-std",
            "python3 -m pytest -q -p tools.plug",
            "python3 -m pytest -ptools.plug",
            "python3 -m pytest -qp tools.plug",
            "python3 -m pytest --rootdir other",
            "python3 -m pytest -c other.ini",
            "python3 -m pytest -o addopts=-ptools.plug",
            "pytest --pdbcls=tools.dbg:D",
            "go test -exec tools/run ./...",
            "npm test --script-shell=tools/sh.sh",
            "make test SHELL=tools/sh.sh",
            "make test -f other.mk",
            "node scripts/t.js --require ./tools/x.js",
        ] {
            assert_ne!(allow(rules, cmd), ReadOnly, "{cmd}");
        }
        for cmd in [
            "cargo test",
            "cargo test -p keel-tools --lib rules -- --nocapture",
            "python3 -m pytest -q tests/test_a.py -k 'not slow'",
            "python3 -m pytest -p no:cacheprovider",
            "pytest -x tests",
            "go test ./...",
            "make test",
            "cargo test -- --config",
        ] {
            assert_eq!(allow(rules, cmd), ReadOnly, "{cmd}");
        }
        // The rule's own words are what the user approved.
        assert_eq!(
            allow(
                &["cargo test --config net.offline=true"],
                "cargo test --config net.offline=true"
            ),
            ReadOnly
        );
    }

    #[test]
    fn deny_rules_see_nested_commands_and_unknown_words() {
        let c = |cmd: &str| crate::shell::classify(cmd);
        for cmd in [
            "rm -rf src",
            "/bin/rm x",
            "ls; rm x",
            "echo $(rm x)",
            "env rm x",
            "bash -c 'rm x'",
            "ls | xargs rm",
            "find . -exec rm {} +",
        ] {
            assert_eq!(c(cmd).rule_match("rm"), RuleMatch::Yes, "{cmd}");
        }
        assert_eq!(c("$cmd x").rule_match("rm"), RuleMatch::Maybe);
        assert_eq!(
            c("git $sub origin").rule_match("git push"),
            RuleMatch::Maybe
        );
        assert_eq!(c("git pull").rule_match("git push"), RuleMatch::No);
        // Red-team B19: git's global options before the subcommand do not hide it.
        for cmd in [
            "git -c user.name=x push",
            "git --no-pager push origin main",
            "git -C . push",
            "git -C sub -c a=b --git-dir .git push",
            "git --git-dir=.git push",
            "command git -c x=y push",
            "/usr/bin/git -p push",
            "git -- push",
        ] {
            assert_eq!(c(cmd).rule_match("git push"), RuleMatch::Yes, "{cmd}");
        }
        assert_eq!(
            c("git -C push status").rule_match("git push"),
            RuleMatch::No
        );
        assert_eq!(c("git -c $x push").rule_match("git push"), RuleMatch::Maybe);
        // Another program's options: a word after an option may be its value.
        assert_eq!(
            c("npm --prefix x publish").rule_match("npm publish"),
            RuleMatch::Maybe
        );
        assert_eq!(
            c("docker --debug push img").rule_match("docker push"),
            RuleMatch::Maybe
        );
        assert_eq!(
            c("npm --prefix x install").rule_match("npm publish"),
            RuleMatch::No
        );
        assert_eq!(c("git pushx").rule_match("git push"), RuleMatch::Maybe);
        // Red-team pass 8, R8-26's rest: aliases and push's plumbing reach `git push`.
        for cmd in [
            "git -c alias.p=push p",
            "git -c alias.p=push -c alias.q=p q origin",
            "git send-pack origin main",
            "git http-push https://example.com/r.git main",
        ] {
            assert_eq!(c(cmd).rule_match("git push"), RuleMatch::Yes, "{cmd}");
        }
        for cmd in [
            "git -c alias.p='!git push' p",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.q GIT_CONFIG_VALUE_0=push git q",
            "git p",
            "git -c $a p",
            "git remote-https origin https://example.com/r.git",
        ] {
            assert_eq!(c(cmd).rule_match("git push"), RuleMatch::Maybe, "{cmd}");
        }
        // Git's own other commands are not `git push`.
        for cmd in [
            "git -c alias.p=status p",
            "git log",
            "git status",
            "git remote -v",
        ] {
            assert_eq!(c(cmd).rule_match("git push"), RuleMatch::No, "{cmd}");
        }
        assert_eq!(c("ls").rule_match("rm"), RuleMatch::No);
    }

    #[test]
    fn rule_options_match_by_meaning_not_spelling() {
        // Red-team pass 8, R8-26: `rm -r -f src` and `rm -fr src` ran under a rule `rm -rf`.
        let c = |cmd: &str| crate::shell::classify(cmd);
        for cmd in [
            "rm -rf src",
            "rm -r -f src",
            "rm -fr src",
            "rm -Rf src",
            "rm src -r -f",
            "rm --recursive --force src",
            "rm --rec --for src",
            "rm -r -v --force src",
            "command rm -f -r src",
            "find . -name x -exec rm -r -f {} +",
            "sh -c 'rm -fr src'",
        ] {
            assert_eq!(c(cmd).rule_match("rm -rf"), RuleMatch::Yes, "{cmd}");
        }
        for cmd in ["rm -r src", "rm -f x", "rm -- -rf", "rm -i src"] {
            assert_eq!(c(cmd).rule_match("rm -rf"), RuleMatch::No, "{cmd}");
        }
        assert_eq!(c("rm $FLAGS src").rule_match("rm -rf"), RuleMatch::Maybe);
        assert_eq!(c("ls | xargs rm -r").rule_match("rm -rf"), RuleMatch::Maybe);
        for cmd in [
            "git push --force origin main",
            "git push -f origin main",
            "git -c a.b=c push origin main -f",
            "git push --forc origin",
        ] {
            assert_eq!(
                c(cmd).rule_match("git push --force"),
                RuleMatch::Yes,
                "{cmd}"
            );
        }
        assert_eq!(
            c("git push origin main").rule_match("git push --force"),
            RuleMatch::No
        );
        assert_eq!(
            c("git push --force-with-lease origin").rule_match("git push --force"),
            RuleMatch::No
        );
        assert_eq!(
            c("git push -f upstream").rule_match("git push --force origin"),
            RuleMatch::No
        );
        assert_eq!(
            c("git push upstream -f origin").rule_match("git push --force origin"),
            RuleMatch::Yes
        );
        // Code given inline names the command between quotes and brackets.
        for cmd in [
            "python3 -c \"import os;os.system('curl x')\"",
            "python3 -c 'import subprocess; subprocess.run([\"curl\", \"x\"])'",
        ] {
            assert_eq!(c(cmd).rule_match("curl"), RuleMatch::Maybe, "{cmd}");
        }
    }

    #[test]
    fn deny_rules_see_commands_run_by_programs_keel_does_not_know() {
        // Red-team pass 2, R10: each of these ran `rm` under `deny = ["run_command:rm"]`.
        let c = |cmd: &str| crate::shell::classify(cmd);
        for cmd in [
            "taskset 1 rm f",
            "setpriv rm f",
            "chrt -o 0 rm f",
            "prlimit --nofile=100 rm f",
            "script -qc \"rm f\" /dev/null",
            "su -c 'rm -rf src' me",
            "flock /tmp/l rm f",
        ] {
            assert_ne!(c(cmd).rule_match("rm"), RuleMatch::No, "{cmd}");
        }
        assert_ne!(
            c("strace -f git push origin").rule_match("git push"),
            RuleMatch::No
        );
        // A line that only reads does not run its arguments.
        for cmd in [
            "grep rm notes.txt",
            "echo rm",
            "man rm",
            "git log --grep 'git push'",
        ] {
            assert_eq!(c(cmd).rule_match("rm"), RuleMatch::No, "{cmd}");
        }
        assert_eq!(c("taskset 1 ls").rule_match("rm"), RuleMatch::No);
    }
}

//! Code a command runs without showing it as a command: variables that change which program
//! or configuration runs, and text the grammar does not expose (bash's `/dev/tcp`, other
//! processes' `/proc` files, command substitutions inside arithmetic subscripts).

use super::safety::{Analyzer, SafetyClass};

/// Variables that change which code runs when set for (or before) a command.
const CODE_ENV: &[&str] = &[
    "PATH",
    "IFS",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    "NODE_OPTIONS",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
];

/// Variables known to change only text, colour, locale messages, time zone or logging when
/// set for a command. Any other variable may be a program's option variable (`TAR_OPTIONS`
/// takes `--checkpoint-action=exec=…`, `GZIP`, `XZ_OPT`) or a module path (`GCONV_PATH`,
/// `LOCPATH`): set for a command, it is not known to be read-only (red-team B24).
const HARMLESS_ENV: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_MONETARY",
    "TZ",
    "TERM",
    "COLUMNS",
    "LINES",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "COLORTERM",
    "CI",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "RUST_LIB_BACKTRACE",
    "RUST_TEST_THREADS",
    "RUST_TEST_NOCAPTURE",
    "CARGO_TERM_COLOR",
    "CARGO_TERM_VERBOSE",
    "CARGO_INCREMENTAL",
    "NODE_ENV",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONHASHSEED",
    "PYTHONIOENCODING",
    "GIT_PAGER_IN_USE",
    "SOURCE_DATE_EPOCH",
    "TMPDIR",
    "DEBIAN_FRONTEND",
];

/// True when setting `name` for a command (`NAME=v cmd`, `env NAME=v cmd`, `export NAME=v`)
/// may change what the program does beyond its arguments: every variable but the few known
/// to be harmless ([`HARMLESS_ENV`]), and every variable [`is_code_env`] names.
pub(crate) fn changes_command(name: &str) -> bool {
    is_code_env(name) || !HARMLESS_ENV.contains(&name)
}

/// True when setting `name` can change which code a program runs or which configuration it
/// reads (a planted config names programs): loader and interpreter variables, `HOME` and the
/// XDG directories (where configs live), every `GIT_*` variable, exported bash functions.
pub(crate) fn is_code_env(name: &str) -> bool {
    CODE_ENV.contains(&name)
        || matches!(
            name,
            "HOME"
                | "ZDOTDIR"
                | "INPUTRC"
                | "PYTHONHOME"
                | "RUBYLIB"
                | "NODE_PATH"
                | "CARGO_HOME"
                | "RUSTUP_HOME"
                | "RUSTFLAGS"
                | "CARGO_ENCODED_RUSTFLAGS"
                | "NPM_CONFIG_USERCONFIG"
        )
        || [
            "LD_",
            "DYLD_",
            "GIT_",
            "XDG_",
            "BASH_FUNC_",
            "CARGO_TARGET_",
            "NPM_CONFIG_",
        ]
        .iter()
        .any(|p| name.starts_with(p))
}

/// What the grammar does not show as a command: bash's network pseudo-files, other
/// processes' environments, and array subscripts with command substitution, which bash
/// evaluates inside arithmetic (`let 'x=a[$(cmd)]'`, even single-quoted).
pub(crate) fn scan_text(a: &mut Analyzer, src: &str) {
    if src.contains("/dev/tcp/") || src.contains("/dev/udp/") {
        a.flag(
            SafetyClass::Network,
            "`/dev/tcp` or `/dev/udp` opens a network connection".into(),
        );
    }
    if src.contains("/proc/")
        && ["environ", "/mem", "/maps", "/cmdline", "/fd/"]
            .iter()
            .any(|n| src.contains(n))
    {
        a.flag(
            SafetyClass::Unknown,
            "reads another process's environment or memory through /proc".into(),
        );
    }
    let subscript_runs_code = src.match_indices('[').any(|(i, _)| {
        let inner = &src[i + 1..];
        let inner = &inner[..inner.find(']').unwrap_or(inner.len())];
        inner.contains("$(") || inner.contains('`')
    });
    if subscript_runs_code {
        a.flag(
            SafetyClass::Unknown,
            "an array subscript holds a command substitution, which arithmetic runs".into(),
        );
    }
}

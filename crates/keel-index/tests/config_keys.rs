//! Reports that name a config key or a command-line option find the code that defines or
//! reads it, above files that only use the same words (a parameter named like the key, a
//! comment, the docs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fresh, top_ten, write};
use keel_index::SearchKind;

fn lint_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "lint/rules/long_lines.py",
        "\"\"\"Flags lines longer than the configured limit.\"\"\"\n\n\nclass LongLines:\n    def __init__(self, config):\n        self.limit = config.get(\"max_line_length\", 80)\n\n    def check(self, lines):\n        return [n for n, l in enumerate(lines) if len(l) > self.limit]\n",
    );
    write(
        root,
        "lint/cli.py",
        "import argparse\n\n\ndef build_parser():\n    parser = argparse.ArgumentParser(prog=\"lint\")\n    parser.add_argument(\"--max-line-length\", type=int, help=\"longest line allowed\")\n    parser.add_argument(\"paths\", nargs=\"*\")\n    return parser\n",
    );
    // Distractors: the same words as a parameter, in comments and prose.
    write(
        root,
        "lint/wrap.py",
        "import textwrap\n\n\ndef wrap_max_line_length(text, max_line_length=80):\n    \"\"\"Wraps text to the max line length; the line length defaults to 80.\"\"\"\n    # max line length: a long line is wrapped, a short line length is kept\n    return textwrap.wrap(text, max_line_length)\n\n\ndef max_line_length(lines):\n    \"\"\"The max line length of the lines.\"\"\"\n    return max(len(line) for line in lines)\n",
    );
    write(
        root,
        "lint/report.py",
        "def describe(n, length):\n    \"\"\"Line n is too long: its length is over the max.\"\"\"\n    return f\"line {n}: line length {length} over the max line length\"\n",
    );
    write(
        root,
        "docs/config.md",
        "# Config\n\n`max_line_length` sets the max line length (`--max-line-length` on the command line).\n",
    );
    dir
}

fn files(idx: &keel_index::Index, text: &str) -> Vec<String> {
    top_ten(idx, text, SearchKind::File)
        .into_iter()
        .map(|h| h.path)
        .collect()
}

#[test]
fn a_config_key_in_a_report_finds_the_code_reading_it() {
    let repo = lint_repo();
    let (_db, idx) = fresh(repo.path());
    let got = files(
        &idx,
        "max_line_length from the config file is ignored\n\nWith this in `setup.cfg`:\n\n```ini\n[lint]\nmax_line_length = 120\n```\n\nlines of 100 characters are still reported as too long. The max line length should be 120.",
    );
    assert_eq!(got[0], "lint/rules/long_lines.py", "{got:?}");
    // The option that sets the same key comes before the prose.
    let cli = got.iter().position(|p| p == "lint/cli.py");
    let report = got.iter().position(|p| p == "lint/report.py");
    assert!(cli.is_some_and(|c| report.is_none_or(|r| c < r)), "{got:?}");
}

#[test]
fn an_option_in_a_report_finds_where_it_is_defined() {
    let repo = lint_repo();
    let (_db, idx) = fresh(repo.path());
    let got = files(
        &idx,
        "Passing --max-line-length has no effect\n\nRunning `lint --max-line-length 120 src/` still reports lines over 80 characters as too long; the max line length stays at 80.",
    );
    assert_eq!(got[0], "lint/cli.py", "{got:?}");
    assert_eq!(got[1], "lint/rules/long_lines.py", "{got:?}");
}

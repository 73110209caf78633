//! A report naming a registered entry — a linter message by its symbol (`use-yield-from`) or
//! its code (`W0511`) — finds the checker that registers it and the definition that emits
//! it, above files that only share its words (`use`, `yield`, `from`) or show it in docs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fresh, top_ten, write};
use keel_index::SearchKind;

fn linter_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // A checker as long as real ones (over 150 lines: its methods are chunks of their own).
    let filler: String = (0..50)
        .map(|i| format!("\n    def visit_name_{i}(self, node):\n        return node.name_{i}\n"))
        .collect();
    write(
        root,
        "lint/checkers/refactoring.py",
        &(String::from(
            "from lint.checkers.base import BaseChecker\n\n\nclass RefactoringChecker(BaseChecker):\n    name = \"refactoring\"\n    msgs = {\n        \"R1737\": (\n            \"Use 'yield from' directly instead of yielding each element one by one\",\n            \"use-yield-from\",\n            \"Yielding directly from the iterator is faster and arguably cleaner code.\",\n        ),\n        \"R1701\": (\n            \"Consider merging these comparisons\",\n            \"consider-merging-comparisons\",\n            \"Used when several comparisons could be merged.\",\n        ),\n    }\n\n    def visit_for(self, node):\n        if self._only_yields(node):\n            self.add_message(\"use-yield-from\", node=node)\n\n    def visit_compare(self, node):\n        if len(node.ops) > 2:\n            self.add_message(\"consider-merging-comparisons\", node=node)\n\n    def _only_yields(self, node):\n        return len(node.body) == 1 and node.body[0].is_yield\n",
        ) + &filler),
    );
    write(
        root,
        "lint/checkers/misc.py",
        "from lint.checkers.base import BaseChecker\n\n\nclass NotesChecker(BaseChecker):\n    name = \"miscellaneous\"\n    msgs = {\n        \"W0511\": (\"%s\", \"fixme\", \"Used when a warning note as FIXME or TODO is detected.\"),\n    }\n\n    def process_tokens(self, tokens):\n        for token in tokens:\n            if token.is_comment and \"TODO\" in token.text:\n                self.add_message(\"fixme\", args=token.text)\n",
    );
    // Distractors: the message's words as code, as a comment, in the docs and a test.
    write(
        root,
        "lint/checkers/generators.py",
        "from lint.checkers.base import BaseChecker\n\n\nclass GeneratorChecker(BaseChecker):\n    \"\"\"Checks generators: which use yield, which yield from another generator.\"\"\"\n\n    def visit_yield(self, node):\n        # use yield from when the generator yields from an iterator\n        if node.value is None:\n            return\n        self.check_yield_from(node)\n\n    def check_yield_from(self, node):\n        \"\"\"A yield from a generator used as an iterator.\"\"\"\n        return node.value.is_generator\n",
    );
    write(
        root,
        "lint/checkers/base.py",
        "class BaseChecker:\n    msgs = {}\n\n    def add_message(self, symbol, node=None, args=None):\n        self.linter.add_message(symbol, node, args)\n",
    );
    write(
        root,
        "doc/messages/use-yield-from.rst",
        "use-yield-from (R1737)\n======================\n\nUse 'yield from' directly instead of yielding each element one by one from a generator.\n",
    );
    write(
        root,
        "tests/functional/use_yield_from.py",
        "def gen(items):\n    for item in items:  # [use-yield-from]\n        yield item\n",
    );
    dir
}

fn search(idx: &keel_index::Index, text: &str, kind: SearchKind) -> Vec<(String, String)> {
    top_ten(idx, text, kind)
        .into_iter()
        .map(|h| (h.path, h.symbol.unwrap_or_default()))
        .collect()
}

#[test]
fn a_title_naming_a_message_finds_the_checker_that_registers_it() {
    let repo = linter_repo();
    let (_db, idx) = fresh(repo.path());
    let got = search(
        &idx,
        "False positive for `use-yield-from` for generators yielding from iterators",
        SearchKind::File,
    );
    assert_eq!(got[0].0, "lint/checkers/refactoring.py", "{got:?}");
    // By its code as well.
    let got = search(
        &idx,
        "W0511: Doesn't detect TODO in docstrings",
        SearchKind::File,
    );
    assert_eq!(got[0].0, "lint/checkers/misc.py", "{got:?}");
}

#[test]
fn a_title_naming_a_message_finds_the_definition_that_emits_it() {
    let repo = linter_repo();
    let (_db, idx) = fresh(repo.path());
    let got = search(
        &idx,
        "False positive for use-yield-from when the generator yields from an iterator",
        SearchKind::Symbol,
    );
    let emits = got.iter().position(|(p, s)| {
        p == "lint/checkers/refactoring.py" && s == "RefactoringChecker.visit_for"
    });
    let distractor = got
        .iter()
        .position(|(p, _)| p == "lint/checkers/generators.py");
    assert!(
        emits.is_some_and(|e| e < 3 && distractor.is_none_or(|d| e < d)),
        "{got:?}"
    );
}

#[test]
fn prose_hyphenations_and_urls_add_nothing() {
    let repo = linter_repo();
    let (_db, idx) = fresh(repo.path());
    // No file holds these as strings: no result claims a registered name.
    for text in [
        "A non-deterministic yield from a generator",
        "Yield from a generator, see https://example.com/use-yield-from and --use-yield-from",
    ] {
        let hits = top_ten(&idx, text, SearchKind::File);
        assert!(!hits.is_empty());
        for h in hits {
            assert!(
                !h.why.iter().any(|w| w.contains("as a string")),
                "{:?}",
                h.why
            );
        }
    }
}

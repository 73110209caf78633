//! A one-line description of a fault asks for the code behind a behaviour: the source that
//! does it ranks above the prose that shares the title's words — the project's changelog
//! (which holds every earlier fix's description, under a bare name like `CHANGES`), its
//! authors file and its docs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fresh, top_ten, write};
use keel_index::SearchKind;

fn docs_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // Unrelated modules, so that the report's words are rare as in a real project.
    for i in 0..40 {
        write(
            root,
            &format!("doctool/util/mod_{i}.py"),
            &format!(
                "def helper_{i}(value):\n    return value + {i}\n\n\nclass Thing{i}:\n    size = {i}\n"
            ),
        );
    }
    write(
        root,
        "doctool/writers/html.py",
        "class HTMLTranslator:\n    \"\"\"The HTML5 writer.\"\"\"\n\n    def visit_glossary(self, node):\n        self.body.append('<dl class=\"glossary\">')\n\n    def visit_term(self, node):\n        # several terms for one description share one <dt> each\n        self.body.append('<dt>')\n\n    def depart_term(self, node):\n        self.body.append('</dt>')\n",
    );
    write(
        root,
        "doctool/domains/std.py",
        "class Glossary:\n    \"\"\"A glossary: terms and their description.\"\"\"\n\n    def run(self):\n        return self.parse_terms(self.content)\n\n    def parse_terms(self, lines):\n        return [l for l in lines if l]\n",
    );
    write(
        root,
        "CHANGES",
        "Release 2.1\n===========\n\nBugs fixed\n----------\n\n* HTML: invalid HTML5 for a glossary term with several descriptions\n* Fix a crash on an empty table\n",
    );
    write(
        root,
        "doc/usage/lists.rst",
        "Glossary\n========\n\nA glossary lists terms; multiple terms may share one description.\nThe HTML builder writes it as an HTML5 description list.\n",
    );
    dir
}

#[test]
fn a_fault_title_finds_the_source_above_the_changelog_and_docs() {
    let repo = docs_project();
    let (_db, idx) = fresh(repo.path());
    let got: Vec<String> = top_ten(
        &idx,
        "Fix invalid HTML5 for a glossary having multiple terms for one description",
        SearchKind::File,
    )
    .into_iter()
    .map(|h| {
        println!("{} {}", h.score, h.path);
        h.path
    })
    .collect();
    let at = |p: &str| got.iter().position(|g| g == p).unwrap_or(usize::MAX);
    assert!(
        at("doctool/writers/html.py") < at("CHANGES"),
        "the writer must rank above the changelog: {got:?}"
    );
    assert!(
        at("doctool/writers/html.py") < at("doc/usage/lists.rst"),
        "the writer must rank above the docs: {got:?}"
    );
}

//! A one-line query that names a module by its dotted path (`doctool.ext.viewcode`, as a
//! title or a changelog entry does) finds that module, as a long report's dotted names do —
//! even when other files hold more of the title's words.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fresh, top_ten, write};
use keel_index::SearchKind;

fn extensions_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // Unrelated modules, so that the title's words are rare as in a real project.
    for i in 0..40 {
        write(
            root,
            &format!("doctool/util/mod_{i}.py"),
            &format!("def helper_{i}(value):\n    return value + {i}\n"),
        );
    }
    write(
        root,
        "doctool/ext/viewcode.py",
        "def collect_pages(app):\n    for name, entry in app.env.modules.items():\n        yield name, entry\n",
    );
    write(
        root,
        "doctool/builders/html.py",
        "class PageBuilder:\n    \"\"\"Writes each page; a page without source gets an empty link.\"\"\"\n\n    def write_page(self, page, source):\n        if source is None:\n            return self.empty_link(page)\n        return self.link(page, source)\n",
    );
    write(
        root,
        "doctool/themes/basic/static/jquery-3.5.1.js",
        "function link(page, source) { return page + source; }\nfunction emptyLink(page) { return page; }\n",
    );
    dir
}

#[test]
fn a_title_naming_a_module_by_its_dotted_path_finds_it() {
    let repo = extensions_project();
    let (_db, idx) = fresh(repo.path());
    let hits = top_ten(
        &idx,
        "Links to source pages are empty in doctool.ext.viewcode",
        SearchKind::File,
    );
    for h in &hits {
        println!("{} {} {:?}", h.score, h.path, h.why);
    }
    assert_eq!(
        hits.first().map(|h| h.path.as_str()),
        Some("doctool/ext/viewcode.py"),
        "the named module must come first: {hits:?}"
    );
    assert!(
        hits[0]
            .why
            .iter()
            .any(|w| w.contains("doctool.ext.viewcode")),
        "and say why: {:?}",
        hits[0].why
    );
}

#[test]
fn a_web_library_copied_in_at_a_release_ranks_below_the_source() {
    let repo = extensions_project();
    let (_db, idx) = fresh(repo.path());
    let got: Vec<String> = top_ten(&idx, "empty link for a page source", SearchKind::File)
        .into_iter()
        .map(|h| h.path)
        .collect();
    let at = |p: &str| got.iter().position(|g| g == p).unwrap_or(usize::MAX);
    assert!(
        at("doctool/builders/html.py") < at("doctool/themes/basic/static/jquery-3.5.1.js"),
        "the builder must rank above the copied-in jQuery: {got:?}"
    );
}

//! What a project carries besides its own code must not crowd out the file a description is
//! about: its messages again in every language (gettext catalogs) and other projects copied
//! into its package (`requests/packages/urllib3`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fresh, top_ten, write};
use keel_index::SearchKind;

/// Unrelated modules, so that a description's words are rare as in a real project.
fn filler(root: &std::path::Path, pkg: &str) {
    for i in 0..40 {
        write(
            root,
            &format!("{pkg}/util/mod_{i}.py"),
            &format!("def helper_{i}(value):\n    return value + {i}\n"),
        );
    }
}

fn rank(hits: &[keel_index::Hit], path: &str) -> usize {
    hits.iter()
        .position(|h| h.path == path)
        .unwrap_or(usize::MAX)
}

#[test]
fn message_catalogs_do_not_hide_the_source_of_a_described_feature() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    filler(root, "doctool");
    write(root, "doctool/__init__.py", "");
    write(
        root,
        "doctool/ext/summary/__init__.py",
        "def setup(app):\n    app.add_config_value('summary_generate', False, True)\n    return {'version': 1}\n",
    );
    // Forty languages, each repeating the extension's messages in a catalog of their own.
    for lang in 0..40 {
        let mut po = String::new();
        for n in 0..12 {
            po.push_str(&format!(
                "#: doctool/ext/summary/__init__.py:{n}\nmsgid \"summary: generate the summary pages by default ({n})\"\nmsgstr \"summary generate default {lang}\"\n\n"
            ));
        }
        write(
            root,
            &format!("doctool/locale/l{lang}/LC_MESSAGES/doctool.po"),
            &po,
        );
    }
    let (_db, idx) = fresh(root);
    let hits = top_ten(
        &idx,
        "summary: Enable summary_generate by default",
        SearchKind::File,
    );
    let source = rank(&hits, "doctool/ext/summary/__init__.py");
    assert!(
        source < 5,
        "the extension must be in the first five: {hits:?}"
    );
    let first_catalog = hits
        .iter()
        .position(|h| h.path.ends_with(".po"))
        .unwrap_or(usize::MAX);
    assert!(
        source < first_catalog,
        "source above every catalog: {hits:?}"
    );
}

#[test]
fn a_copy_of_another_project_inside_the_package_ranks_below_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    filler(root, "client");
    write(root, "client/__init__.py", "");
    write(
        root,
        "client/utils.py",
        "def super_len(o):\n    \"\"\"Length of a body; a file whose tell() raises is sent chunked.\"\"\"\n    try:\n        return o.tell()\n    except OSError:\n        return None\n",
    );
    write(
        root,
        "client/packages/urllib3/response.py",
        "class HTTPResponse:\n    def tell(self):\n        \"\"\"Position in the chunked transfer encoding body.\"\"\"\n        return self._fp_bytes_read\n\n    def read_chunked(self, encoding):\n        \"\"\"Reads a chunked transfer encoding body.\"\"\"\n        return self._fp.read()\n",
    );
    let (_db, idx) = fresh(root);
    let hits = top_ten(
        &idx,
        "When passed objects that throw exceptions from `tell()`, send them via chunked transfer encoding",
        SearchKind::File,
    );
    let own = rank(&hits, "client/utils.py");
    let copy = rank(&hits, "client/packages/urllib3/response.py");
    assert!(own < copy, "the package's own module first: {hits:?}");
    assert!(
        hits.get(copy)
            .is_none_or(|h| h.why.iter().any(|w| w.contains("vendored"))),
        "the copy says why it ranks lower: {hits:?}"
    );
}

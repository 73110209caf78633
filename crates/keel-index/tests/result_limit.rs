//! Asking for more file results must not reorder the first ones: `codebase_search`'s
//! default of 10 and a benchmark's 50 rank the same files first.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fresh, write};
use keel_index::{SearchKind, SearchQuery};

fn files(idx: &keel_index::Index, text: &str, limit: usize) -> Vec<String> {
    let mut q = SearchQuery::new(text);
    q.kind = SearchKind::File;
    q.limit = limit;
    idx.search(&q)
        .unwrap()
        .into_iter()
        .map(|h| h.path)
        .collect()
}

#[test]
fn the_first_file_results_do_not_depend_on_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // Modules without the word, so that it stays rare enough to count.
    for i in 0..600 {
        write(
            root,
            &format!("pkg/other/mod_{i:03}.py"),
            &format!("def other_{i}(x):\n    return x * {i}\n"),
        );
    }
    // Two hundred small modules, each naming the report's word once in a short function …
    for i in 0..200 {
        write(
            root,
            &format!("pkg/plain/mod_{i:03}.py"),
            &format!("def plain_{i}():\n    return 'gamma'\n"),
        );
    }
    // … and one module naming it in three longer functions: each of its chunks ranks below
    // every short one (more words beside it), the file as a whole above them (three chunks).
    write(
        root,
        "pkg/target.py",
        "def first(value):\n    result = value\n    return 'gamma', result\n\n\
         def second(value):\n    result = value\n    return 'gamma', result\n\n\
         def third(value):\n    result = value\n    return 'gamma', result\n",
    );
    let (_db, idx) = fresh(root);
    let wide = files(&idx, "gamma", 50);
    assert_eq!(
        wide.first().map(String::as_str),
        Some("pkg/target.py"),
        "the module holding the word three times ranks first: {wide:?}"
    );
    for limit in [5, 10, 20] {
        let narrow = files(&idx, "gamma", limit);
        assert_eq!(
            narrow,
            wide[..narrow.len()],
            "limit {limit}: the first results differ from limit 50's"
        );
    }
}

//! Bug reports naming things precisely: an interpreter's own error message (the type it
//! quotes is the one to fix; its wording is raised nowhere in the project), `Class.member`
//! names (the class's definition, not another class's member of the same name), the
//! whole-file text signal (kept in step with refreshes), and namesakes that only forward.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{copy_dir, fixture, fresh, write};
use keel_index::{Hit, Index, NoProgress, SearchKind, SearchQuery};

const CART: &str = r#""""A shopping cart."""


class Cart:
    """Items with a quantity and a unit price."""

    def __init__(self):
        self.items = []

    def total_price(self):
        return sum(qty * price for _, qty, price in self.items)
"#;

/// A visitor that formats its own missing-attribute error: the interpreter's wording in
/// project code, near a raise.
const RENDER: &str = r#""""Renders nodes by visiting them."""


class Renderer:
    def visit(self, node):
        method = getattr(self, "visit_" + type(node).__name__.lower(), None)
        if method is None:
            raise AttributeError(f"{self!r} object has no attribute for {node!r}")
        return method(node)
"#;

const DATASET: &str = r#""""A dataset of elements."""


class Dataset:
    """Elements by tag."""

    def to_json(self, drop_empty=False):
        """The dataset as a JSON object."""
        return {tag: e.to_json() for tag, e in self.elements.items()}
"#;

const ELEMENT: &str = r#""""One element."""


class Element:
    def to_json(self):
        """The element's value as JSON."""
        return {"value": self.value}
"#;

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), dir.path());
    write(dir.path(), "py/shop/cart.py", CART);
    write(dir.path(), "py/shop/render.py", RENDER);
    write(dir.path(), "py/data/dataset.py", DATASET);
    write(dir.path(), "py/data/element.py", ELEMENT);
    dir
}

fn files(idx: &Index, text: &str, limit: usize) -> Vec<Hit> {
    let mut q = SearchQuery::new(text);
    q.kind = SearchKind::File;
    q.limit = limit;
    idx.search(&q).unwrap()
}

#[test]
fn a_runtime_attribute_error_points_at_the_class_it_names() {
    let repo = repo();
    let (_db, idx) = fresh(repo.path());
    let report = "Discounts on a cart\n\nApplying a coupon at checkout fails with\n\n    \
                  AttributeError: 'Cart' object has no attribute 'discount'\n\nI expected the \
                  coupon to lower the total.";
    let hits = files(&idx, report, 5);
    assert_eq!(hits[0].path, "py/shop/cart.py", "{hits:#?}");
    assert!(
        hits[0]
            .why
            .iter()
            .any(|w| w == "defines `Cart` (named by the runtime error)"),
        "{:?}",
        hits[0].why
    );
    // The renderer holds the interpreter's wording near a raise, but raises nothing the
    // report shows.
    for h in &hits {
        assert!(
            !h.why
                .iter()
                .any(|w| w.starts_with("raises the reported error")),
            "{h:#?}"
        );
    }
}

#[test]
fn a_class_member_name_points_at_that_class_not_a_namesake() {
    let repo = repo();
    let (_db, idx) = fresh(repo.path());
    let report = "Dataset.to_json keeps empty values\n\nCalling `Dataset.to_json(drop_empty=True)` \
                  still writes the elements without a value into the JSON object, and the \
                  reader we send it to rejects them.";
    let hits = files(&idx, report, 5);
    assert_eq!(hits[0].path, "py/data/dataset.py", "{hits:#?}");
    assert!(
        hits[0].why.iter().any(|w| w == "defines `Dataset.to_json`"),
        "{:?}",
        hits[0].why
    );
    let element = hits.iter().find(|h| h.path == "py/data/element.py");
    assert!(
        element.is_none_or(|h| !h.why.iter().any(|w| w == "defines `Dataset.to_json`")),
        "{hits:#?}"
    );
}

#[test]
fn whole_file_text_follows_refreshes() {
    let repo = repo();
    let (_db, mut idx) = fresh(repo.path());
    let report = "Coupons and vouchers\n\nA voucher coupon should lower the basket total; the \
                  coupon voucher code is ignored by the basket today and the voucher stays \
                  unused.";
    assert!(
        !files(&idx, report, 10)
            .iter()
            .any(|h| h.path == "py/shop/vouchers.py")
    );
    write(
        repo.path(),
        "py/shop/vouchers.py",
        "VOUCHER_NOTE = 'a voucher coupon lowers the basket total; coupon voucher basket'\n",
    );
    idx.refresh(&NoProgress).unwrap();
    let hits = files(&idx, report, 10);
    let added = hits.iter().find(|h| h.path == "py/shop/vouchers.py");
    assert!(
        added.is_some_and(|h| h
            .why
            .iter()
            .any(|w| w == "the whole file matches the report's words")),
        "{hits:#?}"
    );
    std::fs::remove_file(repo.path().join("py/shop/vouchers.py")).unwrap();
    idx.refresh(&NoProgress).unwrap();
    assert!(
        !files(&idx, report, 10)
            .iter()
            .any(|h| h.path == "py/shop/vouchers.py")
    );
}

/// An API layer and its backend both define `describe_tags`; the layer's only hands the call
/// on. A report about what it returns is about the backend.
#[test]
fn a_definition_that_forwards_to_a_namesake_ranks_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "svc/api.py",
        "from svc.backend import backend\n\n\nclass Api:\n    def describe_tags(self, filters=None):\n        tags = backend.describe_tags(filters=filters)\n        return {\"Tags\": tags}\n",
    );
    write(
        root,
        "svc/backend.py",
        "class Backend:\n    def __init__(self):\n        self.tags = []\n\n    def describe_tags(self, filters=None):\n        out = []\n        for tag in self.tags:\n            if not filters or tag[\"Key\"] in filters:\n                out.append(tag)\n        return out\n\n\nbackend = Backend()\n",
    );
    let (_db, idx) = fresh(root);
    let report = "describe_tags ignores the filters\n\nCalling `describe_tags(filters=[\"env\"])` \
                  returns every tag, not only the ones whose key is in the filters.";
    let hits = files(&idx, report, 5);
    assert_eq!(hits[0].path, "svc/backend.py", "{hits:#?}");
    // Its own `def describe_tags(` line is no call.
    assert!(
        !hits[0]
            .why
            .iter()
            .any(|w| w.contains("calls on to a namesake")),
        "{:?}",
        hits[0].why
    );
    let api = hits.iter().find(|h| h.path == "svc/api.py").unwrap();
    assert!(
        api.why
            .iter()
            .any(|w| w == "`describe_tags` here calls on to a namesake"),
        "{:?}",
        api.why
    );
}

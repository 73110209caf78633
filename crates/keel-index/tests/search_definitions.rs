//! Definition results for a report (`kind: symbol`): the method to open, not the class or the
//! file that holds it, each with why, in the same order every time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{copy_dir, fixture, fresh, write};
use keel_index::{Hit, Index, SearchKind, SearchQuery};

/// One small class (a single chunk in the index) with several methods: only the method's
/// own lines tell them apart.
const BASKET: &str = r#""""An invoice."""


class Invoice:
    """Lines with a quantity and a unit price."""

    def __init__(self):
        self.lines = []

    def add(self, item, quantity, price):
        self.lines.append((item, quantity, price))

    def add_surcharge(self, percent):
        for i, (item, quantity, price) in enumerate(self.lines):
            raised = price * (100 + percent) / 100
            self.lines[i] = (item, quantity, int(raised))

    def total(self):
        return sum(quantity * price for _, quantity, price in self.lines)

    def clear(self):
        self.lines = []
"#;

const SHIPPING: &str = r#""""Shipping costs."""


def shipping_cost(weight, country):
    if country == "home":
        return 5
    return 5 + weight * 2
"#;

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), dir.path());
    write(dir.path(), "py/till/invoice.py", BASKET);
    write(dir.path(), "py/till/shipping.py", SHIPPING);
    dir
}

fn definitions(idx: &Index, text: &str) -> Vec<Hit> {
    let mut q = SearchQuery::new(text);
    q.kind = SearchKind::Symbol;
    q.limit = 5;
    idx.search(&q).unwrap()
}

const REPORT: &str = "Surcharged prices are truncated\n\nWith a 15 percent surcharge a price of \
                      9.99 becomes 11 instead of 11.48: the raised price loses its cents when \
                      the surcharge is added, so the invoice total is too low.";

#[test]
fn a_report_ranks_the_method_whose_lines_match_above_its_class() {
    let repo = repo();
    let (_db, idx) = fresh(repo.path());
    let hits = definitions(&idx, REPORT);
    let top = &hits[0];
    assert_eq!(top.path, "py/till/invoice.py", "{hits:#?}");
    assert_eq!(
        top.symbol.as_deref(),
        Some("Invoice.add_surcharge"),
        "{hits:#?}"
    );
    assert_eq!(top.kind.as_deref(), Some("method"));
    assert!(
        top.why.iter().any(|w| w.starts_with("its lines hold")),
        "{:?}",
        top.why
    );
    assert!(
        top.why.iter().any(|w| w.starts_with("in the file ranked ")),
        "{:?}",
        top.why
    );
    // Every hit is a definition, shown from its first line.
    assert!(hits.iter().all(|h| h.symbol.is_some()), "{hits:#?}");
    assert_eq!(top.start_line, 13, "{top:#?}");
}

#[test]
fn definition_results_are_deterministic() {
    let repo = repo();
    let (_db, idx) = fresh(repo.path());
    let (_db2, idx2) = fresh(repo.path());
    let a = definitions(&idx, REPORT);
    assert_eq!(a, definitions(&idx, REPORT));
    assert_eq!(a, definitions(&idx2, REPORT));
}

#[test]
fn a_short_name_query_still_finds_the_definition_by_name() {
    let repo = repo();
    let (_db, idx) = fresh(repo.path());
    let hits = definitions(&idx, "shipping_cost");
    assert_eq!(
        hits[0].symbol.as_deref(),
        Some("shipping_cost"),
        "{hits:#?}"
    );
}

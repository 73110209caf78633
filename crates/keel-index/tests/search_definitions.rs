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

/// A test of the surcharge, written with every word of the report.
const SURCHARGE_TEST: &str = r#"from till.invoice import Invoice


def test_surcharged_prices_keep_their_cents():
    """A surcharged price keeps its cents: 9.99 raised by 15 percent is 11.48, not 11."""
    invoice = Invoice()
    invoice.add("tea", 1, 9.99)
    invoice.add_surcharge(15)
    surcharged, raised, price, cents, percent = invoice.lines[0][2], 11.48, 9.99, 48, 15
    assert surcharged == raised, (price, cents, percent, "the surcharge is added, the total too low")
"#;

#[test]
fn a_test_sharing_the_reports_words_ranks_below_the_source_definition() {
    let repo = repo();
    write(repo.path(), "py/till/tests/test_invoice.py", SURCHARGE_TEST);
    let (_db, idx) = fresh(repo.path());
    let hits = definitions(&idx, REPORT);
    let source = hits
        .iter()
        .position(|h| h.symbol.as_deref() == Some("Invoice.add_surcharge"));
    let test = hits
        .iter()
        .position(|h| h.path == "py/till/tests/test_invoice.py");
    assert!(
        source.is_some_and(|s| test.is_none_or(|t| s < t)),
        "{hits:#?}"
    );
}

/// An order whose every method speaks of the order and its discount; one alone handles
/// coupons.
const ORDERS: &str = r#""""Orders."""


class Order:
    """An order: lines and a discount on the order."""

    def __init__(self, lines, discount):
        self.lines = lines
        self.discount = discount  # the order discount

    def subtotal(self):
        """The order subtotal before the order discount."""
        return sum(line.price for line in self.lines)

    def discounted(self):
        """The order total after the order discount."""
        return self.subtotal() * (100 - self.discount) / 100

    def describe_discount(self):
        """Describes the order discount."""
        return f"order discount: {self.discount}% off the order"

    def take_coupon(self, coupon):
        """A coupon raises the order discount."""
        self.discount += coupon.percent
"#;

/// Coupons are everywhere else: across the project the word says little.
fn coupon_module(i: usize) -> String {
    format!(
        "\"\"\"Coupon kind {i}.\"\"\"\n\n\ndef coupon_{i}(coupon):\n    \"\"\"Checks a coupon.\"\"\"\n    return coupon.code.startswith(\"C{i}\")\n"
    )
}

#[test]
fn the_method_holding_the_words_that_single_it_out_in_its_file_ranks_first() {
    let repo = repo();
    write(repo.path(), "py/till/orders.py", ORDERS);
    for i in 0..12 {
        write(
            repo.path(),
            &format!("py/till/coupons/kind_{i}.py"),
            &coupon_module(i),
        );
    }
    let (_db, idx) = fresh(repo.path());
    let report = "A coupon given twice doubles the order discount\n\nWhen the same coupon is \
                  given to an order again, the order discount grows each time.";
    let hits = definitions(&idx, report);
    let order_defs: Vec<&str> = hits
        .iter()
        .filter(|h| h.path == "py/till/orders.py")
        .filter_map(|h| h.symbol.as_deref())
        .collect();
    assert_eq!(order_defs.first(), Some(&"Order.take_coupon"), "{hits:#?}");
}

//! Evidence from names a report gives precisely: the types and members an interpreter's own
//! error message names (`'AsStringVisitor' object has no attribute 'visit_unknown'`,
//! `argument of type 'PersonName3' is not iterable`), and `Class.member` names
//! (`Dataset.to_json_dict`) matched against qualified definitions.
//!
//! A runtime message is written by the interpreter, not by the project: its words
//! ("object has no attribute") are no raise site to look for, but the names it quotes are
//! the objects the bug is about — usually the class to fix.

use std::collections::BTreeSet;

use rusqlite::Connection;

use super::evidence::{Evidence, LOCATION_SHARE, location};
use super::report::Report;
use crate::IndexError;

/// A definition of a type an interpreter's error message names.
const W_RUNTIME_TYPE: f64 = 1.2;
/// A definition of a member or function it names (often the missing one: weak).
const W_RUNTIME_MEMBER: f64 = 0.4;
/// A definition whose qualified name ends with a report's `Class.member`.
const W_QUALIFIED: f64 = 1.2;
/// Names defined in more files than this point nowhere in particular.
const MAX_FILES: usize = 6;

/// The names a runtime (interpreter-generated) error message quotes.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct RuntimeNames {
    /// Types (`AsStringVisitor`), builtins left out.
    pub types: Vec<String>,
    /// Members and functions (`visit_unknown`, `to_json`).
    pub members: Vec<String>,
}

/// Builtin types: no project defines them.
const BUILTIN_TYPES: &[&str] = &[
    "NoneType",
    "str",
    "int",
    "float",
    "bool",
    "bytes",
    "bytearray",
    "dict",
    "list",
    "tuple",
    "set",
    "frozenset",
    "object",
    "type",
    "function",
    "builtin_function_or_method",
    "method",
    "module",
    "generator",
    "coroutine",
    "complex",
    "range",
    "slice",
    "property",
    "staticmethod",
    "classmethod",
    "Decimal",
    "datetime",
    "date",
    "time",
    "timedelta",
    "undefined",
    "null",
];

/// `'a' x 'b'` → `[a, b]`.
fn quoted(message: &str) -> Vec<String> {
    message
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || "_.".contains(c)))
        .map(str::to_string)
        .collect()
}

/// The name called in `Foo.bar() got an unexpected …` → `bar`.
fn called(message: &str) -> Option<String> {
    let head = message.split("()").next()?;
    let name = head.split_whitespace().last()?;
    let last = name.rsplit('.').next()?;
    (!last.is_empty() && last.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .then(|| last.to_string())
}

/// The names an interpreter-generated error message quotes, or `None` when the message is
/// not one of those (it may be the project's own text).
pub(super) fn runtime_names(message: &str) -> Option<RuntimeNames> {
    let m = message.trim();
    let q = quoted(m);
    let mut out = RuntimeNames::default();
    let first = |q: &[String]| q.first().cloned().into_iter().collect::<Vec<_>>();
    if m.contains("object has no attribute") || m.starts_with("type object '") {
        out.types = first(&q);
        out.members = q.get(1).cloned().into_iter().collect();
    } else if m.starts_with("module '") && m.contains("has no attribute") {
        out.members = q.get(1).cloned().into_iter().collect();
    } else if m.starts_with("argument of type '")
        || m.starts_with("unhashable type: '")
        || [
            "object is not ",
            "object does not support ",
            "object cannot be interpreted",
        ]
        .iter()
        .any(|p| m.contains(p))
    {
        out.types = first(&q);
    } else if m.starts_with("unsupported operand type(s) for")
        || m.contains("not supported between instances of")
    {
        out.types = q;
    } else if m.contains("got an unexpected keyword argument")
        || m.contains("() missing ")
        || m.contains("() takes ")
        || m.contains("() got multiple values")
    {
        out.members = called(m).into_iter().collect();
    } else if (m.starts_with("name '") && m.ends_with("is not defined"))
        || m.starts_with("cannot import name '")
        || m.starts_with("Cannot read properties of ")
        || m.starts_with("Cannot read property '")
    {
        out.members = first(&q);
    } else if let Some(rest) = m.strip_prefix("Object of type ")
        && m.ends_with("is not JSON serializable")
    {
        out.types = rest
            .split_whitespace()
            .next()
            .map(str::to_string)
            .into_iter()
            .collect();
    } else if let Some(head) = m.strip_suffix(" is not a function") {
        out.members = head
            .split_whitespace()
            .last()
            .and_then(|n| n.rsplit('.').next())
            .map(str::to_string)
            .into_iter()
            .collect();
    } else {
        return None;
    }
    out.types.retain(|t| !BUILTIN_TYPES.contains(&t.as_str()));
    for v in [&mut out.types, &mut out.members] {
        for n in v.iter_mut() {
            if let Some(last) = n.rsplit('.').next() {
                *n = last.to_string();
            }
        }
        v.retain(|n| n.len() > 1);
    }
    Some(out)
}

/// A definition: file id, path, start and end line, qualified name, kind, name.
pub(super) type Row = (i64, String, i64, i64, String, String, String);

/// Definitions named `name` (lowercase match), with their file; impls and imports left out.
pub(super) fn defs(
    conn: &Connection,
    name: &str,
    filter: &dyn Fn(&str) -> bool,
) -> Result<Vec<Row>, IndexError> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.file_id, f.path, s.start_line, s.end_line, s.qualified, s.kind, s.name
         FROM symbols s JOIN files f ON f.id = s.file_id
         WHERE s.name_lower = ?1 ORDER BY f.path, s.start_line LIMIT 60",
    )?;
    let rows = stmt
        .query_map([name.to_lowercase()], |r| TryFrom::try_from(r))?
        .collect::<Result<Vec<Row>, _>>()?;
    Ok(rows
        .into_iter()
        .filter(|r| filter(&r.1) && r.5 != "impl" && r.5 != "import")
        .collect())
}

/// Credits each file holding one of `rows` (at most `MAX_FILES` files) with `weight`, shared.
fn credit(rows: Vec<Row>, weight: f64, why: &dyn Fn(&str) -> String, ev: &mut Evidence) {
    let files: BTreeSet<i64> = rows.iter().map(|r| r.0).collect();
    if files.is_empty() || files.len() > MAX_FILES {
        return;
    }
    let share = weight / (files.len() as f64).sqrt();
    let mut done = BTreeSet::new();
    for (fid, path, start, end, qualified, kind, name) in rows {
        if !done.insert(fid) {
            continue;
        }
        let reason = why(&name);
        ev.add(fid, &path, share, reason.clone());
        let sym = (start.max(1) as usize, end.max(1) as usize, qualified, kind);
        ev.locations.push(location(
            fid,
            &path,
            sym,
            share * LOCATION_SHARE,
            0.0,
            reason,
        ));
    }
}

/// Gathers both kinds of evidence for a long report.
pub(super) fn gather(
    conn: &Connection,
    report: &Report,
    filter: &dyn Fn(&str) -> bool,
    ev: &mut Evidence,
) -> Result<(), IndexError> {
    let mut looked = BTreeSet::new();
    for err in report.errors.iter().take(6) {
        let Some(names) = runtime_names(&err.message) else {
            continue;
        };
        for (list, weight) in [
            (&names.types, W_RUNTIME_TYPE),
            (&names.members, W_RUNTIME_MEMBER),
        ] {
            for name in list {
                if !looked.insert(name.to_lowercase()) {
                    continue;
                }
                let rows = defs(conn, name, filter)?;
                credit(
                    rows,
                    weight,
                    &|n| format!("defines `{n}` (named by the runtime error)"),
                    ev,
                );
            }
        }
    }
    let mut seen = BTreeSet::new();
    for parts in report.dotted.iter().take(40) {
        let [.., owner, member] = parts.as_slice() else {
            continue;
        };
        // `Class.member`: the owner is a type (capitalized), the member a name.
        if !owner.starts_with(|c: char| c.is_ascii_uppercase()) || member.is_empty() {
            continue;
        }
        let qual = format!("{owner}.{member}");
        if !seen.insert(qual.clone()) {
            continue;
        }
        let rows: Vec<Row> = defs(conn, member, filter)?
            .into_iter()
            .filter(|r| r.4 == qual || r.4.ends_with(&format!(".{qual}")))
            .collect();
        credit(rows, W_QUALIFIED, &|_| format!("defines `{qual}`"), ev);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(m: &str) -> Option<(Vec<String>, Vec<String>)> {
        runtime_names(m).map(|n| (n.types, n.members))
    }

    fn v(x: &[&str]) -> Vec<String> {
        x.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn python_attribute_errors_name_the_type_and_member() {
        assert_eq!(
            names("'AsStringVisitor' object has no attribute 'visit_unknown'"),
            Some((v(&["AsStringVisitor"]), v(&["visit_unknown"])))
        );
        assert_eq!(
            names("type object 'Foo' has no attribute 'bar'"),
            Some((v(&["Foo"]), v(&["bar"])))
        );
        // A builtin type is no project's definition; the member may be.
        assert_eq!(
            names("'NoneType' object has no attribute 'group'"),
            Some((v(&[]), v(&["group"])))
        );
        assert_eq!(
            names("module 'pvlib.iam' has no attribute 'physical'"),
            Some((v(&[]), v(&["physical"])))
        );
    }

    #[test]
    fn python_type_errors_name_the_type_or_function() {
        assert_eq!(
            names("argument of type 'PersonName3' is not iterable"),
            Some((v(&["PersonName3"]), v(&[])))
        );
        assert_eq!(
            names("'DataElement' object is not subscriptable"),
            Some((v(&["DataElement"]), v(&[])))
        );
        assert_eq!(
            names("unsupported operand type(s) for +: 'Quantity' and 'int'"),
            Some((v(&["Quantity"]), v(&[])))
        );
        assert_eq!(
            names("Dataset.to_json() got an unexpected keyword argument 'indent'"),
            Some((v(&[]), v(&["to_json"])))
        );
        assert_eq!(
            names("__init__() missing 1 required positional argument: 'name'"),
            Some((v(&[]), v(&["__init__"])))
        );
        assert_eq!(
            names("Object of type Timestamp is not JSON serializable"),
            Some((v(&["Timestamp"]), v(&[])))
        );
        assert_eq!(
            names("cannot import name 'Literal' from 'typing'"),
            Some((v(&[]), v(&["Literal"])))
        );
    }

    #[test]
    fn javascript_runtime_errors_name_the_member() {
        assert_eq!(
            names("Cannot read properties of undefined (reading 'length')"),
            Some((v(&[]), v(&["length"])))
        );
        assert_eq!(
            names("this.props.onChange is not a function"),
            Some((v(&[]), v(&["onChange"])))
        );
    }

    #[test]
    fn project_messages_are_not_runtime_messages() {
        assert_eq!(
            names("Dropped elements in sequence matching! 'select' != ';'"),
            None
        );
        assert_eq!(
            names("Could not convert value to integer without loss"),
            None
        );
        assert_eq!(
            names("Invalid KeyConditionExpression: Invalid function name; function:"),
            None
        );
    }
}

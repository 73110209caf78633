//! Config and option names. A report that names `max_line_length`, `--max-line-length`,
//! `autodoc_typehints = "description"` or a key under a `[tool.x]` table points at the code
//! that defines or reads that key — a string literal in a config table, `add_argument("--x")`,
//! `config.get("x")`, a dataclass field — far more than at files that merely use the words.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rusqlite::Connection;

use super::evidence::{Evidence, LOCATION_SHARE};
use super::snippet::{FileLines, lines_of};
use super::*;

/// A key defined as a command-line option (`add_argument("--x")`, `@click.option("--x")`).
const W_OPTION: f64 = 1.2;
/// A key read from a config mapping (`config.get("x")`, `settings["x"]`, `getattr(c, "x")`).
const W_READ: f64 = 1.2;
/// A key as a string literal elsewhere (a defaults table, a schema, a list of known keys).
const W_LITERAL: f64 = 1.0;
/// A key declared as a field or set in a config file (`x: int = 3`, `x = 3` in a class or
/// a `.cfg`/`.toml` file).
const W_FIELD: f64 = 0.9;
/// Keys found in more files than this are too common to point anywhere.
const MAX_FILES: usize = 8;
/// The most keys one report looks up.
const MAX_KEYS: usize = 16;

/// A config key a report names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigKey {
    pub name: String,
    /// Only a code span or the title names it (not a flag or a `key = value` line): it may
    /// as well be a function's name.
    pub from_span: bool,
}

/// How a line of code uses a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum KeyUse {
    Field,
    Literal,
    Read,
    Option,
}

impl KeyUse {
    fn weight(self) -> f64 {
        match self {
            KeyUse::Option => W_OPTION,
            KeyUse::Read => W_READ,
            KeyUse::Literal => W_LITERAL,
            KeyUse::Field => W_FIELD,
        }
    }

    fn says(self, key: &str) -> String {
        match self {
            KeyUse::Option => format!("defines option `{key}`"),
            KeyUse::Read => format!("reads config key `{key}`"),
            KeyUse::Literal => format!("names config key `{key}`"),
            KeyUse::Field => format!("declares config key `{key}`"),
        }
    }
}

fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// A plausible key: 4+ characters, starts with a letter, joined words (`_` or `-`).
fn is_key(k: &str) -> bool {
    k.len() >= 4
        && k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && k.chars().all(is_key_char)
        && (k.contains('_') || k.contains('-'))
        && !k.ends_with(['-', '_'])
}

/// The config and option names a report names, each once, in order: `--flags` anywhere,
/// the keys of `key = value` / `key: value` lines (config snippets; a dotted TOML key gives
/// its last part), and snake_case names of code spans and the title.
pub(super) fn keys(text: &str, span_identifiers: &[String]) -> Vec<ConfigKey> {
    let mut out: Vec<ConfigKey> = Vec::new();
    let mut seen = BTreeSet::new();
    // A flag needs no joined words (`--nofail`); other keys do.
    let mut push = |k: &str, flag: bool, out: &mut Vec<ConfigKey>| {
        let k = k.trim_matches(|c| c == '-' || c == '_');
        let ok = is_key(k)
            || (flag
                && k.len() >= 4
                && k.chars().all(is_key_char)
                && k.chars().next().is_some_and(|c| c.is_ascii_alphabetic()));
        if ok && seen.insert(k.replace('-', "_").to_lowercase()) {
            out.push(ConfigKey {
                name: k.to_string(),
                from_span: false,
            });
        }
    };
    for line in text.lines() {
        // `--max-line-length=100`, `pylint --disable-all`, "`--no-verbose`".
        let mut rest = line;
        while let Some(at) = rest.find("--") {
            let before = rest[..at].chars().next_back();
            let after = &rest[at + 2..];
            if before.is_none_or(|c| c.is_whitespace() || "\"'`([=,".contains(c)) {
                let flag: String = after.chars().take_while(|c| is_key_char(*c)).collect();
                push(&flag, true, &mut out);
            }
            rest = after;
        }
        // `max_line_length = 120`, `autodoc_typehints: description`, `tool.x.some_key = 1`.
        let t = line.trim_start();
        if let Some(end) = t.find(['=', ':'])
            && !t[end..].starts_with("==")
            && !t[end..].starts_with("::")
        {
            let key = t[..end].trim_end().trim_matches(['"', '\'']);
            if !key.contains(char::is_whitespace) {
                let last = key.rsplit('.').next().unwrap_or(key);
                push(last, false, &mut out);
            }
        }
    }
    for ident in span_identifiers {
        if ident
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            let before = out.len();
            push(ident, false, &mut out);
            if let Some(k) = out.get_mut(before) {
                k.from_span = true;
            }
        }
    }
    out.truncate(MAX_KEYS);
    out
}

/// How a line uses `key` (its `_`/`-` spellings alike), if it defines or reads it.
#[cfg(test)]
pub(super) fn classify(line: &str, key: &str) -> Option<KeyUse> {
    classify_as(line, &key_variants(key))
}

/// A key's spellings: as given, with `_` for `-`, with `-` for `_`.
fn key_variants(key: &str) -> BTreeSet<String> {
    [
        key.to_string(),
        key.replace('-', "_"),
        key.replace('_', "-"),
    ]
    .into()
}

/// [`classify`] with the key's spellings worked out once.
fn classify_as(line: &str, variants: &BTreeSet<String>) -> Option<KeyUse> {
    // Every use below holds one of the spellings.
    if !variants.iter().any(|v| line.contains(v.as_str())) {
        return None;
    }
    let mut best = None;
    for v in variants {
        let quoted =
            |s: &str| line.contains(&format!("\"{s}\"")) || line.contains(&format!("'{s}'"));
        let found = if quoted(&format!("--{v}")) {
            Some(KeyUse::Option)
        } else if quoted(v) {
            let reads = [
                ".get(",
                "getattr(",
                "[\"",
                "['",
                ".getint(",
                ".getboolean(",
                ".getfloat(",
            ]
            .iter()
            .any(|m| line.contains(m));
            Some(if reads { KeyUse::Read } else { KeyUse::Literal })
        } else {
            let t = line.trim_start();
            t.strip_prefix(v.as_str())
                .map(str::trim_start)
                .filter(|r| {
                    (r.starts_with(':') && !r.starts_with("::"))
                        || (r.starts_with('=') && !r.starts_with("=="))
                })
                .map(|_| KeyUse::Field)
        };
        best = best.max(found);
    }
    best
}

/// A chunk holding a phrase: file id, path, first and last line, definition and kind.
pub(super) type PhraseChunk = (i64, String, i64, i64, Option<String>, Option<String>);

/// The chunks holding a full-text `phrase` (`body : "max line length"`), in path and line
/// order: at most `limit` of the first 2,000 the full-text index gives.
pub(super) fn phrase_chunks(
    conn: &Connection,
    phrase: &str,
    limit: usize,
) -> Result<Vec<PhraseChunk>, IndexError> {
    let mut stmt = conn.prepare_cached(
        "SELECT c.file_id, f.path, c.start_line, c.end_line, c.symbol, c.kind
         FROM (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?1 LIMIT 2000) m
         JOIN chunks c ON c.id = m.rowid JOIN files f ON f.id = c.file_id
         ORDER BY f.path, c.start_line LIMIT ?2",
    )?;
    let rows = stmt
        .query_map(rusqlite::params![phrase, limit as i64], |r| {
            TryFrom::try_from(r)
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// Adds evidence for the files that define or read the report's config keys.
pub(super) fn matches(
    conn: &Connection,
    root: &Path,
    files: &mut FileLines,
    keys: &[ConfigKey],
    filter: &dyn Fn(&str) -> bool,
    ev: &mut Evidence,
) -> Result<(), IndexError> {
    if keys.is_empty() {
        return Ok(());
    }
    // A name only a code span gives that the code defines as a function or class is that
    // function or class (the definition evidence covers it), not a config key.
    let mut defined = conn.prepare_cached(
        "SELECT 1 FROM symbols WHERE name = ?1 AND kind IN ('function', 'method', 'class') LIMIT 1",
    )?;
    for ConfigKey {
        name: key,
        from_span,
    } in keys
    {
        if *from_span && defined.exists([key])? {
            continue;
        }
        let words: Vec<String> = key
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        if words.is_empty() {
            continue;
        }
        let variants = key_variants(key);
        let phrase = format!("body : \"{}\"", words.join(" "));
        let rows = phrase_chunks(conn, &phrase, 80)?;
        // Per file: its strongest use of the key, and where.
        let mut found: BTreeMap<i64, (KeyUse, PhraseChunk)> = BTreeMap::new();
        for row in rows {
            // Too common already: the key is passed over whatever the other rows hold.
            if found.len() > MAX_FILES {
                break;
            }
            if !filter(&row.1) {
                continue;
            }
            let Some(lines) = lines_of(files, root, &row.1) else {
                continue;
            };
            let (start, end) = (row.2.max(1) as usize, row.3.max(1) as usize);
            let best = lines
                .iter()
                .skip(start - 1)
                .take(end + 1 - start.min(end + 1))
                .filter_map(|l| classify_as(l, &variants))
                .max();
            if let Some(u) = best {
                let slot = found.entry(row.0).or_insert((u, row.clone()));
                if u > slot.0 {
                    *slot = (u, row);
                }
            }
        }
        if found.is_empty() || found.len() > MAX_FILES {
            continue;
        }
        let share = 1.0 / (found.len() as f64).sqrt();
        for (fid, (u, (_, path, start, end, symbol, kind))) in found {
            let w = u.weight() * share;
            let why = u.says(key);
            ev.add(fid, &path, w, why.clone());
            ev.locations.push(Cand {
                file_id: fid,
                path,
                start: start.max(1) as usize,
                end: end.max(1) as usize,
                symbol,
                kind,
                text: 0.0,
                sym: w * LOCATION_SHARE,
                bonus: 0.0,
                why: vec![why],
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(keys: Vec<ConfigKey>) -> Vec<String> {
        keys.into_iter().map(|k| k.name).collect()
    }

    #[test]
    fn keys_from_real_reports() {
        // sqlfluff: a `.sqlfluff` config snippet and a CLI flag.
        let text = "L016 ignores max_line_length\n\n```ini\n[sqlfluff]\ndialect = snowflake\n\n[sqlfluff:rules]\nmax_line_length = 120\ntab_space_size = 4\n```\n\nRunning `sqlfluff lint --nofail --ignore-local-config` still fails.";
        let k = names(keys(text, &["max_line_length".into()]));
        assert_eq!(
            k,
            [
                "max_line_length",
                "tab_space_size",
                "nofail",
                "ignore-local-config"
            ]
        );
        // Sphinx: a conf.py setting in prose and a span.
        let text = "autodoc_typehints does not effect to overloaded callables\n\nIn conf.py:\n\n    autodoc_typehints = 'none'\n";
        assert_eq!(
            keys(text, &["autodoc_typehints".into()]),
            [ConfigKey {
                name: "autodoc_typehints".into(),
                from_span: false
            }]
        );
        // pyproject: a dotted TOML key and a YAML key.
        let text = "[tool.black]\ntool.black.line-length = 100\nskip-string-normalization: true\n";
        assert_eq!(
            names(keys(text, &[])),
            ["line-length", "skip-string-normalization"]
        );
        // Prose, URLs, comparisons and call spans are not keys.
        let text = "Note: this fails\nhttps://example.com/a-b\nif x == y_z:\n    `Dataset.to_json_dict` breaks";
        assert_eq!(
            keys(text, &["Dataset".into(), "to_json_dict".into()]),
            [ConfigKey {
                name: "to_json_dict".into(),
                from_span: true
            }]
        );
    }

    #[test]
    fn classifies_how_code_uses_a_key() {
        let k = "max-line-length";
        assert_eq!(
            classify("    parser.add_argument('--max-line-length', type=int)", k),
            Some(KeyUse::Option)
        );
        assert_eq!(
            classify("        limit = self.config.get(\"max_line_length\")", k),
            Some(KeyUse::Read)
        );
        assert_eq!(
            classify("    \"max_line_length\": 80,", "max_line_length"),
            Some(KeyUse::Literal)
        );
        assert_eq!(
            classify("    max_line_length: int = 80", "max_line_length"),
            Some(KeyUse::Field)
        );
        assert_eq!(
            classify("max_line_length = 80", "max_line_length"),
            Some(KeyUse::Field)
        );
        // Using the value is not defining or reading the key.
        assert_eq!(
            classify("    if len(line) > self.max_line_length:", k),
            None
        );
        assert_eq!(
            classify("    max_line_length == 3", "max_line_length"),
            None
        );
        assert_eq!(classify("# max line length is 80", k), None);
    }
}

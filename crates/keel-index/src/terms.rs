//! Words in code and in queries: identifier splitting (`parseHTTPRequest` → parse, http,
//! request; `snake_case` → snake, case), query analysis and FTS5 query building.
//!
//! The index and the queries use the same functions, so a camel-case identifier in the code
//! and a plain-English word in a query meet on the same terms.

use std::collections::BTreeSet;

/// English words that carry no meaning in a code search ("where is the function that …").
const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "by",
    "can",
    "do",
    "does",
    "find",
    "for",
    "from",
    "how",
    "i",
    "in",
    "into",
    "is",
    "it",
    "its",
    "me",
    "of",
    "on",
    "or",
    "show",
    "that",
    "the",
    "their",
    "then",
    "there",
    "this",
    "to",
    "was",
    "what",
    "when",
    "where",
    "which",
    "who",
    "why",
    "with",
    "code",
    "implemented",
    "defined",
    "located",
    "handles",
    "handle",
];

/// Whether a lowercase word is a stopword.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// The words of an identifier, lowercase: split at `_`, `-` and other non-alphanumerics, at
/// lower→upper case changes (`parseConfig`) and before the last capital of an acronym
/// (`HTTPRequest` → http, request). Digits stay with the word before them.
pub fn split_identifier(ident: &str) -> Vec<String> {
    let mut words = Vec::new();
    for run in ident.split(|c: char| !c.is_alphanumeric()) {
        if run.is_empty() {
            continue;
        }
        let chars: Vec<char> = run.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (prev, cur) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|c| c.is_lowercase());
            let boundary = (prev.is_lowercase() && cur.is_uppercase())
                || (prev.is_uppercase() && cur.is_uppercase() && next_lower)
                || (prev.is_ascii_digit() && cur.is_alphabetic() && cur.is_uppercase());
            if boundary {
                words.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        words.push(chars[start..].iter().collect::<String>().to_lowercase());
    }
    words
}

/// Whether an identifier has internal case changes (so splitting it adds words the FTS5
/// tokenizer would not find on its own: it already splits at `_`).
fn is_mixed_case(ident: &str) -> bool {
    let mut lower_seen = false;
    for c in ident.chars() {
        if c.is_lowercase() {
            lower_seen = true;
        } else if c.is_uppercase() && lower_seen {
            return true;
        }
    }
    // `HTTPServer`: upper run followed by lower.
    let b = ident.as_bytes();
    b.windows(3).any(|w| {
        w[0].is_ascii_uppercase() && w[1].is_ascii_uppercase() && w[2].is_ascii_lowercase()
    })
}

/// The extra words of a text's mixed-case identifiers (`HttpRequest` → `http request`),
/// each once, for the FTS `terms` column: the tokenizer indexes `httprequest` whole, this
/// makes `request` find it too.
pub fn camel_parts(text: &str) -> String {
    compound_parts(text, 4, is_mixed_case)
}

/// The words inside a text's compound identifiers (`update_item` → `update item`,
/// `HttpRequest` → `http request`, `_cache` → `cache`), each once, for the whole-file `terms`
/// column: that table's tokenizer keeps `update_item` whole (a rare, telling token), this
/// makes `item` find it too.
pub fn identifier_parts(text: &str) -> String {
    compound_parts(text, 3, |i| i.contains('_') || is_mixed_case(i))
}

/// The words (two letters or more) of each distinct identifier of `text` at least `min_len`
/// long that `compound` accepts, space-separated.
fn compound_parts(text: &str, min_len: usize, compound: impl Fn(&str) -> bool) -> String {
    let mut seen = BTreeSet::new();
    let mut out = String::new();
    for ident in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if ident.len() < min_len || !compound(ident) || !seen.insert(ident) {
            continue;
        }
        for w in split_identifier(ident) {
            if w.len() > 1 {
                out.push_str(&w);
                out.push(' ');
            }
        }
    }
    out
}

/// The words of a path for the path index: directories, the file stem and the extension,
/// split like identifiers (`src/HttpClient.ts` → `src http client httpclient ts`).
pub fn path_words(path: &str) -> String {
    let mut out = String::new();
    for seg in path.split(['/', '.', '-', '_']) {
        if seg.is_empty() {
            continue;
        }
        out.push_str(&seg.to_lowercase());
        out.push(' ');
        let parts = split_identifier(seg);
        if parts.len() > 1 {
            for p in parts {
                out.push_str(&p);
                out.push(' ');
            }
        }
    }
    out
}

/// Capitalised plain words (`Emit`, `Support`: one capital, then lowercase letters) whose
/// every occurrence opens a sentence of prose — the text's first word, or a word after one
/// ending in `.`, `:`, `!` or `?`, or a line's first — outside code spans.
fn sentence_capitals(query: &str) -> BTreeSet<&str> {
    let mut opening = BTreeSet::new();
    let mut elsewhere = BTreeSet::new();
    let mut in_code = false;
    for line in query.lines() {
        let mut starts = true;
        for raw in line.split_whitespace() {
            let ticks = raw.matches('`').count();
            let coded = in_code || raw.starts_with('`');
            if ticks % 2 == 1 {
                in_code = !in_code;
            }
            let core = raw.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
            for part in core.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                let mut chars = part.chars();
                let capital = part.len() > 1
                    && chars.next().is_some_and(|c| c.is_ascii_uppercase())
                    && chars.all(|c| c.is_ascii_lowercase());
                if !capital {
                    continue;
                }
                if starts && !coded && core == part {
                    opening.insert(part);
                } else {
                    elsewhere.insert(part);
                }
            }
            starts = raw.ends_with(['.', ':', '!', '?']) && !in_code;
        }
    }
    opening.retain(|w| !elsewhere.contains(w));
    opening
}

/// What a search query asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryTerms {
    /// Lowercase words for full-text search, stopwords removed, each once, in query order
    /// (identifiers are also split into their words).
    pub words: Vec<String>,
    /// Tokens that look like identifiers (`parse_config`, `HttpClient`, `Foo.bar`'s `bar`),
    /// as written, for exact and prefix symbol matches.
    pub identifiers: Vec<String>,
    /// Tokens that look like paths or file names (`src/main.rs`, `config.py`).
    pub paths: Vec<String>,
    /// The words of each multi-word identifier (`select_related` → select, related), to
    /// search as phrases: far more selective than their words one by one.
    pub phrases: Vec<Vec<String>>,
    /// Identifiers that are only a capitalised plain word opening a sentence of prose
    /// (`Emit a warning …`, `Support the …`): English, not a name, unless the project has a
    /// definition spelled exactly so.
    pub sentence_capitals: Vec<String>,
}

impl QueryTerms {
    /// Analyses a query.
    pub fn parse(query: &str) -> Self {
        let mut terms = QueryTerms::default();
        let mut seen_words = BTreeSet::new();
        let mut push_word = |terms: &mut QueryTerms, w: String| {
            if w.is_empty() || is_stopword(&w) {
                return;
            }
            if seen_words.insert(w.clone()) {
                terms.words.push(w);
            }
        };
        for token in query.split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    ',' | ';'
                        | '"'
                        | '`'
                        | '\''
                        | '('
                        | ')'
                        | '['
                        | ']'
                        | '{'
                        | '}'
                        | '<'
                        | '>'
                        | '?'
                        | '!'
                        | '='
                        | '&'
                        | '|'
                        | '*'
                        | '+'
                )
        }) {
            let token = token.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
            if token.is_empty() {
                continue;
            }
            let looks_path = token.contains('/')
                || token
                    .rsplit_once('.')
                    .is_some_and(|(stem, ext)| !stem.is_empty() && is_known_extension(ext));
            if looks_path {
                terms.paths.push(token.to_string());
            }
            // `Foo.bar`, `a::b`: each part is an identifier of its own.
            for part in token.split(['.', ':', '/', '\\', '#']) {
                if part.is_empty() {
                    continue;
                }
                let split = split_identifier(part);
                let is_ident = part.chars().all(|c| c.is_alphanumeric() || c == '_')
                    && part.chars().any(|c| c.is_alphanumeric())
                    && part
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_alphabetic() || c == '_')
                    && (split.len() > 1
                        || part.chars().any(|c| c.is_uppercase())
                        || part.contains('_'));
                if is_ident && !terms.identifiers.iter().any(|i| i == part) {
                    terms.identifiers.push(part.to_string());
                    if split.len() > 1 && !terms.phrases.contains(&split) {
                        terms.phrases.push(split.clone());
                    }
                }
                let whole = part.to_lowercase();
                if split.len() > 1 && whole.chars().all(|c| c.is_alphanumeric()) {
                    push_word(&mut terms, whole);
                }
                for w in split {
                    push_word(&mut terms, w);
                }
            }
        }
        // A lone lowercase word may be an identifier too (`tokenize`).
        if terms.identifiers.is_empty() && terms.words.len() == 1 {
            terms.identifiers.push(terms.words[0].clone());
        }
        let capitals = sentence_capitals(query);
        terms.sentence_capitals = terms
            .identifiers
            .iter()
            .filter(|i| capitals.contains(i.as_str()))
            .cloned()
            .collect();
        terms
    }

    /// Whether there is nothing to search for.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty() && self.identifiers.is_empty() && self.paths.is_empty()
    }

    /// An FTS5 query matching any of the words (each quoted, so no word is read as an FTS5
    /// operator). `None` when there are no words.
    pub fn fts_any(&self) -> Option<String> {
        fts_or(&self.words)
    }
}

/// `"a" OR "b"` for FTS5; quotes inside words are doubled.
pub fn fts_or(words: &[String]) -> Option<String> {
    let parts = fts_phrases(words);
    if parts.is_empty() {
        None
    } else {
        Some(parts.join(" OR "))
    }
}

/// Each non-empty word as an FTS5 phrase (`"a"`; quotes inside doubled): the parts of
/// [`fts_or`], in its order.
pub fn fts_phrases(words: &[String]) -> Vec<String> {
    words
        .iter()
        .filter(|w| !w.is_empty())
        .map(|w| fts_phrase(w))
        .collect()
}

/// One FTS5 phrase: the text quoted, quotes inside doubled.
pub fn fts_phrase(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

fn is_known_extension(ext: &str) -> bool {
    crate::symbols::Language::from_extension(ext).is_some()
        || matches!(
            ext.to_ascii_lowercase().as_str(),
            "md" | "toml"
                | "json"
                | "yaml"
                | "yml"
                | "txt"
                | "html"
                | "css"
                | "scss"
                | "sql"
                | "xml"
                | "cfg"
                | "ini"
                | "proto"
                | "kt"
                | "swift"
                | "php"
                | "cs"
                | "scala"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_identifiers() {
        assert_eq!(
            split_identifier("parseHTTPRequest2"),
            ["parse", "http", "request2"]
        );
        assert_eq!(
            split_identifier("snake_case_name"),
            ["snake", "case", "name"]
        );
        assert_eq!(split_identifier("HTTPServer"), ["http", "server"]);
        assert_eq!(split_identifier("Foo"), ["foo"]);
        assert_eq!(split_identifier("x"), ["x"]);
        assert!(split_identifier("__").is_empty());
    }

    #[test]
    fn identifier_parts_split_snake_and_camel_case() {
        assert_eq!(
            identifier_parts("x = update_item(HttpRequest, _cache, ok, update_item)"),
            "update item http request cache "
        );
    }

    #[test]
    fn camel_parts_and_paths() {
        assert_eq!(
            camel_parts("let r = HttpRequest::new(); parse_it()"),
            "http request "
        );
        assert_eq!(
            path_words("src/HttpClient.ts"),
            "src httpclient http client ts "
        );
    }

    #[test]
    fn capitals_opening_a_sentence_are_prose() {
        let q = QueryTerms::parse("Emit a warning if toctree holds duplicates. Support `Matrix`");
        assert_eq!(q.sentence_capitals, ["Emit", "Support"]);
        assert!(q.identifiers.iter().any(|i| i == "Matrix"));
        // A name used as a name somewhere in the text, inside a larger token, or mid-sentence.
        let q = QueryTerms::parse("Matrix fails. Matrix([[1]]).col_insert() and the Python domain");
        assert!(q.sentence_capitals.is_empty());
        let q = QueryTerms::parse("Python domain broken\nPython 3.12: `Literal` is wrong");
        assert_eq!(q.sentence_capitals, ["Python"]);
        // An rST link's trailing underscore is not an identifier.
        let q = QueryTerms::parse("the `officially recommended`_ suffix");
        assert!(q.identifiers.is_empty());
    }

    #[test]
    fn query_analysis() {
        let q = QueryTerms::parse("where is the function that parses the config file?");
        assert_eq!(q.words, ["function", "parses", "config", "file"]);
        assert!(q.identifiers.is_empty());
        let q = QueryTerms::parse("HttpClient.send_request in src/net.rs");
        assert_eq!(q.identifiers, ["HttpClient", "send_request"]);
        assert_eq!(q.paths, ["src/net.rs"]);
        assert!(q.words.contains(&"httpclient".to_string()));
        assert!(q.words.contains(&"client".to_string()));
        let q = QueryTerms::parse("tokenize");
        assert_eq!(q.identifiers, ["tokenize"]);
        assert_eq!(q.fts_any().as_deref(), Some("\"tokenize\""));
        assert!(QueryTerms::parse("the of ?").is_empty());
    }
}

//! Repairing malformed argument JSON as models emit it.
//!
//! Valid JSON is never touched: it is parsed strictly first. Only when that fails does a
//! tolerant parser run, and it fixes only mistakes with one possible meaning: markdown fences
//! around the JSON, trailing commas, single-quoted strings, unquoted keys, raw newlines and tabs
//! inside strings, escapes JSON does not know (`"\d+"` in a regex), Python's `True`/`False`/
//! `None`, a JSON string that holds the JSON object, closing brackets missing at the very
//! end after a complete value, and stray closing brackets after it. Anything else — a missing comma, an apostrophe inside a
//! single-quoted string, text cut off inside a string or a number — is an error, never a guess.

use serde_json::{Map, Number, Value};

/// The fix that closes brackets missing at the end (refused when the reply was cut off).
pub(crate) const CLOSED_BRACKETS: &str = "closed brackets missing at the end";

/// Deepest nesting the tolerant parser accepts (arguments are shallow; this bounds recursion).
const MAX_DEPTH: usize = 64;

/// Argument text that parsed, and what had to be fixed for it to parse (empty when it was
/// valid JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct RepairedJson {
    pub value: Value,
    /// Short descriptions of each kind of fix, in the order first needed, without repeats.
    pub fixes: Vec<&'static str>,
}

/// Argument text that could not be repaired without guessing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonRepairError {
    /// What is wrong, for the model.
    pub message: String,
    /// The text ends inside a string, a number or after a separator: it was cut off.
    pub ends_early: bool,
}

/// Parses argument text, repairing it when the repair is unambiguous. Empty text is `{}`.
pub fn repair_json(raw: &str) -> Result<RepairedJson, JsonRepairError> {
    let mut fixes = Vec::new();
    let value = parse_any(raw, &mut fixes, 0)?;
    Ok(RepairedJson { value, fixes })
}

fn parse_any(
    raw: &str,
    fixes: &mut Vec<&'static str>,
    nesting: usize,
) -> Result<Value, JsonRepairError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let value = match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => v,
        Err(strict) => {
            let unfenced = strip_fence(trimmed);
            let text = match unfenced {
                Some(inner) => {
                    note(fixes, "removed a markdown code fence");
                    inner
                }
                None => trimmed,
            };
            let unescaped = unescape_html_quotes(text);
            if let Some(plain) = &unescaped
                && let Ok(v) = serde_json::from_str::<Value>(plain)
            {
                // `{&#34;path&#34;: …}`: every quote HTML-escaped, none left raw.
                note(fixes, HTML_QUOTES);
                v
            } else {
                match serde_json::from_str::<Value>(text) {
                    Ok(v) => v,
                    Err(_) => {
                        let mut p = Lenient {
                            chars: text.chars().collect(),
                            pos: 0,
                            fixes: Vec::new(),
                        };
                        let v = p.document().map_err(|mut e| {
                            if e.message.is_empty() {
                                e.message = strict.to_string();
                            }
                            e
                        })?;
                        for f in p.fixes {
                            note(fixes, f);
                        }
                        v
                    }
                }
            }
        }
    };
    // A JSON string that holds a JSON object: the model encoded its arguments twice.
    if let Value::String(inner) = &value
        && nesting < 2
        && inner.trim_start().starts_with('{')
    {
        let mut inner_fixes = Vec::new();
        if let Ok(v @ Value::Object(_)) = parse_any(inner, &mut inner_fixes, nesting + 1) {
            note(fixes, "decoded arguments sent as a JSON string");
            for f in inner_fixes {
                note(fixes, f);
            }
            return Ok(v);
        }
    }
    Ok(value)
}

/// The fix that turns HTML-escaped quotes (`&#34;`, `&quot;`, `&#39;`) back into quotes.
pub const HTML_QUOTES: &str = "decoded HTML-escaped quotes (&#34;)";

/// `text` with its HTML-escaped double quotes (`&#34;`, `&quot;`) made quotes again, and its
/// single quotes (`&#39;`, `&apos;`) likewise — each only when the text has none of that quote
/// raw, so the escapes cannot be meant literally beside real quotes. `None`: nothing to decode.
pub fn unescape_html_quotes(text: &str) -> Option<String> {
    if !text.contains('&') {
        return None;
    }
    let mut out = text.to_string();
    if !text.contains('"') && (text.contains("&#34;") || text.contains("&quot;")) {
        out = out.replace("&#34;", "\"").replace("&quot;", "\"");
    }
    if !text.contains('\'') && (text.contains("&#39;") || text.contains("&apos;")) {
        out = out.replace("&#39;", "'").replace("&apos;", "'");
    }
    (out != text).then_some(out)
}

/// Decodes HTML-escaped quotes in every string of parsed arguments (a model copying a chat
/// template's escaped rendering writes `print(&#34;hi&#34;)`), where unambiguous: see
/// [`unescape_html_quotes`]. Returns whether anything changed.
pub fn decode_html_quotes(value: &mut Value) -> bool {
    match value {
        // Markup (`<p>&quot;q&quot;</p>`) may mean its entities: left as written.
        Value::String(s) if looks_like_markup(s) => false,
        Value::String(s) => match unescape_html_quotes(s) {
            Some(plain) => {
                *s = plain;
                true
            }
            None => false,
        },
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, v| decode_html_quotes(v) | changed),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |changed, v| decode_html_quotes(v) | changed),
        _ => false,
    }
}

/// Whether `text` holds an HTML/XML tag (`<p`, `</`, `<!`), where entities are meant.
fn looks_like_markup(text: &str) -> bool {
    text.as_bytes()
        .windows(2)
        .any(|w| w[0] == b'<' && (w[1].is_ascii_alphabetic() || w[1] == b'/' || w[1] == b'!'))
}

fn note(fixes: &mut Vec<&'static str>, fix: &'static str) {
    if !fixes.contains(&fix) {
        fixes.push(fix);
    }
}

/// The body of a ```` ```json … ``` ```` block that is the whole text.
fn strip_fence(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("```")?;
    let newline = rest.find('\n')?;
    let lang = rest[..newline].trim();
    if !lang.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    let body = rest[newline + 1..].trim_end();
    let body = body.strip_suffix("```")?;
    Some(body.trim())
}

/// A tolerant recursive-descent JSON parser that records each fix it makes.
struct Lenient {
    chars: Vec<char>,
    pos: usize,
    fixes: Vec<&'static str>,
}

enum Closed {
    /// The closing bracket was there.
    Present,
    /// The text ended after a complete value: the bracket was added.
    Added,
}

impl Lenient {
    fn fail(&self, what: impl Into<String>) -> JsonRepairError {
        JsonRepairError {
            message: format!("{} (at character {})", what.into(), self.pos + 1),
            ends_early: false,
        }
    }

    fn cut(&self, what: impl Into<String>) -> JsonRepairError {
        JsonRepairError {
            message: what.into(),
            ends_early: true,
        }
    }

    fn fix(&mut self, f: &'static str) {
        note(&mut self.fixes, f);
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn document(&mut self) -> Result<Value, JsonRepairError> {
        self.skip_ws();
        let v = self.value(0)?;
        self.skip_ws();
        // Stray closing brackets after a complete value add nothing: drop them.
        if self.pos < self.chars.len()
            && self.chars[self.pos..]
                .iter()
                .all(|c| matches!(c, '}' | ']') || c.is_whitespace())
        {
            self.fix("removed extra closing brackets at the end");
            self.pos = self.chars.len();
        }
        if self.pos < self.chars.len() {
            return Err(self.fail("unexpected text after the arguments"));
        }
        Ok(v)
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonRepairError> {
        if depth > MAX_DEPTH {
            return Err(self.fail(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.skip_ws();
        match self.peek() {
            None => Err(self.cut("the arguments end where a value should start")),
            Some('{') => self.object(depth),
            Some('[') => self.array(depth),
            Some('"') => self.string('"').map(Value::String),
            Some('\'') => {
                self.fix("replaced single quotes with double quotes");
                self.string('\'').map(Value::String)
            }
            Some(c) if c == '-' || c.is_ascii_digit() => self.number(),
            Some(c) if c.is_alphabetic() => {
                let word = self.word();
                match word.as_str() {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    "null" => Ok(Value::Null),
                    "True" | "False" | "None" => {
                        self.fix("replaced Python literals (True/False/None)");
                        Ok(match word.as_str() {
                            "True" => Value::Bool(true),
                            "False" => Value::Bool(false),
                            _ => Value::Null,
                        })
                    }
                    _ => Err(self.fail(format!("`{word}` is not a JSON value (quote strings)"))),
                }
            }
            Some(c) => Err(self.fail(format!("unexpected `{c}` where a value should start"))),
        }
    }

    fn word(&mut self) -> String {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
        {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn number(&mut self) -> Result<Value, JsonRepairError> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
        {
            self.pos += 1;
        }
        if self.pos >= self.chars.len() {
            // `12` at the very end may have been `125`: never guess.
            return Err(self.cut("the arguments end inside a number"));
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        match serde_json::from_str::<Number>(&text) {
            Ok(n) => Ok(Value::Number(n)),
            Err(_) => Err(self.fail(format!("`{text}` is not a JSON number"))),
        }
    }

    /// A string opened by `quote` (the cursor is on it).
    fn string(&mut self, quote: char) -> Result<String, JsonRepairError> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.cut("the arguments end inside a string"));
            };
            self.pos += 1;
            match c {
                c if c == quote => return Ok(out),
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.cut("the arguments end inside a string"));
                    };
                    self.pos += 1;
                    match e {
                        '"' => out.push('"'),
                        '\'' => out.push('\''),
                        '\\' => out.push('\\'),
                        '/' => out.push('/'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => out.push(self.unicode_escape()?),
                        other => {
                            // `"\d+"`: JSON has no such escape; the backslash was meant literally.
                            self.fix("kept unknown backslash escapes literally");
                            out.push('\\');
                            out.push(other);
                        }
                    }
                }
                '\n' | '\r' | '\t' => {
                    self.fix("escaped raw newlines or tabs inside strings");
                    out.push(c);
                }
                c if (c as u32) < 0x20 => {
                    self.fix("escaped raw control characters inside strings");
                    out.push(c);
                }
                c => out.push(c),
            }
        }
    }

    fn unicode_escape(&mut self) -> Result<char, JsonRepairError> {
        let hex = |p: &mut Self| -> Result<u32, JsonRepairError> {
            if p.pos + 4 > p.chars.len() {
                return Err(p.cut("the arguments end inside a \\u escape"));
            }
            let s: String = p.chars[p.pos..p.pos + 4].iter().collect();
            p.pos += 4;
            u32::from_str_radix(&s, 16)
                .map_err(|_| p.fail(format!("`\\u{s}` is not a valid escape")))
        };
        let first = hex(self)?;
        if (0xD800..0xDC00).contains(&first) {
            // A surrogate pair: `\uD83D\uDE00`.
            if self.peek() == Some('\\') && self.chars.get(self.pos + 1) == Some(&'u') {
                self.pos += 2;
                let second = hex(self)?;
                if (0xDC00..0xE000).contains(&second) {
                    let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                    return char::from_u32(c).ok_or_else(|| self.fail("invalid surrogate pair"));
                }
            }
            return Err(self.fail("a lone surrogate in a \\u escape"));
        }
        char::from_u32(first).ok_or_else(|| self.fail("invalid \\u escape"))
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonRepairError> {
        self.pos += 1;
        let mut map = Map::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None if map.is_empty() => {
                    return Err(self.cut("the arguments end right after `{`"));
                }
                Some('}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                _ => {}
            }
            let key = match self.peek() {
                Some('"') => self.string('"')?,
                Some('\'') => {
                    self.fix("replaced single quotes with double quotes");
                    self.string('\'')?
                }
                Some(c) if c.is_alphabetic() || c == '_' || c == '$' => {
                    self.fix("quoted bare object keys");
                    self.word()
                }
                None => return Err(self.cut("the arguments end where a key should start")),
                Some(c) => {
                    return Err(self.fail(format!("unexpected `{c}` where a key should start")));
                }
            };
            self.skip_ws();
            match self.peek() {
                Some(':') => self.pos += 1,
                None => return Err(self.cut("the arguments end after a key")),
                Some(c) => {
                    return Err(self.fail(format!("expected `:` after key `{key}`, found `{c}`")));
                }
            }
            let value = self.value(depth + 1)?;
            if map.contains_key(&key) {
                return Err(self.fail(format!("key `{key}` appears twice")));
            }
            map.insert(key, value);
            match self.separator('}')? {
                Some(Closed::Present) => return Ok(Value::Object(map)),
                Some(Closed::Added) => {
                    self.fix(CLOSED_BRACKETS);
                    return Ok(Value::Object(map));
                }
                None => {}
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonRepairError> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None if items.is_empty() => {
                    return Err(self.cut("the arguments end right after `[`"));
                }
                Some(']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => {}
            }
            items.push(self.value(depth + 1)?);
            match self.separator(']')? {
                Some(Closed::Present) => return Ok(Value::Array(items)),
                Some(Closed::Added) => {
                    self.fix(CLOSED_BRACKETS);
                    return Ok(Value::Array(items));
                }
                None => {}
            }
        }
    }

    /// After a member: `,` (then `None`, with a trailing comma before `close` consumed as a
    /// close), the close itself, or the end of the text (the close is added).
    fn separator(&mut self, close: char) -> Result<Option<Closed>, JsonRepairError> {
        self.skip_ws();
        match self.peek() {
            None => Ok(Some(Closed::Added)),
            Some(c) if c == close => {
                self.pos += 1;
                Ok(Some(Closed::Present))
            }
            Some(',') => {
                self.pos += 1;
                self.skip_ws();
                match self.peek() {
                    Some(c) if c == close => {
                        self.fix("removed trailing commas");
                        self.pos += 1;
                        Ok(Some(Closed::Present))
                    }
                    // `{"a": 1,` — something after the comma was cut off.
                    None => Err(self.cut("the arguments end after a comma")),
                    Some(_) => Ok(None),
                }
            }
            Some(c) => Err(self.fail(format!(
                "expected `,` or `{close}`, found `{c}` (is a comma missing, or a quote inside a string not escaped?)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(raw: &str) -> (Value, Vec<&'static str>) {
        match repair_json(raw) {
            Ok(r) => (r.value, r.fixes),
            Err(e) => panic!("{raw:?} did not repair: {}", e.message),
        }
    }

    fn err(raw: &str) -> JsonRepairError {
        match repair_json(raw) {
            Ok(r) => panic!("{raw:?} must not be repaired, got {}", r.value),
            Err(e) => e,
        }
    }

    #[test]
    fn valid_json_is_untouched() {
        let (v, fixes) = ok(r#"{"path": "a.rs", "n": [1, 2.5, -3e2], "s": "\\d"}"#);
        assert_eq!(v, json!({"path": "a.rs", "n": [1, 2.5, -3e2], "s": "\\d"}));
        assert!(fixes.is_empty());
        assert_eq!(ok("").0, json!({}));
    }

    #[test]
    fn unambiguous_mistakes_are_repaired() {
        let cases = [
            (r#"{"path": "a.rs",}"#, json!({"path": "a.rs"}), "trailing"),
            (
                r#"{'path': 'a.rs'}"#,
                json!({"path": "a.rs"}),
                "single quotes",
            ),
            (
                r#"{path: "a.rs", max_depth: 2}"#,
                json!({"path": "a.rs", "max_depth": 2}),
                "bare",
            ),
            (
                "{\"content\": \"a\nb\tc\"}",
                json!({"content": "a\nb\tc"}),
                "newlines",
            ),
            (
                "```json\n{\"path\": \"a\"}\n```",
                json!({"path": "a"}),
                "fence",
            ),
            (
                r#""{\"path\": \"a\"}""#,
                json!({"path": "a"}),
                "JSON string",
            ),
            (
                r#"{"path": "a", "edits": [{"search": "x", "replace": "y"}"#,
                json!({"path": "a", "edits": [{"search": "x", "replace": "y"}]}),
                "closed",
            ),
            (
                r#"{"pattern": "\d+\s"}"#,
                json!({"pattern": "\\d+\\s"}),
                "escapes",
            ),
            (
                r#"{"verbose": True, "path": None}"#,
                json!({"verbose": true, "path": null}),
                "Python",
            ),
            (
                r#"{"path": "a", "edits": [{"search": "x", "replace": "y"}]}}"#,
                json!({"path": "a", "edits": [{"search": "x", "replace": "y"}]}),
                "extra closing",
            ),
        ];
        for (raw, want, fix) in cases {
            let (v, fixes) = ok(raw);
            assert_eq!(v, want, "{raw}");
            assert!(fixes.iter().any(|f| f.contains(fix)), "{raw}: {fixes:?}");
        }
    }

    #[test]
    fn ambiguous_or_cut_text_is_an_error_not_a_guess() {
        // An apostrophe inside a single-quoted string: where does the string end?
        assert!(!err(r#"{'content': 'it's here'}"#).ends_early);
        // A missing comma.
        assert!(!err(r#"{"a": 1 "b": 2}"#).ends_early);
        // Cut inside a string or a number, or after a comma: the rest is lost.
        assert!(err(r#"{"path": "a.txt", "content": "hel"#).ends_early);
        assert!(err(r#"{"start_line": 12"#).ends_early);
        assert!(err(r#"{"path": "a",  "#).ends_early);
        assert!(err(r#"{"path":"#).ends_early);
        // Prose, not JSON.
        err("please read src/lib.rs");
        err(r#"{"a": 1} and more"#);
        // Duplicate keys would silently drop one value.
        err(r#"{'a': 1, 'a': 2}"#);
        // Not a JSON number.
        err(r#"{'n': 1.2.3}"#);
    }

    #[test]
    fn html_escaped_quotes_are_decoded_when_unambiguous() {
        let (v, fixes) = ok("{&#34;path&#34;: &#34;src/lib.rs&#34;}");
        assert_eq!(v, json!({"path": "src/lib.rs"}));
        assert_eq!(fixes, vec![HTML_QUOTES]);
        let (v, _) = ok("{&quot;cmd&quot;: &quot;echo &#39;hi&#39;&quot;}");
        assert_eq!(v, json!({"cmd": "echo 'hi'"}));

        let mut args = json!({"content": "println!(&#34;hi&#34;);", "n": [1, "a &quot;b&quot;"]});
        assert!(decode_html_quotes(&mut args));
        assert_eq!(
            args,
            json!({"content": "println!(\"hi\");", "n": [1, "a \"b\""]})
        );
        // Beside a raw quote the escape may be meant: an HTML file's `&quot;` stays.
        let mut html = json!({"content": "<a title=\"x\">&quot;q&quot;</a>"});
        assert!(!decode_html_quotes(&mut html));
        let mut page = json!({"content": "<p>&quot;q&quot;</p>"});
        assert!(!decode_html_quotes(&mut page), "markup keeps its entities");
        let mut plain = json!({"content": "a && b"});
        assert!(!decode_html_quotes(&mut plain));
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}{}", "[".repeat(500), "]".repeat(500));
        // Valid JSON: serde_json's own recursion limit (128) makes it an error, never a crash.
        let _ = repair_json(&deep);
        let deep_lenient = format!("{{a: {}1{}}}", "[".repeat(500), "]".repeat(500));
        err(&deep_lenient);
    }
}

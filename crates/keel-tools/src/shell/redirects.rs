//! Redirections: `> f`, `>> f`, `<> f` (read-write, creating the file), `&> f`, `>&f` write
//! their target; here-documents and here-strings feed a command's input (and their bodies may
//! hold substitutions); `<` makes the input a file.

use tree_sitter::Node;

use super::safety::{Analyzer, SafetyClass};
use super::words::resolve;

impl Analyzer<'_> {
    pub(crate) fn redirected(&mut self, node: Node, src: &str, stdin: &Stdin) {
        let mut body_stdin = stdin.clone();
        let mut body = super::safety::children_with_fields(node)
            .into_iter()
            .find(|(field, _)| *field == Some("body"))
            .map(|(_, b)| b);
        // `cd data && echo x > r.csv` parses as one redirection of the whole list, but bash
        // gives it to the last command only: the earlier ones run first (their `cd` decides
        // where the target is).
        while let Some(list) = body.filter(|b| {
            b.kind() == "list"
                && !super::line_writes::has_background(*b)
                && b.named_child_count() > 1
        }) {
            let mut cursor = list.walk();
            let kids: Vec<Node> = list.named_children(&mut cursor).collect();
            let (last, first) = kids
                .split_last()
                .map_or((None, &[][..]), |(l, f)| (Some(*l), f));
            for k in first {
                self.any(*k, src, stdin);
            }
            body = last;
        }
        // `: > f`, `true > f`, `printf '' > f`, a bare `> f`: the redirection only empties
        // its target (R7-14).
        let only_empties =
            body.is_none_or(|b| super::removals::writes_nothing(&src[b.byte_range()]));
        for (field, child) in super::safety::children_with_fields(node) {
            if !child.is_named() || field == Some("body") {
                continue;
            }
            match child.kind() {
                "heredoc_redirect" => {
                    body_stdin = Stdin::Text(heredoc_text(child, src));
                    self.redirect_parts(child, src);
                }
                "herestring_redirect" => {
                    body_stdin = Stdin::Text(herestring_text(child, src));
                    self.redirect_parts(child, src);
                }
                "file_redirect" => {
                    let op = redirect_operator(child, src);
                    if op.starts_with('<') {
                        body_stdin = super::removals::input_from(child, src);
                    }
                    if only_empties && matches!(op.as_str(), ">" | ">|" | "&>") {
                        self.truncation(child, src);
                    }
                    self.file_redirect(child, src);
                }
                _ => self.any(child, src, stdin),
            }
        }
        if let Some(body) = body {
            self.any(body, src, &body_stdin);
        }
    }

    /// The parts of a here-doc/here-string redirect: substitutions in its body (unless the
    /// delimiter is quoted), chained redirects and the pipeline that may follow `<<EOF`.
    pub(crate) fn redirect_parts(&mut self, node: Node, src: &str) {
        let quoted = node
            .named_children(&mut node.walk())
            .find(|c| c.kind() == "heredoc_start")
            .is_some_and(|s| src[s.byte_range()].starts_with(['\'', '"', '\\']));
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in kids {
            match child.kind() {
                "heredoc_start" | "heredoc_end" | "file_descriptor" => {}
                "heredoc_body" if quoted => {}
                // `cat <<EOF | sh`: the pipeline continues after the here-doc operator.
                "pipeline" => {
                    let mut c = child.walk();
                    let parts: Vec<Node> = child.named_children(&mut c).collect();
                    for part in parts {
                        self.any(part, src, &Stdin::Pipe);
                    }
                }
                _ => self.any(child, src, &Stdin::Inherited),
            }
        }
    }

    /// `: > f`: the file's content is discarded (truncated to nothing), as by `truncate -s 0`.
    fn truncation(&mut self, node: Node, src: &str) {
        let mut cursor = node.walk();
        let target = node
            .children_by_field_name("destination", &mut cursor)
            .next()
            .map(|d| resolve(d, src));
        if let Some(w) = target
            && w.value().is_some_and(super::safety::is_sink)
        {
            return;
        }
        self.flag(
            SafetyClass::Destructive,
            format!(
                "`{}` empties the file it redirects to",
                src[node.byte_range()].trim()
            ),
        );
    }

    pub(crate) fn file_redirect(&mut self, node: Node, src: &str) {
        let op = redirect_operator(node, src);
        let mut cursor = node.walk();
        let dests: Vec<Node> = node
            .children_by_field_name("destination", &mut cursor)
            .collect();
        for d in &dests {
            self.any(*d, src, &Stdin::Inherited);
        }
        if !matches!(
            op.as_str(),
            "<" | ">" | ">>" | ">|" | "&>" | "&>>" | "<>" | ">&" | "<&" | ">&-" | "<&-"
        ) {
            self.flag(
                SafetyClass::Unknown,
                format!("the redirection `{op}` is not one Keel knows"),
            );
            return;
        }
        if op == "<" || op == "<>" {
            // What a program reads on its standard input may be its program (`python3 <
            // g.py`, `bash < r.sh`, `$(<r.sh)`): fingerprinted (R4-8).
            if let Some(d) = dests.first() {
                let w = resolve(*d, src);
                if w.literal {
                    super::project::record_program_file(self, &w.text);
                }
            }
        }
        let writes = matches!(op.as_str(), ">" | ">>" | ">|" | "&>" | "&>>" | "<>");
        let dup_to_file = op == ">&"
            && dests.first().is_some_and(|d| {
                let w = resolve(*d, src);
                !(w.literal && (w.text == "-" || w.text.chars().all(|c| c.is_ascii_digit())))
            });
        if !(writes || dup_to_file) {
            return;
        }
        match dests.first() {
            Some(d) => {
                let w = resolve(*d, src);
                let how = format!("redirection `{op}`");
                let appends = matches!(op.as_str(), ">>" | "&>>");
                let keeps = std::mem::replace(&mut self.keeps_content, appends);
                self.write_target(&w, &how);
                self.keeps_content = keeps;
            }
            None => self.flag(
                SafetyClass::Unknown,
                format!("redirection `{op}` without a target"),
            ),
        }
    }
}

/// The operator of a redirect as bash reads it: the text between the file descriptor and the
/// target, spaces removed (the grammar splits `<>` into `<` and an error node).
pub(crate) fn redirect_operator(node: Node, src: &str) -> String {
    let mut cursor = node.walk();
    let kids: Vec<Node> = node.children(&mut cursor).collect();
    let start = kids
        .iter()
        .find(|c| c.kind() != "file_descriptor")
        .map_or(node.start_byte(), |c| c.start_byte());
    let end = node
        .child_by_field_name("destination")
        .map_or(node.end_byte(), |d| d.start_byte());
    src.get(start..end.max(start))
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}

pub(crate) fn heredoc_text(node: Node, src: &str) -> Option<String> {
    let quoted = node
        .named_children(&mut node.walk())
        .find(|c| c.kind() == "heredoc_start")
        .is_some_and(|s| src[s.byte_range()].starts_with(['\'', '"', '\\']));
    let body = node
        .named_children(&mut node.walk())
        .find(|c| c.kind() == "heredoc_body")?;
    // An unquoted body with expansions is not literal.
    if !quoted && body.named_child_count() > 0 {
        let mut cursor = body.walk();
        if body
            .named_children(&mut cursor)
            .any(|c| c.kind() != "heredoc_content")
        {
            return None;
        }
    }
    Some(src[body.byte_range()].to_string())
}

pub(crate) fn herestring_text(node: Node, src: &str) -> Option<String> {
    let value = node.named_children(&mut node.walk()).last()?;
    resolve(value, src).value().map(str::to_string)
}

/// Where a simple command's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stdin {
    /// Inherited (closed when Keel runs it).
    Inherited,
    /// The output of another command.
    Pipe,
    /// A here-document or here-string; its text when literal.
    Text(Option<String>),
    /// A file (its path when literal: a patch `patch` reads).
    File(Option<String>),
}

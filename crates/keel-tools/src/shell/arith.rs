//! Values that bash evaluates as code: arithmetic. In `$((n))`, `((n))`, `let`, `[[ n -eq 1 ]]`,
//! `for ((…))`, array subscripts, `${x:n}`, `declare -i` assignments, `${!n}`, `[[ -v n ]]` and
//! `${n@P}`, bash reads the *value* of `n` as an expression, and an array subscript in that
//! value (`a[$(rm -rf src)]`) runs its command substitution. So a variable used there must
//! have a value the script itself fixed (a literal or an arithmetic result, never anything
//! read, substituted or globbed at run time), else the command is unknown.
//!
//! Which variables are fixed is decided before the walk ([`fixed_variables`]) over the whole
//! script, so a later assignment in a loop cannot change a value judged earlier.

use std::collections::HashSet;

use tree_sitter::Node;

use super::safety::{Analyzer, SafetyClass};
use super::words::resolve;

/// Variables bash itself keeps numeric (or that hold no user data).
const NUMERIC_SPECIALS: &[&str] = &[
    "#",
    "?",
    "$",
    "!",
    "-",
    "RANDOM",
    "SRANDOM",
    "LINENO",
    "SECONDS",
    "EPOCHSECONDS",
    "EPOCHREALTIME",
    "BASHPID",
    "PPID",
    "UID",
    "EUID",
    "OPTIND",
    "SHLVL",
    "HISTCMD",
    "BASH_SUBSHELL",
];

/// The variables of a script, decided before it is walked.
#[derive(Debug, Default, Clone)]
pub(crate) struct Variables {
    /// Assigned only literal or arithmetic values, everywhere in the script.
    fixed: HashSet<String>,
    /// Declared integer (`declare -i`): every assignment to them is arithmetic.
    integers: HashSet<String>,
    /// Declared associative (`declare -A`): their subscripts are strings, not arithmetic.
    associative: HashSet<String>,
}

impl Variables {
    fn is_fixed(&self, name: &str) -> bool {
        NUMERIC_SPECIALS.contains(&name) || self.fixed.contains(name)
    }

    pub(crate) fn is_integer(&self, name: &str) -> bool {
        self.integers.contains(name)
    }
}

/// Collects which variables of the script at `root` are fixed, integer or associative. The
/// walk is iterative: a script nested 10,000 levels deep must not overflow a small stack.
pub(crate) fn fixed_variables(root: Node, src: &str) -> Variables {
    let mut literal = HashSet::new();
    let mut runtime = HashSet::new();
    let mut vars = Variables::default();
    let mut opaque = false;
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        visit(
            node,
            src,
            &mut literal,
            &mut runtime,
            &mut vars,
            &mut opaque,
        );
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    if !opaque {
        vars.fixed = literal.difference(&runtime).cloned().collect();
    }
    vars
}

fn visit(
    node: Node,
    src: &str,
    literal: &mut HashSet<String>,
    runtime: &mut HashSet<String>,
    vars: &mut Variables,
    opaque: &mut bool,
) {
    match node.kind() {
        "variable_assignment" => {
            if let Some(name) = node.child_by_field_name("name")
                && name.kind() == "variable_name"
            {
                let name = src[name.byte_range()].to_string();
                let fixed = node
                    .child_by_field_name("value")
                    .is_some_and(|v| is_fixed_value(v, src));
                if fixed {
                    literal.insert(name);
                } else {
                    runtime.insert(name);
                }
            }
        }
        "for_statement" => {
            if let Some(var) = node.child_by_field_name("variable") {
                let name = src[var.byte_range()].to_string();
                let mut cursor = node.walk();
                let values: Vec<Node> = node.children_by_field_name("value", &mut cursor).collect();
                let fixed = !values.is_empty()
                    && values.iter().all(|v| {
                        let w = resolve(*v, src);
                        w.literal && !w.glob
                    });
                if fixed {
                    literal.insert(name);
                } else {
                    runtime.insert(name);
                }
            }
        }
        "declaration_command" => {
            let mut cursor = node.walk();
            let kids: Vec<Node> = node.named_children(&mut cursor).collect();
            let flags: String = kids
                .iter()
                .filter(|k| k.kind() == "word")
                .map(|k| &src[k.byte_range()])
                .filter(|w| w.starts_with('-'))
                .collect();
            for k in &kids {
                let name = match k.kind() {
                    "variable_name" => Some(&src[k.byte_range()]),
                    "variable_assignment" => k
                        .child_by_field_name("name")
                        .filter(|n| n.kind() == "variable_name")
                        .map(|n| &src[n.byte_range()]),
                    _ => None,
                };
                if let Some(name) = name {
                    if flags.contains('i') {
                        vars.integers.insert(name.to_string());
                    }
                    if flags.contains('A') {
                        vars.associative.insert(name.to_string());
                    }
                }
            }
        }
        "command" => {
            // Names assigned at run time by builtins, and code that may assign anything.
            let mut cursor = node.walk();
            let words: Vec<String> = node
                .children(&mut cursor)
                .enumerate()
                .filter(|(i, _)| {
                    matches!(
                        node.field_name_for_child(*i as u32),
                        Some("name") | Some("argument")
                    )
                })
                .map(|(_, n)| resolve(n.named_child(0).unwrap_or(n), src).text)
                .collect();
            match words.first().map(String::as_str) {
                Some("eval" | "source" | "." | "alias") => *opaque = true,
                Some("read" | "mapfile" | "readarray" | "getopts" | "printf" | "wait") => {
                    for w in &words[1..] {
                        if !w.starts_with('-') {
                            runtime.insert(w.split('[').next().unwrap_or(w).to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
}

/// A value fixed by the script: a literal word without expansions, a number, or an arithmetic
/// expansion (its result is a number).
fn is_fixed_value(value: Node, src: &str) -> bool {
    match value.kind() {
        "number" | "arithmetic_expansion" => true,
        "array" => false,
        _ => resolve(value, src).literal,
    }
}

/// Judges an arithmetic context whose text is `text` (an expression as bash evaluates it).
pub(crate) fn expression(a: &mut Analyzer, text: &str, what: &str) {
    if text.contains("$(") || text.contains('`') {
        a.flag(
            SafetyClass::Unknown,
            format!(
                "{what} evaluates the output of a command as arithmetic, which can run commands"
            ),
        );
        return;
    }
    for name in identifiers(text) {
        if !a.vars.is_fixed(&name) {
            a.flag(
                SafetyClass::Unknown,
                format!(
                    "{what} evaluates the value of `{name}` as arithmetic; a value not fixed by the command (read, substituted or from the environment) can run commands through an array subscript"
                ),
            );
            return;
        }
    }
}

/// The variable names an arithmetic expression mentions: identifiers, `$name`, `${name…}`;
/// not the digits of `16#ff` or `0x1f`.
fn identifiers(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            // A number, with its base and digits (`16#ff`, `0x1F`, `1e3` is not bash).
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '#') {
                i += 1;
            }
            continue;
        }
        if c == '$' && matches!(chars.get(i + 1), Some('#' | '?' | '$' | '!' | '-')) {
            i += 2;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
            continue;
        }
        if c == '$' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
            // A positional parameter: a value from outside.
            out.push(chars[i + 1].to_string());
            i += 2;
            continue;
        }
        i += 1;
    }
    out
}

/// `((…))`, `$((…))`, `$[…]`: the node's text without its delimiters.
pub(crate) fn arithmetic_node(a: &mut Analyzer, node: Node, src: &str) {
    let text = &src[node.byte_range()];
    let inner = text
        .trim_start_matches('$')
        .trim_start_matches(['(', '['])
        .trim_end_matches([')', ']']);
    expression(a, inner, &format!("`{}`", short(text)));
}

/// `for ((init; cond; update))`: the three parts.
pub(crate) fn c_style_for(a: &mut Analyzer, node: Node, src: &str) {
    let text = &src[node.byte_range()];
    let head = text
        .split_once("((")
        .and_then(|(_, rest)| rest.split_once("))"))
        .map_or(text, |(h, _)| h);
    expression(a, head, "`for ((…))`");
}

/// `${…}`: indirection (`${!n}`), prompt expansion (`${n@P}`) and substring offsets
/// (`${x:n:m}`) read a variable's value as code or arithmetic.
pub(crate) fn expansion(a: &mut Analyzer, node: Node, src: &str) {
    let text = &src[node.byte_range()];
    let Some(body) = text.strip_prefix("${").and_then(|t| t.strip_suffix('}')) else {
        return;
    };
    if let Some(name) = body.strip_prefix('!') {
        // `${!arr[@]:off}`: the keys, sliced by an arithmetic offset.
        if let Some((_, offsets)) = name.split_once("]:") {
            expression(a, &offsets.replace(':', " "), &format!("`{text}`"));
            return;
        }
        let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if name.contains("@P") {
            // `${!x@P}`: the variable `x` names, expanded as a prompt string.
            a.flag(
                SafetyClass::Unknown,
                format!(
                    "`{text}` expands a variable as a prompt string, which runs the command substitutions in its value"
                ),
            );
        } else if plain && !a.vars.is_fixed(name) {
            a.flag(
                SafetyClass::Unknown,
                format!(
                    "`{text}` expands the variable named by `{name}`'s value; an array subscript in it runs commands"
                ),
            );
        }
        return;
    }
    let name_len = body
        .char_indices()
        .find(|(i, c)| {
            !(c.is_ascii_alphanumeric() || *c == '_' || (*i == 0 && "@*#?$!-".contains(*c)))
        })
        .map_or(body.len(), |(i, _)| i);
    let (name, rest) = body.split_at(name_len);
    // `${arr[@]:off}`, `${arr[*]:off:len}`, `${arr[i]:off}`: the subscript (judged on its own
    // as a subscript node) is followed by the same arithmetic offsets (pass 2, R9).
    let rest = match rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((_, after)) => after,
        None => rest,
    };
    if let Some(op) = rest.strip_prefix('@') {
        if op.starts_with('P') {
            a.flag(
                SafetyClass::Unknown,
                format!(
                    "`{text}` expands `{name}` as a prompt string, which runs the command substitutions in its value"
                ),
            );
        }
        return;
    }
    // `${x:off}`, `${x:off:len}` (not `:-`, `:=`, `:+`, `:?`).
    if let Some(offsets) = rest.strip_prefix(':')
        && !offsets.starts_with(['-', '=', '+', '?'])
    {
        expression(a, &offsets.replace(':', " "), &format!("`{text}`"));
    }
}

/// `( [index]=value … )`: the indices of an indexed array literal are arithmetic.
pub(crate) fn array_literal(a: &mut Analyzer, node: Node, src: &str, name: &str) {
    if a.vars.associative.contains(name) {
        return;
    }
    let mut cursor = node.walk();
    let kids: Vec<Node> = node.named_children(&mut cursor).collect();
    for k in kids {
        let text = &src[k.byte_range()];
        if let Some(rest) = text.strip_prefix('[')
            && let Some((index, _)) = rest.split_once("]=")
        {
            expression(a, index, &format!("the array index `[{index}]`"));
        }
    }
}

/// `name[index]`: the index of an indexed array is arithmetic.
pub(crate) fn subscript(a: &mut Analyzer, node: Node, src: &str) {
    let Some(name) = node.child_by_field_name("name") else {
        return;
    };
    let name = &src[name.byte_range()];
    if a.vars.associative.contains(name) {
        return;
    }
    let Some(index) = node.child_by_field_name("index") else {
        return;
    };
    let text = &src[index.byte_range()];
    if text == "@" || text == "*" {
        return;
    }
    expression(
        a,
        text,
        &format!("the subscript `{}`", short(&src[node.byte_range()])),
    );
}

/// `[[ a -eq b ]]` (arithmetic operands) and `[[ -v name ]]` / `[ -v name ]` (a variable name,
/// whose subscript is arithmetic).
pub(crate) fn test_command(a: &mut Analyzer, node: Node, src: &str) {
    let double = src[node.byte_range()].starts_with("[[");
    visit_tests(a, node, src, double, 0);
}

fn visit_tests(a: &mut Analyzer, node: Node, src: &str, double: bool, depth: usize) {
    if depth > 50 {
        return;
    }
    match node.kind() {
        "binary_expression" => {
            let op = node
                .child_by_field_name("operator")
                .map(|o| &src[o.byte_range()])
                .unwrap_or("");
            if double && matches!(op, "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge") {
                for side in ["left", "right"] {
                    if let Some(s) = node.child_by_field_name(side) {
                        operand(a, s, src, op);
                    }
                }
            }
        }
        "unary_expression" => {
            let op = node
                .child_by_field_name("operator")
                .map(|o| &src[o.byte_range()])
                .unwrap_or("");
            if op == "-v" {
                let mut cursor = node.walk();
                let target = node.named_children(&mut cursor).last();
                if let Some(t) = target.filter(|t| t.kind() != "test_operator") {
                    variable_name_word(a, t, src, "`-v`");
                }
            }
        }
        _ => {}
    }
    let mut cursor = node.walk();
    let kids: Vec<Node> = node.named_children(&mut cursor).collect();
    for k in kids {
        visit_tests(a, k, src, double, depth + 1);
    }
}

fn operand(a: &mut Analyzer, node: Node, src: &str, op: &str) {
    let w = resolve(node, src);
    let text = if w.literal {
        w.text
    } else {
        src[node.byte_range()].to_string()
    };
    expression(a, &text, &format!("`[[ … {op} … ]]`"));
}

/// A word naming a variable (`-v NAME`, `read NAME`, `printf -v NAME`): not known before it
/// runs, or with a subscript mentioning values not fixed, it can run commands.
pub(crate) fn variable_name_word(a: &mut Analyzer, node: Node, src: &str, what: &str) {
    let w = resolve(node, src);
    variable_name_text(a, w.value(), &src[node.byte_range()], what);
}

/// [`variable_name_word`] for an already-resolved word (`None`: not literal).
pub(crate) fn variable_name_text(a: &mut Analyzer, value: Option<&str>, source: &str, what: &str) {
    match value {
        None => a.flag(
            SafetyClass::Unknown,
            format!(
                "{what} names a variable with `{source}`, not known before it runs; an array subscript in it runs commands"
            ),
        ),
        Some(v) => {
            if let Some((_, index)) = v.split_once('[') {
                let index = index.trim_end_matches(']');
                if index != "@" && index != "*" {
                    expression(a, index, &format!("{what} `{v}`"));
                }
            }
        }
    }
}

fn short(text: &str) -> String {
    let s: String = text.chars().take(40).collect();
    if s.len() < text.len() {
        format!("{s}…")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::identifiers;

    #[test]
    fn identifiers_skip_numbers_in_any_base() {
        assert_eq!(identifiers("n + 16#ff * 0x1F - $m"), ["n", "m"]);
        assert_eq!(identifiers("${#x} + $? + $1"), ["x", "1"]);
        assert!(identifiers("1 + 2").is_empty());
    }
}

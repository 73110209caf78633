//! `${…}` references in flow text: parsing, and filling them in at run time.

use std::collections::BTreeMap;

use crate::ir::{Part, Ref, Template, Value};

/// Parses `text` into literal parts and references; the error says what is wrong.
pub fn parse(text: &str) -> Result<Template, String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        if start > 0 {
            parts.push(Part::Text(rest[..start].to_string()));
        }
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!(
                "`${{` without a closing `}}` in `{}`",
                crate::short(text, 60)
            ));
        };
        parts.push(Part::Ref(parse_ref(after[..end].trim())?));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest.to_string()));
    }
    Ok(Template { parts })
}

/// Parses the inside of `${…}`: `inputs.NAME`, `nodes.ID.FIELD`, `run.id` or `run.short`.
pub fn parse_ref(inner: &str) -> Result<Ref, String> {
    let pieces: Vec<&str> = inner.split('.').collect();
    match pieces.as_slice() {
        ["inputs", name] if !name.is_empty() => Ok(Ref::Input((*name).to_string())),
        ["nodes", node, field] if !node.is_empty() && !field.is_empty() => Ok(Ref::Node {
            node: (*node).to_string(),
            field: (*field).to_string(),
        }),
        ["nodes", node] if !node.is_empty() => Ok(Ref::Node {
            node: (*node).to_string(),
            field: "output".to_string(),
        }),
        ["run", "id"] => Ok(Ref::RunId),
        ["run", "short"] => Ok(Ref::RunShort),
        _ => Err(format!(
            "`${{{inner}}}` is not a reference; write `${{inputs.NAME}}`, `${{nodes.ID.output}}` (or another field of the node), `${{run.id}}` or `${{run.short}}`"
        )),
    }
}

/// The last 8 hex digits of a run id (a UUIDv7's random end: its start is a timestamp, shared
/// by runs started close together), for names such as a delivered branch.
pub fn short_run_id(run_id: &str) -> String {
    let hex: Vec<char> = run_id.chars().filter(char::is_ascii_hexdigit).collect();
    hex[hex.len().saturating_sub(8)..].iter().collect()
}

/// What references resolve against at run time.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub run_id: &'a str,
    pub inputs: &'a BTreeMap<String, Value>,
    pub outputs: &'a BTreeMap<String, BTreeMap<String, Value>>,
}

impl Scope<'_> {
    pub fn lookup(&self, r: &Ref) -> Option<Value> {
        match r {
            Ref::Input(n) => self.inputs.get(n).cloned(),
            Ref::Node { node, field } => self.outputs.get(node)?.get(field).cloned(),
            Ref::RunId => Some(Value::String(self.run_id.to_string())),
            Ref::RunShort => Some(Value::String(short_run_id(self.run_id))),
        }
    }

    /// The template with its references filled in; a reference without a value (a node that
    /// was skipped) becomes an empty string.
    pub fn render(&self, t: &Template) -> String {
        let mut out = String::new();
        for p in &t.parts {
            match p {
                Part::Text(s) => out.push_str(s),
                Part::Ref(r) => {
                    if let Some(v) = self.lookup(r) {
                        out.push_str(&v.to_string());
                    }
                }
            }
        }
        out
    }
}

/// How a command line's text around a reference is quoted, as far as the reference goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Quoting {
    None,
    Single,
    Double,
    /// `$'…'` (backslash escapes inside).
    Ansi,
}

impl Quoting {
    /// The state after the shell reads `text` in this state.
    fn after(mut self, text: &str) -> Self {
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            self = match (self, c) {
                (Self::None | Self::Double | Self::Ansi, '\\') => {
                    chars.next();
                    self
                }
                (Self::None, '$') if chars.peek() == Some(&'\'') => {
                    chars.next();
                    Self::Ansi
                }
                (Self::None, '\'') => Self::Single,
                (Self::None, '"') => Self::Double,
                (Self::Single | Self::Ansi, '\'') | (Self::Double, '"') => Self::None,
                (s, _) => s,
            };
        }
        self
    }

    /// Shell text that expands variable `name` as one word in this quoting state.
    fn expansion(self, name: &str) -> String {
        match self {
            Self::None => format!("\"${{{name}}}\""),
            Self::Double => format!("${{{name}}}"),
            Self::Single => format!("'\"${{{name}}}\"'"),
            Self::Ansi => format!("'\"${{{name}}}\"$'"),
        }
    }
}

impl Scope<'_> {
    /// A command line (`shell`/`test`/`verify` node) with its references filled in as data,
    /// never as shell syntax: each reference becomes an expansion of an environment variable
    /// (quoted to suit where it stands: `"${KEEL_FLOW_REF_1}"`, inside `'…'` the quote is
    /// closed around it), and the returned variables carry the values. A model's answer such
    /// as `fine'; rm -rf src; echo '` stays one argument — the shell never parses the result
    /// of an expansion as commands.
    pub fn render_command(&self, t: &Template) -> (String, Vec<(String, String)>) {
        let mut out = String::new();
        let mut env = Vec::new();
        let mut quoting = Quoting::None;
        for p in &t.parts {
            match p {
                Part::Text(s) => {
                    out.push_str(s);
                    quoting = quoting.after(s);
                }
                Part::Ref(r) => {
                    let value = self.lookup(r).map(|v| v.to_string()).unwrap_or_default();
                    let name = format!("KEEL_FLOW_REF_{}", env.len() + 1);
                    out.push_str(&quoting.expansion(&name));
                    env.push((name, value));
                }
            }
        }
        (out, env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(command: &str, env: &[(String, String)]) -> String {
        // Tests run the shell directly: the quoting is the shell's business, not Keel's runner.
        #[allow(clippy::disallowed_methods)]
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output();
        match out {
            Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
            Err(e) => panic!("cannot run sh: {e}"),
        }
    }

    #[test]
    fn a_reference_in_a_command_is_data_wherever_it_stands() {
        // Red-team B23: the model's answer closed the flow author's quote and ran a command.
        let evil = "fine'; echo INJECTED; echo '\" $(echo SUBST) `echo TICK` ${HOME} \\";
        let inputs = BTreeMap::new();
        let mut outputs = BTreeMap::new();
        outputs.insert(
            "a".to_string(),
            BTreeMap::from([("output".to_string(), Value::String(evil.to_string()))]),
        );
        let scope = Scope {
            run_id: "r",
            inputs: &inputs,
            outputs: &outputs,
        };
        for template in [
            "printf '%s|' '${nodes.a.output}'",
            "printf '%s|' \"${nodes.a.output}\"",
            "printf '%s|' ${nodes.a.output}",
            "printf '%s|' $'${nodes.a.output}'",
            "printf '%s|' 'say: ${nodes.a.output}!'",
        ] {
            let t = parse(template).unwrap_or_else(|e| panic!("{e}"));
            let (cmd, env) = scope.render_command(&t);
            assert!(!cmd.contains("INJECTED"), "{cmd}");
            let out = sh(&cmd, &env);
            assert!(!out.contains("INJECTED|"), "{template}: {out}");
            assert!(
                !out.contains("SUBST|") && !out.contains("TICK|"),
                "{template}: {out}"
            );
            assert!(
                out.contains(evil),
                "{template}: the value arrives whole: {out}"
            );
        }
        // The author's own text around it is kept.
        let t = parse("printf '%s|' 'say: ${nodes.a.output}!'").unwrap_or_else(|e| panic!("{e}"));
        let (cmd, env) = scope.render_command(&t);
        assert_eq!(sh(&cmd, &env), format!("say: {evil}!|"));
    }
}

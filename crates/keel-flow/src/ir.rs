//! The typed intermediate representation a flow file compiles to: what the executor runs.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where something is in the flow file (1-based line and column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Pos {
    pub line: u64,
    pub column: u64,
}

/// The type of a value flowing between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Type {
    String,
    Bool,
    Number,
}

impl Type {
    pub fn parse(s: &str) -> Option<Type> {
        match s {
            "string" => Some(Type::String),
            "bool" | "boolean" => Some(Type::Bool),
            "number" => Some(Type::Number),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Bool => "bool",
            Type::Number => "number",
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A typed value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Bool(bool),
    Number(f64),
    String(String),
}

impl Value {
    pub fn ty(&self) -> Type {
        match self {
            Value::String(_) => Type::String,
            Value::Bool(_) => Type::Bool,
            Value::Number(_) => Type::Number,
        }
    }

    /// Parses `text` as a value of type `ty` (a `--input k=v` or a model's answer).
    pub fn parse_as(text: &str, ty: Type) -> Option<Value> {
        let t = text.trim();
        match ty {
            Type::String => Some(Value::String(text.to_string())),
            Type::Bool => {
                let word = t
                    .split(|c: char| !c.is_ascii_alphabetic())
                    .find(|w| !w.is_empty())?
                    .to_ascii_lowercase();
                match word.as_str() {
                    "true" | "yes" => Some(Value::Bool(true)),
                    "false" | "no" => Some(Value::Bool(false)),
                    _ => None,
                }
            }
            Type::Number => t.parse::<f64>().ok().map(Value::Number),
        }
    }

    pub fn from_json(v: &serde_json::Value) -> Option<Value> {
        match v {
            serde_json::Value::Bool(b) => Some(Value::Bool(*b)),
            serde_json::Value::Number(n) => n.as_f64().map(Value::Number),
            serde_json::Value::String(s) => Some(Value::String(s.clone())),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::String(s) => f.write_str(s),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Number(n) => write!(f, "{n}"),
        }
    }
}

/// A reference inside `${…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ref {
    /// `${inputs.NAME}`
    Input(String),
    /// `${nodes.ID.FIELD}`
    Node { node: String, field: String },
    /// `${run.id}`: the run's id.
    RunId,
    /// `${run.short}`: the run id's last 8 hex digits.
    RunShort,
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ref::Input(n) => write!(f, "inputs.{n}"),
            Ref::Node { node, field } => write!(f, "nodes.{node}.{field}"),
            Ref::RunId => f.write_str("run.id"),
            Ref::RunShort => f.write_str("run.short"),
        }
    }
}

/// A piece of text with `${…}` references, parsed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Template {
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Part {
    Text(String),
    Ref(Ref),
}

impl Template {
    pub fn refs(&self) -> impl Iterator<Item = &Ref> {
        self.parts.iter().filter_map(|p| match p {
            Part::Ref(r) => Some(r),
            Part::Text(_) => None,
        })
    }
}

/// `parallel`: which branch's changes are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Select {
    /// The first branch (in file order) whose last node passed.
    Passing,
}

/// What a node does.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    Agent(AgentSpec),
    Shell {
        command: Template,
    },
    Test {
        command: Template,
    },
    Verify {
        command: Template,
    },
    Review {
        agent: AgentSpec,
        on_changes: Option<String>,
        max_loops: u32,
    },
    Branch {
        negate: bool,
        condition: Ref,
        then: Vec<String>,
        otherwise: Vec<String>,
    },
    Parallel {
        branches: Vec<ParallelBranch>,
        select: Select,
    },
    Deliver {
        branch: Template,
        message: Template,
        pr_file: Option<String>,
    },
}

impl NodeKind {
    pub fn name(&self) -> &'static str {
        match self {
            NodeKind::Agent(_) => "agent",
            NodeKind::Shell { .. } => "shell",
            NodeKind::Test { .. } => "test",
            NodeKind::Verify { .. } => "verify",
            NodeKind::Review { .. } => "review",
            NodeKind::Branch { .. } => "branch",
            NodeKind::Parallel { .. } => "parallel",
            NodeKind::Deliver { .. } => "deliver",
        }
    }
}

/// A leaf task for a model.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub task: Template,
    pub role: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The scripted provider's script, resolved against the flow file's directory.
    pub script: Option<PathBuf>,
    /// The type the model's final answer is read as.
    pub output: Type,
    /// Whether the session runs its final verification gates (`verify: true`); a flow's test
    /// and verify nodes are its gates otherwise.
    pub verify: bool,
}

/// One branch of a `parallel` node: its nodes run in order in a copy of the workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct ParallelBranch {
    pub name: String,
    pub nodes: Vec<Node>,
}

/// A node of the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: String,
    pub kind: NodeKind,
    /// Nodes that must finish first (declared `needs`, references and `branch` gating).
    pub deps: Vec<String>,
    pub timeout: Duration,
    pub max_steps: Option<u32>,
    pub validation_command: Option<String>,
    pub rollback_command: Option<String>,
    pub pos: Pos,
}

/// A declared input.
#[derive(Debug, Clone, PartialEq)]
pub struct InputDecl {
    pub name: String,
    pub ty: Type,
    pub default: Option<Value>,
    pub description: Option<String>,
}

/// A compiled, validated flow.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub name: String,
    pub description: Option<String>,
    /// The file it came from (for messages and relative paths).
    pub file: PathBuf,
    pub inputs: Vec<InputDecl>,
    pub max_parallel: usize,
    /// Top-level nodes in file order.
    pub nodes: Vec<Node>,
}

impl Flow {
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Every node id, those inside `parallel` branches included, in file order.
    pub fn all_node_ids(&self) -> Vec<String> {
        let mut out = Vec::new();
        for n in &self.nodes {
            out.push(n.id.clone());
            if let NodeKind::Parallel { branches, .. } = &n.kind {
                for b in branches {
                    out.extend(b.nodes.iter().map(|n| n.id.clone()));
                }
            }
        }
        out
    }

    /// Drops every agent node's own `provider` and `model` (those inside `parallel` branches
    /// included), and any `script` for which `script_ok` says no, and returns the ids of the
    /// nodes that set one. A flow file in the workspace is repository content, and a
    /// repository may not choose where the user's data goes — as `[llm]` in a project's
    /// `.keel/config.toml` may only suggest. A node's `script` may stay: it runs the local
    /// scripted provider (nothing leaves the machine), and its tool calls are judged by the
    /// user's approval policy and confined by the sandbox like any model's — when it is a
    /// file of the workspace (`script_ok`), not one the repository points at elsewhere.
    pub fn drop_model_choices(&mut self, script_ok: &dyn Fn(&Path) -> bool) -> Vec<String> {
        fn drop_in(nodes: &mut [Node], script_ok: &dyn Fn(&Path) -> bool, out: &mut Vec<String>) {
            for n in nodes {
                match &mut n.kind {
                    NodeKind::Agent(spec) | NodeKind::Review { agent: spec, .. } => {
                        let local = spec.provider.as_deref() == Some("scripted");
                        let foreign_script = spec.script.as_deref().is_some_and(|s| !script_ok(s));
                        if (spec.provider.is_some() && !local)
                            || spec.model.is_some()
                            || foreign_script
                        {
                            out.push(n.id.clone());
                            spec.provider = None;
                            spec.model = None;
                        }
                        if foreign_script {
                            spec.script = None;
                        }
                    }
                    NodeKind::Parallel { branches, .. } => {
                        for b in branches {
                            drop_in(&mut b.nodes, script_ok, out);
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        drop_in(&mut self.nodes, script_ok, &mut out);
        out
    }

    /// Resolves `--input k=v` pairs against the declarations: types checked, defaults filled.
    pub fn resolve_inputs(
        &self,
        given: &[(String, String)],
    ) -> Result<BTreeMap<String, Value>, String> {
        let mut out = BTreeMap::new();
        for (k, v) in given {
            let Some(decl) = self.inputs.iter().find(|d| &d.name == k) else {
                let names: Vec<&str> = self.inputs.iter().map(|d| d.name.as_str()).collect();
                return Err(format!(
                    "flow `{}` has no input `{k}` (its inputs: {})",
                    self.name,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ));
            };
            let value = Value::parse_as(v, decl.ty).ok_or_else(|| {
                format!(
                    "input `{k}` is a {}, and `{v}` is not one; pass e.g. --input {k}={}",
                    decl.ty,
                    match decl.ty {
                        Type::Bool => "true",
                        Type::Number => "3",
                        Type::String => "text",
                    }
                )
            })?;
            out.insert(k.clone(), value);
        }
        for decl in &self.inputs {
            if out.contains_key(&decl.name) {
                continue;
            }
            match &decl.default {
                Some(d) => {
                    out.insert(decl.name.clone(), d.clone());
                }
                None => {
                    return Err(format!(
                        "flow `{}` needs input `{}` ({}); pass --input {}=…",
                        self.name, decl.name, decl.ty, decl.name
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// The fields a node of `kind` outputs, with their types.
pub fn output_fields(kind: &NodeKind) -> Vec<(&'static str, Type)> {
    match kind {
        NodeKind::Agent(a) => vec![("output", a.output)],
        NodeKind::Shell { .. } => vec![("output", Type::String), ("exit_code", Type::Number)],
        NodeKind::Test { .. } => vec![
            ("output", Type::String),
            ("passed", Type::Bool),
            ("exit_code", Type::Number),
        ],
        NodeKind::Verify { .. } => vec![("output", Type::String), ("passed", Type::Bool)],
        NodeKind::Review { .. } => vec![
            ("output", Type::String),
            ("approved", Type::Bool),
            ("verdict", Type::String),
        ],
        NodeKind::Branch { .. } => vec![("output", Type::String)],
        NodeKind::Parallel { .. } => vec![("output", Type::String), ("passed", Type::Bool)],
        NodeKind::Deliver { .. } => vec![("output", Type::String), ("commit", Type::String)],
    }
}

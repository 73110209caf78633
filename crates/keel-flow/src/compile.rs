//! Flow file → [`Flow`]: parsing with positions, then every check that can be made before
//! anything runs (unknown node types, missing fields, missing references, type mismatches,
//! cycles). All mistakes are reported together, each as `file:line:column: message`.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_saphyr::{Location, Spanned};

pub use crate::graph::ancestors;
use crate::graph::{kind_refs, visit};
use crate::ir::{
    AgentSpec, Flow, InputDecl, Node, NodeKind, ParallelBranch, Pos, Ref, Select, Template, Type,
    Value, output_fields,
};
use crate::spec::{RawFlow, RawNode};
use crate::template;

/// The node types a flow may use.
pub const NODE_TYPES: &[&str] = &[
    "agent", "shell", "test", "verify", "review", "branch", "parallel", "deliver",
];

/// Default per-node timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// What kind of mistake a diagnostic reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagKind {
    Syntax,
    UnknownNodeType,
    MissingReference,
    Cycle,
    TypeMismatch,
    Invalid,
}

/// One mistake in a flow file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub file: String,
    pub pos: Pos,
    pub kind: DiagKind,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.pos.line, self.pos.column, self.message
        )
    }
}

/// Every mistake found in a flow file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct CompileError {
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

fn pos(l: &Location) -> Pos {
    Pos {
        line: l.line(),
        column: l.column(),
    }
}

/// Reads ([`read_flow`]) and compiles the flow file at `path`; `root` is the workspace.
pub fn compile_file(root: &Path, path: &Path) -> Result<Flow, CompileError> {
    let file = path.display().to_string();
    let read = read_flow(root, path).map_err(|e| format!("it {}", e.problem));
    match read.and_then(|t| t.ok_or_else(|| "it does not exist".to_string())) {
        Ok(text) => compile(&text, path),
        Err(e) => Err(CompileError {
            diagnostics: vec![Diagnostic {
                file,
                pos: Pos { line: 0, column: 0 },
                kind: DiagKind::Syntax,
                message: format!("cannot read the flow file: {e}"),
            }],
        }),
    }
}

/// The text of the flow file at `path`, read like any file the user names
/// ([`keel_tools::project::read_named_file`]): in the workspace at `root` as a project file
/// (a symlink out of the workspace refused), elsewhere as the user's own; regular files only,
/// never blocking on a FIFO, at most [`keel_tools::project::DEFINITION_LIMIT`].
pub fn read_flow(
    root: &Path,
    path: &Path,
) -> Result<Option<String>, keel_tools::project::ProjectFileError> {
    keel_tools::project::read_named_file(root, path, keel_tools::project::DEFINITION_LIMIT)
}

/// Compiles flow `text` (from `path`, used in messages and to resolve relative script paths).
pub fn compile(text: &str, path: &Path) -> Result<Flow, CompileError> {
    let file = path.display().to_string();
    let raw: RawFlow = serde_saphyr::from_str(text).map_err(|e| {
        let p = e.location().map(|l| pos(&l)).unwrap_or_default();
        CompileError {
            diagnostics: vec![Diagnostic {
                file: file.clone(),
                pos: p,
                kind: DiagKind::Syntax,
                message: first_line(&e.to_string()),
            }],
        }
    })?;
    let mut c = Compiler {
        file,
        dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        diags: Vec::new(),
        refs: Vec::new(),
        kinds: HashMap::new(),
        scope: HashMap::new(),
    };
    let flow = c.flow(raw);
    if c.diags.is_empty() {
        Ok(flow)
    } else {
        c.diags.sort_by_key(|d| (d.pos.line, d.pos.column));
        Err(CompileError {
            diagnostics: c.diags,
        })
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_string()
}

/// A reference seen while compiling: who made it, where, and the type it must have.
struct SeenRef {
    from: String,
    r: Ref,
    pos: Pos,
    expect: Option<Type>,
}

struct Compiler {
    file: String,
    dir: PathBuf,
    diags: Vec<Diagnostic>,
    refs: Vec<SeenRef>,
    /// Node id → its kind (for fields and types).
    kinds: HashMap<String, NodeKind>,
    /// Node id → the parallel node it sits in (None at the top level).
    scope: HashMap<String, Option<String>>,
}

impl Compiler {
    fn err(&mut self, p: Pos, kind: DiagKind, message: impl Into<String>) {
        self.diags.push(Diagnostic {
            file: self.file.clone(),
            pos: p,
            kind,
            message: message.into(),
        });
    }

    fn flow(&mut self, raw: RawFlow) -> Flow {
        let mut inputs = Vec::new();
        for (name, spanned) in &raw.inputs {
            let p = pos(&spanned.referenced);
            let decl = &spanned.value;
            let Some(ty) = Type::parse(&decl.ty.value) else {
                self.err(
                    pos(&decl.ty.referenced),
                    DiagKind::Invalid,
                    format!(
                        "input `{name}` has unknown type `{}`; use string, bool or number",
                        decl.ty.value
                    ),
                );
                continue;
            };
            let default = match &decl.default {
                None => None,
                Some(v) => {
                    match Value::from_json(v) {
                        Some(v) if v.ty() == ty => Some(v),
                        Some(v) if ty == Type::String => Some(Value::String(v.to_string())),
                        _ => {
                            self.err(
                            p,
                            DiagKind::TypeMismatch,
                            format!("type mismatch: input `{name}` is a {ty}, its default `{v}` is not"),
                        );
                            None
                        }
                    }
                }
            };
            inputs.push(InputDecl {
                name: name.clone(),
                ty,
                default,
                description: decl.description.clone(),
            });
        }
        // Pass 1: ids and scopes (duplicates reported).
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for n in &raw.nodes {
            self.note_id(&n.value.id, None, &mut seen);
            for b in &n.value.branches {
                for inner in &b.nodes {
                    self.note_id(&inner.value.id, Some(n.value.id.value.clone()), &mut seen);
                }
            }
        }
        // Pass 2: nodes.
        let mut nodes = Vec::new();
        for n in &raw.nodes {
            if let Some(node) = self.node(n, None) {
                nodes.push(node);
            }
        }
        self.check_refs(&inputs);
        self.link(&mut nodes);
        self.check_cycles(&nodes);
        self.check_loops(&nodes);
        let max_parallel = raw.max_parallel.as_ref().map(|m| m.value).unwrap_or(2);
        if max_parallel == 0
            && let Some(m) = &raw.max_parallel
        {
            self.err(
                pos(&m.referenced),
                DiagKind::Invalid,
                "max_parallel must be at least 1",
            );
        }
        Flow {
            name: raw.name.value,
            description: raw.description,
            file: PathBuf::from(&self.file),
            inputs,
            max_parallel: max_parallel.max(1) as usize,
            nodes,
        }
    }

    fn note_id(
        &mut self,
        id: &Spanned<String>,
        parent: Option<String>,
        seen: &mut BTreeSet<String>,
    ) {
        let valid = !id.value.is_empty()
            && id
                .value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            self.err(
                pos(&id.referenced),
                DiagKind::Invalid,
                format!(
                    "node id `{}` may hold only letters, digits, `_` and `-`",
                    id.value
                ),
            );
        }
        if !seen.insert(id.value.clone()) {
            self.err(
                pos(&id.referenced),
                DiagKind::Invalid,
                format!("node id `{}` is used twice", id.value),
            );
        }
        self.scope.insert(id.value.clone(), parent);
    }

    fn template(&mut self, from: &str, s: &Spanned<String>, expect: Option<Type>) -> Template {
        let p = pos(&s.referenced);
        match template::parse(&s.value) {
            Ok(t) => {
                for r in t.refs() {
                    self.refs.push(SeenRef {
                        from: from.to_string(),
                        r: r.clone(),
                        pos: p,
                        expect,
                    });
                }
                t
            }
            Err(m) => {
                self.err(p, DiagKind::Invalid, m);
                Template::default()
            }
        }
    }

    fn required<'a>(
        &mut self,
        field: &'a Option<Spanned<String>>,
        name: &str,
        node: &RawNode,
        p: Pos,
    ) -> Option<&'a Spanned<String>> {
        if field.is_none() {
            self.err(
                p,
                DiagKind::Invalid,
                format!("{} node `{}` needs `{name}`", node.ty.value, node.id.value),
            );
        }
        field.as_ref()
    }

    fn agent(&mut self, n: &RawNode, p: Pos) -> AgentSpec {
        let id = n.id.value.clone();
        let task = match self.required(&n.task, "task", n, p) {
            Some(t) => self.template(&id, t, None),
            None => Template::default(),
        };
        let output = match &n.output {
            None => Type::String,
            Some(o) => Type::parse(&o.value).unwrap_or_else(|| {
                self.err(
                    pos(&o.referenced),
                    DiagKind::Invalid,
                    format!(
                        "unknown output type `{}`; use string, bool or number",
                        o.value
                    ),
                );
                Type::String
            }),
        };
        AgentSpec {
            task,
            role: n.role.clone(),
            provider: n.provider.clone(),
            model: n.model.clone(),
            script: n.script.as_ref().map(|s| self.dir.join(s)),
            output,
            verify: n.verify.unwrap_or(false),
        }
    }

    fn node(&mut self, spanned: &Spanned<RawNode>, parent: Option<&str>) -> Option<Node> {
        let n = &spanned.value;
        let p = pos(&spanned.referenced);
        let id = n.id.value.clone();
        let kind = match n.ty.value.as_str() {
            "agent" => NodeKind::Agent(self.agent(n, p)),
            "shell" | "test" | "verify" => {
                let command = match self.required(&n.command, "command", n, p) {
                    Some(c) => self.template(&id, c, None),
                    None => Template::default(),
                };
                match n.ty.value.as_str() {
                    "shell" => NodeKind::Shell { command },
                    "test" => NodeKind::Test { command },
                    _ => NodeKind::Verify { command },
                }
            }
            "review" => {
                let agent = self.agent(n, p);
                let on_changes = n.on_changes.as_ref().map(|o| {
                    self.refs.push(SeenRef {
                        from: id.clone(),
                        r: Ref::Node {
                            node: o.value.clone(),
                            field: "output".into(),
                        },
                        pos: pos(&o.referenced),
                        expect: None,
                    });
                    o.value.clone()
                });
                if parent.is_some() && on_changes.is_some() {
                    self.err(
                        p,
                        DiagKind::Invalid,
                        "a review inside a parallel branch cannot loop back (`on_changes`); review after the parallel node",
                    );
                }
                NodeKind::Review {
                    agent,
                    on_changes,
                    max_loops: n.max_loops.unwrap_or(2),
                }
            }
            "branch" => {
                let (negate, condition) = match self.required(&n.condition, "condition", n, p) {
                    Some(c) => self.condition(&id, c)?,
                    None => return None,
                };
                let mut targets = |list: &[Spanned<String>]| -> Vec<String> {
                    list.iter()
                        .map(|t| {
                            self.refs.push(SeenRef {
                                from: id.clone(),
                                r: Ref::Node {
                                    node: t.value.clone(),
                                    field: "output".into(),
                                },
                                pos: pos(&t.referenced),
                                expect: None,
                            });
                            t.value.clone()
                        })
                        .collect()
                };
                let then = targets(&n.then);
                let otherwise = targets(&n.otherwise);
                NodeKind::Branch {
                    negate,
                    condition,
                    then,
                    otherwise,
                }
            }
            "parallel" => {
                if parent.is_some() {
                    self.err(
                        p,
                        DiagKind::Invalid,
                        "a parallel node cannot sit inside another parallel node's branch",
                    );
                }
                if n.branches.is_empty() {
                    self.err(
                        p,
                        DiagKind::Invalid,
                        format!("parallel node `{id}` needs `branches`"),
                    );
                }
                if let Some(s) = &n.select
                    && s.value != "passing"
                {
                    self.err(
                        pos(&s.referenced),
                        DiagKind::Invalid,
                        format!("unknown select `{}`; the only choice is `passing`", s.value),
                    );
                }
                let mut branches = Vec::new();
                for b in &n.branches {
                    let nodes = b
                        .nodes
                        .iter()
                        .filter_map(|inner| self.node(inner, Some(&id)))
                        .collect();
                    branches.push(ParallelBranch {
                        name: b.name.value.clone(),
                        nodes,
                    });
                }
                NodeKind::Parallel {
                    branches,
                    select: Select::Passing,
                }
            }
            "deliver" => {
                if parent.is_some() {
                    self.err(
                        p,
                        DiagKind::Invalid,
                        "a deliver node cannot sit inside a parallel branch (branches run in a copy of the workspace); deliver after the parallel node",
                    );
                }
                // A flow is project content: the PR file it names stays under .keel/flows/
                // (written beneath the open workspace at run time as well).
                if let Some(f) = &n.pr_file {
                    let rel = std::path::Path::new(f.as_str());
                    if f.is_empty()
                        || rel.is_absolute()
                        || rel
                            .components()
                            .any(|c| !matches!(c, std::path::Component::Normal(_)))
                    {
                        self.err(
                            p,
                            DiagKind::Invalid,
                            format!(
                                "pr_file `{f}` must be a relative path under .keel/flows/ without `..`"
                            ),
                        );
                    }
                }
                let branch = match &n.branch {
                    Some(b) => self.template(&id, b, None),
                    None => template::parse("keel/flow-${run.short}").unwrap_or_default(),
                };
                let message = match &n.message {
                    Some(m) => self.template(&id, m, None),
                    None => Template::default(),
                };
                NodeKind::Deliver {
                    branch,
                    message,
                    pr_file: n.pr_file.clone(),
                }
            }
            other => {
                let hint = closest(other);
                self.err(
                    pos(&n.ty.referenced),
                    DiagKind::UnknownNodeType,
                    format!(
                        "unknown node type `{other}`{hint}; the types are {}",
                        NODE_TYPES.join(", ")
                    ),
                );
                return None;
            }
        };
        let mut deps = Vec::new();
        for need in &n.needs {
            self.refs.push(SeenRef {
                from: id.clone(),
                r: Ref::Node {
                    node: need.value.clone(),
                    field: "output".into(),
                },
                pos: pos(&need.referenced),
                expect: None,
            });
            deps.push(need.value.clone());
        }
        self.kinds.insert(id.clone(), kind.clone());
        Some(Node {
            id,
            kind,
            deps,
            timeout: n.timeout_secs.map_or(DEFAULT_TIMEOUT, Duration::from_secs),
            max_steps: n.max_steps,
            validation_command: n.validation_command.clone(),
            rollback_command: n.rollback_command.clone(),
            pos: p,
        })
    }

    fn condition(&mut self, from: &str, c: &Spanned<String>) -> Option<(bool, Ref)> {
        let p = pos(&c.referenced);
        let text = c.value.trim();
        let (negate, rest) = match text.strip_prefix('!') {
            Some(r) => (true, r.trim()),
            None => (false, text),
        };
        let inner = rest
            .strip_prefix("${")
            .and_then(|r| r.strip_suffix('}'))
            .unwrap_or(rest);
        match template::parse_ref(inner.trim()) {
            Ok(r) => {
                self.refs.push(SeenRef {
                    from: from.to_string(),
                    r: r.clone(),
                    pos: p,
                    expect: Some(Type::Bool),
                });
                Some((negate, r))
            }
            Err(m) => {
                self.err(p, DiagKind::Invalid, format!("condition: {m}"));
                None
            }
        }
    }

    fn check_refs(&mut self, inputs: &[InputDecl]) {
        let refs = std::mem::take(&mut self.refs);
        for SeenRef {
            from,
            r,
            pos,
            expect,
        } in refs
        {
            let ty = match &r {
                Ref::RunId | Ref::RunShort => Some(Type::String),
                Ref::Input(name) => match inputs.iter().find(|d| &d.name == name) {
                    Some(d) => Some(d.ty),
                    None => {
                        self.err(
                            pos,
                            DiagKind::MissingReference,
                            format!(
                                "missing reference: `{r}`: the flow declares no input `{name}`"
                            ),
                        );
                        None
                    }
                },
                Ref::Node { node, field } => self.node_field(&from, node, field, &r, pos),
            };
            if let (Some(want), Some(got)) = (expect, ty)
                && want != got
            {
                self.err(
                    pos,
                    DiagKind::TypeMismatch,
                    format!("type mismatch: `{r}` is a {got}, a {want} is needed here"),
                );
            }
        }
    }

    fn node_field(&mut self, from: &str, node: &str, field: &str, r: &Ref, p: Pos) -> Option<Type> {
        let Some(kind) = self.kinds.get(node) else {
            if !self.scope.contains_key(node) {
                self.err(
                    p,
                    DiagKind::MissingReference,
                    format!("missing reference: `{r}`: there is no node `{node}`"),
                );
            }
            return None;
        };
        if node == from {
            self.err(
                p,
                DiagKind::Cycle,
                format!("cycle: node `{from}` refers to itself"),
            );
            return None;
        }
        // A node inside a parallel branch is visible only within its own branch's parallel node.
        let target_scope = self.scope.get(node).cloned().flatten();
        let from_scope = self.scope.get(from).cloned().flatten();
        if let Some(par) = &target_scope
            && from_scope.as_ref() != Some(par)
        {
            self.err(
                p,
                DiagKind::MissingReference,
                format!("missing reference: `{r}`: node `{node}` runs inside parallel node `{par}`; refer to `nodes.{par}.output` instead"),
            );
            return None;
        }
        let fields = output_fields(kind);
        match fields.iter().find(|(f, _)| *f == field) {
            Some((_, t)) => Some(*t),
            None => {
                let names: Vec<&str> = fields.iter().map(|(f, _)| *f).collect();
                self.err(
                    p,
                    DiagKind::MissingReference,
                    format!(
                        "missing reference: `{r}`: a {} node has no field `{field}` (its fields: {})",
                        kind.name(),
                        names.join(", ")
                    ),
                );
                None
            }
        }
    }

    /// Adds the implicit dependencies: references and `branch` gating; a top-level node also
    /// waits for whatever the nodes inside its branches refer to outside.
    fn link(&mut self, nodes: &mut [Node]) {
        let top: BTreeSet<String> = nodes.iter().map(|n| n.id.clone()).collect();
        let mut gated: Vec<(String, String)> = Vec::new();
        for n in nodes.iter_mut() {
            let mut deps: BTreeSet<String> = n.deps.iter().cloned().collect();
            let add_refs = |kind: &NodeKind, deps: &mut BTreeSet<String>| {
                for r in kind_refs(kind) {
                    if let Ref::Node { node, .. } = r
                        && top.contains(&node)
                    {
                        deps.insert(node);
                    }
                }
            };
            add_refs(&n.kind, &mut deps);
            if let NodeKind::Parallel { branches, .. } = &n.kind {
                for b in branches {
                    for inner in b.nodes.iter() {
                        add_refs(&inner.kind, &mut deps);
                        deps.extend(inner.deps.iter().filter(|d| top.contains(*d)).cloned());
                    }
                }
            }
            if let NodeKind::Branch {
                then, otherwise, ..
            } = &n.kind
            {
                for t in then.iter().chain(otherwise) {
                    gated.push((t.clone(), n.id.clone()));
                }
            }
            if let NodeKind::Review {
                on_changes: Some(target),
                ..
            } = &n.kind
            {
                // The loop-back target is not a dependency by itself (it usually already is).
                let _ = target;
            }
            deps.remove(&n.id);
            n.deps = deps.into_iter().collect();
        }
        for (target, branch) in gated {
            if let Some(t) = nodes.iter_mut().find(|n| n.id == target)
                && !t.deps.contains(&branch)
            {
                t.deps.push(branch);
            }
        }
    }

    fn check_cycles(&mut self, nodes: &[Node]) {
        let index: HashMap<&str, &Node> = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
        // 0 = unvisited, 1 = on the stack, 2 = done.
        let mut mark: HashMap<&str, u8> = HashMap::new();
        let mut reported = false;
        for n in nodes {
            if reported {
                break;
            }
            let mut stack: Vec<&str> = Vec::new();
            if let Some(cycle) = visit(&n.id, &index, &mut mark, &mut stack) {
                let start = index
                    .get(cycle[0].as_str())
                    .map(|n| n.pos)
                    .unwrap_or_default();
                self.err(
                    start,
                    DiagKind::Cycle,
                    format!("cycle: {}", cycle.join(" → ")),
                );
                reported = true;
            }
        }
    }

    fn check_loops(&mut self, nodes: &[Node]) {
        for n in nodes {
            if let NodeKind::Review {
                on_changes: Some(target),
                ..
            } = &n.kind
            {
                if !matches!(self.kinds.get(target), Some(NodeKind::Agent(_))) {
                    if self.kinds.contains_key(target) {
                        self.err(
                            n.pos,
                            DiagKind::TypeMismatch,
                            format!("type mismatch: review `{}` loops back to `{target}`, which is not an agent node", n.id),
                        );
                    }
                    continue;
                }
                if !ancestors(nodes, &n.id).contains(target) {
                    self.err(
                        n.pos,
                        DiagKind::Invalid,
                        format!("review `{}` loops back to `{target}`, which it does not depend on; add `needs: [{target}]`", n.id),
                    );
                }
            }
        }
    }
}

fn closest(word: &str) -> String {
    NODE_TYPES
        .iter()
        .find(|t| edit_distance(t, word) <= 2)
        .map(|t| format!(" (did you mean `{t}`?)"))
        .unwrap_or_default()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

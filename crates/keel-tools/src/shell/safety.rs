//! `CommandSafety`: classifies a shell command by parsing it with the bash grammar
//! (tree-sitter-bash) and judging every simple command, redirection and substitution in it.
//!
//! The walk visits every node, so nothing hides inside `$(…)`, `<(…)`, loops, functions or
//! here-documents; `sh -c`/`bash -c` strings, `eval` and `xargs`/`find -exec`/`env`/`sudo`
//! payloads are analysed recursively. Whatever cannot be known statically (a variable in
//! command position, a program not on the allow-list, code fed to an interpreter, a parse
//! error) is `unknown`, and unknown is never read-only.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use tree_sitter::{Node, Parser};

pub(crate) use super::hidden::is_code_env;
pub use super::project::Source;
use super::project::{Project, ProjectRoot};
pub(crate) use super::redirects::Stdin;
use super::redirects::{herestring_text, redirect_operator};
pub use super::rules::RuleMatch;
pub use super::verdict::{Analysis, SafetyClass};
use super::words::{Word, resolve};

/// `rm` for `/bin/rm`.
pub(crate) fn program_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The analyser. Cheap to clone; holds the user's allow-list.
#[derive(Debug, Clone, Default)]
pub struct CommandSafety {
    /// Word prefixes the user declared read-only (`[shell] allow`).
    allow: Vec<Vec<String>>,
}

/// How deep `sh -c`, `eval` and friends may nest before the command counts as unknown.
const MAX_DEPTH: usize = 8;
/// How deep the syntax tree may nest (parentheses, substitutions, blocks) before the command
/// counts as unknown: the walk is recursive, and its stack must stay small.
const MAX_NODE_DEPTH: usize = 100;

thread_local! {
    static PARSER: std::cell::RefCell<Option<Parser>> = const { std::cell::RefCell::new(None) };
}

impl CommandSafety {
    /// The analyser with no user allow-list.
    pub fn new() -> Self {
        Self::default()
    }

    /// The analyser with `allow` entries (word prefixes such as `"make lint"`) vouched for:
    /// what a matching simple command does itself counts as read-only. Everything else on the
    /// line is still judged: other commands, redirections, substitutions, and what the
    /// vouched command runs (a wrapper's payload, `sh -c` code) — see [`super::rules`].
    pub fn with_allow(allow: &[String]) -> Self {
        Self {
            allow: allow
                .iter()
                .map(|a| a.split_whitespace().map(str::to_string).collect::<Vec<_>>())
                .filter(|a| !a.is_empty())
                .collect(),
        }
    }

    /// Classifies `command` (a bash command line or script) without running anything.
    pub fn classify(&self, command: &str) -> Analysis {
        self.classify_with(command, None)
    }

    /// Classifies a test run's `command` (run in `cwd`, inside the workspace `root`) by what
    /// it runs: package.json scripts, Makefile recipes, shell scripts of the project and the
    /// test runners' configuration are read and judged (see [`super::project`]); the files
    /// read are listed in [`Analysis::sources`].
    /// `root`: the workspace (its snapshots' size bound counts), or its root path.
    pub fn classify_test_run<'a>(
        &self,
        command: &str,
        cwd: &Path,
        root: impl Into<ProjectRoot<'a>>,
    ) -> Analysis {
        self.classify_with(command, Some(Project::at(root.into(), cwd, true)))
    }

    /// Classifies `command`, run in the workspace `root`, with the project's scripts read:
    /// `npm test`, `make lint`, `sh x.sh` are judged by the script they run (listed in
    /// [`Analysis::sources`]), so an allow rule for `npm test` covers the test runner in the
    /// script but not an `rm -rf src` added to it. Test runners themselves stay unknown here
    /// unless an allow rule's command runs them (a test run is [`Self::classify_test_run`]).
    pub fn classify_in_project<'a>(
        &self,
        command: &str,
        root: impl Into<ProjectRoot<'a>>,
    ) -> Analysis {
        let root = root.into();
        self.classify_with(command, Some(Project::at(root, root.path(), false)))
    }

    fn classify_with(&self, command: &str, project: Option<Project>) -> Analysis {
        let mut a = Analyzer {
            allow: &self.allow,
            findings: Vec::new(),
            read_programs: BTreeSet::new(),
            commands: Vec::new(),
            depth: 0,
            functions: HashSet::new(),
            node_depth: 0,
            cwd_outside: false,
            vars: Default::default(),
            vouched: false,
            runners_vouched: false,
            words: Vec::new(),
            project,
            substitution: 0,
            inline_code: false,
            naming: false,
            keeps_content: false,
        };
        if command.trim().is_empty() {
            a.flag(SafetyClass::Unknown, "the command is empty".into());
        } else {
            a.script(command);
        }
        a.finish()
    }
}

/// Classifies `command` with no user allow-list.
pub fn classify(command: &str) -> Analysis {
    CommandSafety::new().classify(command)
}

/// The children of `node`, each with the field name the grammar gives it (`name`,
/// `argument`, `redirect`, `body`).
pub(crate) fn children_with_fields<'t>(node: Node<'t>) -> Vec<(Option<&'t str>, Node<'t>)> {
    let mut cursor = node.walk();
    node.children(&mut cursor)
        .enumerate()
        .map(|(i, n)| (node.field_name_for_child(i as u32), n))
        .collect()
}

pub(crate) struct Analyzer<'s> {
    allow: &'s [Vec<String>],
    findings: Vec<(SafetyClass, String)>,
    read_programs: BTreeSet<String>,
    commands: Vec<Vec<String>>,
    depth: usize,
    functions: HashSet<String>,
    /// How deep the syntax-tree walk is (10,000 nested parentheses must not overflow the stack).
    node_depth: usize,
    /// A `cd` may have left the workspace: relative paths are no longer inside it.
    cwd_outside: bool,
    /// The current script's variables: which hold values the script fixed (for arithmetic).
    pub(crate) vars: super::arith::Variables,
    /// The simple command being judged matches an allow rule: what the program itself does is
    /// accepted (its findings are dropped), what it runs is judged on its own.
    pub(crate) vouched: bool,
    /// Inside a project script that an allow rule's command runs (`npm test` allowed): its
    /// test runners are what the rule allowed ([`super::project`]).
    pub(crate) runners_vouched: bool,
    words: Vec<Vec<Word>>,
    /// The project of a test run, whose scripts are read ([`super::project`]).
    pub(crate) project: Option<super::project::Project>,
    /// How many command or process substitutions the node being judged lies in: a file a
    /// command there reads becomes part of the line (`bash -c "$(cat r.sh)"`).
    pub(crate) substitution: usize,
    /// An interpreter got code Keel cannot read as a file: inline (`python3 -c`, `node -e`),
    /// a module (`python3 -m`) or piped in ([`Analysis::runs_inline_code`]).
    pub(crate) inline_code: bool,
    /// The finding being flagged is a write whose paths were logged ([`super::line_writes`]).
    pub(crate) naming: bool,
    /// The write being logged keeps what the file holds (`>>`, `tee -a`, `chmod`):
    /// [`super::unrecorded`].
    pub(crate) keeps_content: bool,
}

/// Node kinds that are statements (run something).
const STATEMENTS: &[&str] = &[
    "command",
    "pipeline",
    "list",
    "redirected_statement",
    "subshell",
    "compound_statement",
    "negated_command",
    "if_statement",
    "while_statement",
    "for_statement",
    "c_style_for_statement",
    "case_statement",
    "function_definition",
    "variable_assignment",
    "variable_assignments",
    "declaration_command",
    "unset_command",
    "test_command",
];

impl Analyzer<'_> {
    pub(crate) fn flag(&mut self, class: SafetyClass, reason: String) {
        // What may write is logged even when vouched for: it still writes (R7-30).
        if class != SafetyClass::ReadOnly && !self.naming {
            self.log_unnamed_write();
        }
        if self.vouched {
            return;
        }
        if !self.findings.iter().any(|(_, r)| *r == reason) {
            self.findings.push((class, reason));
        }
    }

    pub(crate) fn read_only(&mut self, program: &str) {
        self.read_programs.insert(program.to_string());
    }

    fn finish(mut self) -> Analysis {
        if self.cwd_outside
            && self
                .findings
                .iter()
                .any(|(c, _)| *c == SafetyClass::WritesWorkspace)
        {
            self.findings.push((
                SafetyClass::Destructive,
                "a `cd` leaves the workspace, so its writes land outside it".into(),
            ));
        }
        let stale = self.stale_findings();
        self.findings.extend(stale);
        let class = self
            .findings
            .iter()
            .map(|(c, _)| *c)
            .max()
            .unwrap_or(SafetyClass::ReadOnly);
        let mut findings = self.findings;
        // Most severe first, then in the order found.
        findings.sort_by_key(|f| std::cmp::Reverse(f.0));
        let mut reasons: Vec<String> = findings
            .into_iter()
            .filter(|(c, _)| *c != SafetyClass::ReadOnly)
            .map(|(_, r)| r)
            .collect();
        if reasons.is_empty() {
            let programs: Vec<String> = self.read_programs.into_iter().collect();
            reasons.push(if programs.is_empty() {
                "no commands run".into()
            } else {
                format!("only reads: {}", programs.join(", "))
            });
        }
        let mut changes_installed: Vec<String> = self
            .words
            .iter()
            .filter_map(|w| super::installs::installer(w))
            .collect();
        if let Some(p) = self.project.as_ref() {
            changes_installed.extend(p.tree_writes());
        }
        changes_installed.dedup();
        Analysis {
            class,
            reasons,
            commands: self.commands,
            words: self.words,
            absent: self
                .project
                .as_ref()
                .map(|p| p.absent.clone())
                .unwrap_or_default(),
            changes_installed,
            sources: self.project.map(|p| p.sources).unwrap_or_default(),
            runs_inline_code: self.inline_code,
        }
    }

    /// Parses and walks a script (the top-level command, or a nested `sh -c` string).
    pub(crate) fn script(&mut self, src: &str) {
        if self.depth >= MAX_DEPTH {
            self.flag(
                SafetyClass::Unknown,
                "commands nested too deeply to analyse".into(),
            );
            return;
        }
        let tree = PARSER.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                let mut p = Parser::new();
                if p.set_language(&tree_sitter_bash::LANGUAGE.into()).is_ok() {
                    *slot = Some(p);
                }
            }
            slot.as_mut().and_then(|p| p.parse(src, None))
        });
        let Some(tree) = tree else {
            self.flag(
                SafetyClass::Unknown,
                "the shell parser could not read the command".into(),
            );
            return;
        };
        self.depth += 1;
        // Code a vouched program runs (`sh -c CODE`) is judged on its own.
        let vouched = std::mem::replace(&mut self.vouched, false);
        super::hidden::scan_text(self, src);
        let root = tree.root_node();
        // A parse the grammar had to repair (an inserted `}` is an unnamed node the walk does
        // not visit) is not the script bash will run: `${arr[@]:$X}` parses as `${arr[@]}`
        // and hides the arithmetic offset (red-team pass 2, R9).
        if root.has_error() {
            self.flag(
                SafetyClass::Unknown,
                "the command does not parse as bash (the grammar had to repair it)".into(),
            );
        }
        // A nested script (`sh -c`) is another shell: its variables are its own.
        let outer = std::mem::replace(&mut self.vars, super::arith::fixed_variables(root, src));
        if super::line_writes::has_background(root) {
            self.walk_parts(root, src, &Stdin::Inherited);
        } else {
            self.children(root, src, &Stdin::Inherited);
        }
        self.vars = outer;
        self.vouched = vouched;
        self.depth -= 1;
    }

    /// A `cd` (or `git -C`) to `dir`: once it may leave the workspace, relative writes count as
    /// writes outside it.
    pub(crate) fn cd(&mut self, dir: &Word) {
        if let Some(p) = self.project.as_mut() {
            p.cd(dir.value());
        }
        let outside = match dir.value() {
            Some(path) => path == "-" || path_scope(path) != PathScope::Inside,
            None => true,
        };
        if outside {
            self.cwd_outside = true;
        }
    }

    pub(crate) fn children(&mut self, node: Node, src: &str, stdin: &Stdin) {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in kids {
            self.any(child, src, stdin);
        }
    }

    /// Visits any node: statements are judged, everything else is searched for nested
    /// statements (substitutions) and parse errors.
    pub(crate) fn any(&mut self, node: Node, src: &str, stdin: &Stdin) {
        if self.node_depth >= MAX_NODE_DEPTH {
            self.flag(
                SafetyClass::Unknown,
                "the command nests too deeply to analyse".into(),
            );
            return;
        }
        self.node_depth += 1;
        self.any_node(node, src, stdin);
        self.node_depth -= 1;
    }

    fn any_node(&mut self, node: Node, src: &str, stdin: &Stdin) {
        if node.is_error() || node.is_missing() {
            let text: String = src[node.byte_range()].chars().take(40).collect();
            self.flag(
                SafetyClass::Unknown,
                format!("the command does not parse as bash near `{text}`"),
            );
        }
        let kind = node.kind();
        if super::line_writes::has_background(node) {
            // Its parts run at once (R7-30).
            return self.walk_parts(node, src, stdin);
        }
        if super::line_writes::is_loop(kind) {
            // Its body runs again after its own writes (R7-30).
            let start = self.project.as_ref().map(|p| p.positions());
            self.statement(node, src, stdin);
            if let (Some(p), Some(start)) = (self.project.as_mut(), start) {
                p.check_since(start);
            }
            return;
        }
        if STATEMENTS.contains(&kind) {
            self.statement(node, src, stdin);
            return;
        }
        match kind {
            "comment" => {}
            "command_substitution" => {
                self.substitution += 1;
                self.children(node, src, &Stdin::Inherited);
                self.substitution -= 1;
            }
            "process_substitution" => {
                // `>(cmd)` feeds cmd from a pipe; `<(cmd)` reads its output.
                let feeds = src[node.byte_range()].starts_with(">(");
                let inner = if feeds { Stdin::Pipe } else { Stdin::Inherited };
                self.substitution += 1;
                self.children(node, src, &inner);
                self.substitution -= 1;
            }
            "file_redirect" => self.file_redirect(node, src),
            "heredoc_redirect" | "herestring_redirect" => {
                self.redirect_parts(node, src);
            }
            "arithmetic_expansion" => {
                super::arith::arithmetic_node(self, node, src);
                self.children(node, src, stdin);
            }
            "expansion" => {
                super::arith::expansion(self, node, src);
                self.children(node, src, stdin);
            }
            "subscript" => {
                super::arith::subscript(self, node, src);
                self.children(node, src, stdin);
            }
            _ => self.children(node, src, stdin),
        }
    }

    fn statement(&mut self, node: Node, src: &str, stdin: &Stdin) {
        match node.kind() {
            "command" => self.command(node, src, stdin),
            "pipeline" => self.walk_parts(node, src, stdin),
            "redirected_statement" => self.redirected(node, src, stdin),
            "function_definition" => {
                if let Some(name) = node.child_by_field_name("name") {
                    let name = src[name.byte_range()].to_string();
                    // A function can shadow any command for the rest of the script.
                    self.flag(
                        SafetyClass::Unknown,
                        format!("defines the shell function `{name}`, which can shadow commands"),
                    );
                    self.functions.insert(name);
                }
                // The body is judged as if it ran.
                self.children(node, src, stdin);
            }
            "variable_assignment" => self.assignment(node, src, false),
            "compound_statement" if src[node.byte_range()].starts_with("((") => {
                super::arith::arithmetic_node(self, node, src);
                self.children(node, src, stdin);
            }
            "c_style_for_statement" => {
                super::arith::c_style_for(self, node, src);
                self.children(node, src, stdin);
            }
            "test_command" => {
                super::arith::test_command(self, node, src);
                self.children(node, src, stdin);
            }
            "declaration_command" => self.declaration(node, src, stdin),
            "unset_command" => self.unset(node, src, stdin),
            "variable_assignments" => {
                let mut cursor = node.walk();
                let kids: Vec<Node> = node.named_children(&mut cursor).collect();
                for k in kids {
                    if k.kind() == "variable_assignment" {
                        self.assignment(k, src, false);
                    } else {
                        self.any(k, src, stdin);
                    }
                }
            }
            _ => self.children(node, src, stdin),
        }
    }

    /// `unset NAME[SUB]`: bash evaluates an indexed array's subscript as arithmetic, so a name
    /// not known before it runs can run commands (red-team pass 2, R9). Its own function: the
    /// walk's frame stays small for deeply nested scripts.
    #[inline(never)]
    fn unset(&mut self, node: Node, src: &str, stdin: &Stdin) {
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.named_children(&mut cursor).collect();
        for k in kids {
            let w = resolve(k, src);
            if !w.value().is_some_and(|v| v.starts_with('-')) {
                super::arith::variable_name_text(self, w.value(), &w.source, "`unset`");
            }
            self.any(k, src, stdin);
        }
    }

    /// `declare`/`typeset`/`local`/`export`/`readonly`: assignments, and names given by
    /// expansions (`declare "$n=1"` evaluates a subscript in `$n`), and namerefs (`-n`) to names
    /// not known before they run.
    fn declaration(&mut self, node: Node, src: &str, stdin: &Stdin) {
        let text = &src[node.byte_range()];
        let keyword = text.split_whitespace().next().unwrap_or("");
        let mut cursor = node.walk();
        let kids: Vec<Node> = node.named_children(&mut cursor).collect();
        let nameref = kids.iter().any(|k| {
            k.kind() == "word" && {
                let w = &src[k.byte_range()];
                w.starts_with('-') && w.contains('n')
            }
        });
        for k in kids {
            match k.kind() {
                "variable_assignment" => {
                    if nameref && let Some(v) = k.child_by_field_name("value") {
                        super::arith::variable_name_word(self, v, src, &format!("`{keyword} -n`"));
                    }
                    // An exported variable is set for every later command of the line.
                    self.assignment(k, src, keyword == "export");
                }
                "variable_name" | "word" => {}
                _ => {
                    if matches!(
                        keyword,
                        "declare" | "typeset" | "local" | "export" | "readonly"
                    ) {
                        let w = resolve(k, src);
                        if !w.literal {
                            super::arith::variable_name_text(
                                self,
                                None,
                                &w.source,
                                &format!("`{keyword}`"),
                            );
                        }
                    }
                    self.any(k, src, stdin);
                }
            }
        }
    }

    /// `NAME=value`: harmless unless NAME changes which code runs; the value is searched for
    /// substitutions.
    fn assignment(&mut self, node: Node, src: &str, prefix: bool) {
        if let Some(name_node) = node.child_by_field_name("name") {
            let name = &src[name_node.byte_range()];
            if name_node.kind() == "subscript" {
                self.any(name_node, src, &Stdin::Inherited);
            }
            if let Some(value) = node.child_by_field_name("value")
                && value.kind() == "array"
            {
                super::arith::array_literal(self, value, src, name);
            }
            if self.vars.is_integer(name)
                && let Some(value) = node.child_by_field_name("value")
            {
                let text = src[value.byte_range()].to_string();
                super::arith::expression(self, &text, &format!("the integer variable `{name}`"));
            }
            if is_code_env(name) {
                let scope = if prefix { " for the command" } else { "" };
                self.flag(
                    SafetyClass::Unknown,
                    format!("setting `{name}`{scope} changes which code runs"),
                );
            } else if prefix && super::hidden::changes_command(name) {
                self.flag(
                    SafetyClass::Unknown,
                    format!(
                        "setting `{name}` for the command: a program may read it as options or a module path (as tar reads TAR_OPTIONS)"
                    ),
                );
            }
        }
        if let Some(value) = node.child_by_field_name("value") {
            self.any(value, src, &Stdin::Inherited);
        }
    }

    /// Judges a write to `target` (a file or directory argument or redirection target).
    pub(crate) fn write_target(&mut self, target: &Word, how: &str) {
        let Some(path) = target.value() else {
            self.flag(
                SafetyClass::Unknown,
                format!(
                    "{how} writes to `{}`, which is not known before it runs",
                    target.source
                ),
            );
            return;
        };
        if is_sink(path) {
            return;
        }
        let scope = match path_scope(path) {
            PathScope::Inside if self.cwd_outside => PathScope::Outside,
            scope => scope,
        };
        match scope {
            PathScope::Inside | PathScope::Temp => self.flag_writes(
                SafetyClass::WritesWorkspace,
                format!("{how} writes `{path}`"),
                std::slice::from_ref(target),
            ),
            PathScope::Outside => self.flag(
                SafetyClass::Destructive,
                format!("{how} writes `{path}`, outside the workspace"),
            ),
        }
    }

    fn command(&mut self, node: Node, src: &str, stdin: &Stdin) {
        let mut stdin = stdin.clone();
        let mut words: Vec<Word> = Vec::new();
        for (field, child) in children_with_fields(node) {
            if !child.is_named() {
                continue;
            }
            match (field, child.kind()) {
                (_, "variable_assignment") => self.assignment(child, src, true),
                (Some("name"), _) => {
                    let inner = child.named_child(0).unwrap_or(child);
                    self.any(inner, src, &Stdin::Inherited);
                    words.push(resolve(inner, src));
                }
                (Some("argument"), _) => {
                    self.any(child, src, &Stdin::Inherited);
                    words.push(resolve(child, src));
                }
                (_, "herestring_redirect") => {
                    stdin = Stdin::Text(herestring_text(child, src));
                    self.redirect_parts(child, src);
                }
                (_, "file_redirect") => {
                    if redirect_operator(child, src).starts_with('<') {
                        stdin = super::removals::input_from(child, src);
                    }
                    self.file_redirect(child, src);
                }
                _ => self.any(child, src, &Stdin::Inherited),
            }
        }
        self.simple_command(&words, &stdin);
    }

    /// Judges one simple command given its words (the program first).
    pub(crate) fn simple_command(&mut self, words: &[Word], stdin: &Stdin) {
        // A command run by a vouched one (a wrapper's payload) is judged on its own.
        let outer = std::mem::replace(&mut self.vouched, false);
        self.in_order(words, |a| a.judge_simple_command(words, stdin));
        self.vouched = outer;
    }

    fn judge_simple_command(&mut self, words: &[Word], stdin: &Stdin) {
        let Some(first) = words.first() else {
            return;
        };
        self.words.push(words.to_vec());
        self.commands.push(
            words
                .iter()
                .map(|w| {
                    if w.literal {
                        w.text.clone()
                    } else {
                        w.source.clone()
                    }
                })
                .collect(),
        );
        if self.is_allowed(words) {
            self.read_only(&first.text);
            self.vouched = true;
        }
        let Some(name) = first.value() else {
            self.flag(
                SafetyClass::Unknown,
                format!(
                    "`{}` in command position: cannot tell what runs",
                    first.source
                ),
            );
            return;
        };
        if first.glob {
            self.flag(
                SafetyClass::Unknown,
                format!("`{name}` in command position is a file-name pattern"),
            );
            return;
        }
        let name = name.to_string();
        let name = name.as_str();
        let program = if name.contains('/') {
            match system_program(name) {
                Some(p) => p,
                // A test run's own script or built program (`./test.sh`).
                None if self.project.is_some()
                    && super::project::judge(self, name, &words[1..], stdin) =>
                {
                    return;
                }
                None => {
                    self.flag(
                        SafetyClass::Unknown,
                        format!("`{name}` is a program Keel cannot inspect"),
                    );
                    return;
                }
            }
        } else {
            name
        };
        if self.functions.contains(program) {
            // Its body was judged where it was defined.
            return;
        }
        match program {
            "cd" | "pushd" => match words.get(1) {
                Some(dir) if !dir.is("--") => self.cd(dir),
                Some(_) => {}
                // `cd` alone goes home.
                None => self.cwd_outside = true,
            },
            "exec" if words.len() == 1 => {
                self.flag(
                    SafetyClass::Unknown,
                    "`exec` with redirections changes the shell's open files".into(),
                );
            }
            _ => {}
        }
        let program = program.to_string();
        if self.project.is_some() && super::project::judge(self, &program, &words[1..], stdin) {
            return;
        }
        super::programs::judge(self, &program, &words[1..], stdin);
    }

    fn is_allowed(&self, words: &[Word]) -> bool {
        self.allow
            .iter()
            .any(|entry| super::rules::vouches(entry, words))
    }
}

/// `/usr/bin/git` → `git`; programs outside the system's binary directories are unknown.
pub(crate) fn system_program(path: &str) -> Option<&str> {
    const DIRS: &[&str] = &[
        "/bin/",
        "/usr/bin/",
        "/usr/local/bin/",
        "/sbin/",
        "/usr/sbin/",
        "/usr/local/sbin/",
    ];
    DIRS.iter()
        .find_map(|d| path.strip_prefix(d))
        .filter(|rest| !rest.is_empty() && !rest.contains('/'))
}

/// Writing here destroys nothing.
pub(crate) fn is_sink(path: &str) -> bool {
    matches!(
        path,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/fd/1" | "/dev/fd/2" | "/dev/tty"
    )
}

/// Where a path argument points, judged from its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathScope {
    /// Relative, without `..`: inside the working directory.
    Inside,
    /// A temp directory.
    Temp,
    /// Absolute, home-relative or climbing out with `..`.
    Outside,
}

pub(crate) fn path_scope(path: &str) -> PathScope {
    if path.starts_with("/tmp/") || path.starts_with("/var/tmp/") || path == "/tmp" {
        return if path.split('/').any(|c| c == "..") {
            PathScope::Outside
        } else {
            PathScope::Temp
        };
    }
    if path.starts_with('/') || path.starts_with('~') || path.split('/').any(|c| c == "..") {
        return PathScope::Outside;
    }
    PathScope::Inside
}

#[cfg(test)]
#[path = "safety_tests.rs"]
mod tests;

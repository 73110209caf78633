//! No file-level import cycle inside the workspace's layered crates (issue 33).
//!
//! Each `.rs` file under a crate's `src/` is a node; an edge `a → b` means code in `a` names a
//! path that lives in `b` (`use crate::…`, `use super::…`, `use self::…` and the same paths
//! written inline, in test modules too). A path is resolved to the deepest module file that
//! exists, and through the target module's `pub use` re-exports to the file that defines the
//! item (`crate::Config` is `config/mod.rs`, not `lib.rs`). A re-export itself is not an edge
//! (it is the module's facade, not a use), nor is a `mod` declaration.
//!
//! The crates checked and the ones still allowed to have cycles are in
//! `.ci/import-cycles.allow` (one crate per line; `#` comments). An allowed crate that no
//! longer has a cycle fails the test too, so the list only shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose files must not import each other in a cycle.
const CRATES: &[&str] = &[
    "keel-engine",
    "keel-cli",
    "keel-server",
    "keel-queue",
    "keel-flow",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn no_file_level_import_cycle() {
    let root = repo_root();
    let allow_file = root.join(".ci/import-cycles.allow");
    let allowed: BTreeSet<String> = std::fs::read_to_string(&allow_file)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let mut extra: Vec<String> = std::fs::read_to_string(root.join(".ci/import-cycles.crates"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let mut crates: Vec<String> = CRATES.iter().map(|s| s.to_string()).collect();
    crates.append(&mut extra);

    let mut failures = Vec::new();
    for name in &crates {
        let src = root.join("crates").join(name).join("src");
        if !src.is_dir() {
            failures.push(format!("{name}: no src/ directory at {}", src.display()));
            continue;
        }
        let cycles = cycles_in(&src);
        let report: Vec<String> = cycles
            .iter()
            .map(|c| format!("  {}", c.join(" ↔ ")))
            .collect();
        match (cycles.is_empty(), allowed.contains(name)) {
            (true, true) => failures.push(format!(
                "{name} has no import cycle any more: remove it from .ci/import-cycles.allow"
            )),
            (false, false) => failures.push(format!(
                "{name}: file-level import cycles (each line one strongly connected set):\n{}",
                report.join("\n")
            )),
            (false, true) => eprintln!(
                "ALLOWED for now ({name} is in .ci/import-cycles.allow):\n{}",
                report.join("\n")
            ),
            (true, false) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The strongly connected sets of more than one file, each sorted, relative to `src`.
fn cycles_in(src: &Path) -> Vec<Vec<String>> {
    let graph = Graph::load(src);
    let edges = graph.edges();
    let cycles: Vec<Vec<String>> = strongly_connected(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    // KEEL_CYCLE_EDGES=1: every edge inside a cycle, to see which import closes it.
    if std::env::var_os("KEEL_CYCLE_EDGES").is_some() {
        for cycle in &cycles {
            for from in cycle {
                let inside: Vec<&str> = edges
                    .get(from)
                    .into_iter()
                    .flatten()
                    .filter(|to| cycle.contains(to))
                    .map(String::as_str)
                    .collect();
                eprintln!("  {from} → {}", inside.join(", "));
            }
        }
    }
    cycles
}

/// One parsed file: its module path, the paths it names, its re-exports.
struct FileInfo {
    module: Vec<String>,
    /// Absolute module paths named by the file's code (not by its re-exports), each with the
    /// length of its prefix that must be a module (a `use child::…` relative to the module).
    uses: Vec<(Vec<String>, usize)>,
    /// `pub use` names: exported name → absolute target path (and its module prefix).
    reexports: BTreeMap<String, (Vec<String>, usize)>,
}

struct Graph {
    src: PathBuf,
    files: BTreeMap<String, FileInfo>,
    /// Module path → file (relative to `src`).
    modules: BTreeMap<Vec<String>, String>,
}

impl Graph {
    fn load(src: &Path) -> Self {
        let mut paths = Vec::new();
        collect_rs(src, &mut paths);
        let mut files = BTreeMap::new();
        let mut modules = BTreeMap::new();
        for path in paths {
            let rel = path
                .strip_prefix(src)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            let module = module_of(&rel);
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let info = parse(&strip(&text), &module);
            modules.insert(module.clone(), rel.clone());
            files.insert(rel, info);
        }
        Self {
            src: src.to_path_buf(),
            files,
            modules,
        }
    }

    /// The file that defines `path` (following re-exports), if it is a crate file.
    fn resolve(&self, path: &[String], must: usize, depth: u32) -> Option<String> {
        if must > 0 && !self.modules.contains_key(&path[..must.min(path.len())]) {
            return None; // another crate's path
        }
        // The deepest existing module file.
        let mut k = path.len();
        let file = loop {
            if let Some(f) = self.modules.get(&path[..k]) {
                break f.clone();
            }
            if k == 0 {
                return None;
            }
            k -= 1;
        };
        if depth < 8
            && let Some(next) = path.get(k)
            && let Some(info) = self.files.get(&file)
            && let Some((target, must)) = info.reexports.get(next)
        {
            let mut full = target.clone();
            full.extend(path[k + 1..].iter().cloned());
            if let Some(f) = self.resolve(&full, *must, depth + 1) {
                return Some(f);
            }
        }
        Some(file)
    }

    fn edges(&self) -> BTreeMap<String, BTreeSet<String>> {
        let _ = &self.src;
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (file, info) in &self.files {
            let set = out.entry(file.clone()).or_default();
            for (u, must) in &info.uses {
                if let Some(target) = self.resolve(u, *must, 0)
                    && &target != file
                {
                    set.insert(target);
                }
            }
            let _ = &info.module;
        }
        out
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `lib.rs`/`main.rs` → `[]`; `a/mod.rs` → `[a]`; `a/b.rs` → `[a, b]`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && (stem == "lib" || stem == "main"))) {
        parts.push(stem.to_string());
    }
    parts
}

/// The source with comments, string literals and char literals blanked out (newlines and
/// braces of code kept).
fn strip(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            continue;
        }
        // Raw strings: r"…", r#"…"#, br"…".
        if (c == 'r' || (c == 'b' && next == Some('r')))
            && !prev_is_ident(&b, i)
            && let Some(end) = raw_string_end(&b, if c == 'b' { i + 1 } else { i })
        {
            out.push_str("\"\"");
            i = end;
            continue;
        }
        if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
            continue;
        }
        if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && j < i + 12 && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
                continue;
            }
            if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
                continue;
            }
            out.push(c);
            i += 1;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

fn prev_is_ident(b: &[char], i: usize) -> bool {
    i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')
}

/// `b[i]` is `r`: the index after the raw string that starts there, if one does.
fn raw_string_end(b: &[char], i: usize) -> Option<usize> {
    let mut j = i + 1;
    let mut hashes = 0;
    while b.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if b.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < b.len() {
        if b[j] == '"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(b.len())
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Sep,  // ::
    Open, // {
    Close,
    Comma,
    Semi,
    Star,
    Other(char),
}

fn tokens(text: &str) -> Vec<Tok> {
    let b: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(b[start..i].iter().collect()));
            continue;
        }
        if c == ':' && b.get(i + 1) == Some(&':') {
            out.push(Tok::Sep);
            i += 2;
            continue;
        }
        i += 1;
        match c {
            '{' => out.push(Tok::Open),
            '}' => out.push(Tok::Close),
            ',' => out.push(Tok::Comma),
            ';' => out.push(Tok::Semi),
            '*' => out.push(Tok::Star),
            c if c.is_whitespace() => {}
            c => out.push(Tok::Other(c)),
        }
    }
    out
}

/// Parses a stripped file: the paths it names and its re-exports, made absolute.
fn parse(text: &str, file_module: &[String]) -> FileInfo {
    let toks = tokens(text);
    let mut info = FileInfo {
        module: file_module.to_vec(),
        uses: Vec::new(),
        reexports: BTreeMap::new(),
    };
    // Inline modules (`mod tests { … }`): (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let current: Vec<String> = file_module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        match &toks[i] {
            Tok::Open => {
                depth += 1;
                i += 1;
            }
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(m)
                if m == "mod"
                    && matches!(toks.get(i + 1), Some(Tok::Ident(_)))
                    && toks.get(i + 2) == Some(&Tok::Open) =>
            {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    depth += 1;
                    inline.push((name.clone(), depth));
                }
                i += 3;
            }
            Tok::Ident(u) if u == "use" => {
                let public = is_pub_before(&toks, i);
                let mut trees = Vec::new();
                let mut j = i + 1;
                use_tree(&toks, &mut j, Vec::new(), &mut trees);
                for (path, alias) in trees {
                    let Some(abs) = absolute(&path, &current).or_else(|| {
                        // `use child::Item` names a module of this one (or another crate).
                        let mut p = current.clone();
                        p.extend(path.iter().cloned());
                        Some(p)
                    }) else {
                        continue;
                    };
                    let must = if matches!(
                        path.first().map(String::as_str),
                        Some("crate" | "self" | "super")
                    ) {
                        0
                    } else {
                        current.len() + 1
                    };
                    if public {
                        if let Some(name) = alias.or_else(|| path.last().cloned())
                            && name != "self"
                        {
                            info.reexports.insert(name, (abs, must));
                        }
                    } else {
                        info.uses.push((abs, must));
                    }
                }
                i = j;
            }
            Tok::Ident(k)
                if (k == "crate" || k == "super" || k == "self")
                    && toks.get(i + 1) == Some(&Tok::Sep)
                    && !(i > 0 && toks[i - 1] == Tok::Sep) =>
            {
                let mut path = vec![k.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::Sep) {
                    match toks.get(j + 1) {
                        Some(Tok::Ident(s)) => {
                            path.push(s.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                if let Some(abs) = absolute(&path, &current) {
                    info.uses.push((abs, 0));
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    info
}

/// Whether the `use` at `i` is `pub use`/`pub(crate) use`/`pub(super) use`.
fn is_pub_before(toks: &[Tok], i: usize) -> bool {
    match i.checked_sub(1).and_then(|k| toks.get(k)) {
        Some(Tok::Ident(p)) if p == "pub" => true,
        Some(Tok::Other(')')) => {
            // pub(crate) / pub(super) / pub(in path)
            let mut k = i - 1;
            while k > 0 && toks[k] != Tok::Other('(') {
                k -= 1;
            }
            k > 0 && toks[k - 1] == Tok::Ident("pub".into())
        }
        _ => false,
    }
}

/// Expands a use tree starting at `toks[*j]` into (path, alias) pairs; stops after `;` or at
/// the end of its group.
fn use_tree(
    toks: &[Tok],
    j: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix;
    loop {
        match toks.get(*j) {
            Some(Tok::Sep) => *j += 1,
            Some(Tok::Ident(s)) if s == "as" => {
                let alias = match toks.get(*j + 1) {
                    Some(Tok::Ident(a)) => Some(a.clone()),
                    _ => None,
                };
                *j += 2;
                out.push((path.clone(), alias));
                return;
            }
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *j += 1;
            }
            Some(Tok::Star) => {
                *j += 1;
                out.push((path.clone(), Some("*".into())));
                return;
            }
            Some(Tok::Open) => {
                *j += 1;
                loop {
                    match toks.get(*j) {
                        Some(Tok::Close) => {
                            *j += 1;
                            return;
                        }
                        Some(Tok::Comma) => *j += 1,
                        None => return,
                        _ => use_tree(toks, j, path.clone(), out),
                    }
                }
            }
            Some(Tok::Comma) | Some(Tok::Close) | Some(Tok::Semi) | None => {
                if !path.is_empty() {
                    out.push((path.clone(), None));
                }
                if toks.get(*j) == Some(&Tok::Semi) {
                    *j += 1;
                }
                return;
            }
            Some(Tok::Other(_)) => {
                *j += 1;
            }
        }
    }
}

/// A path relative to `current` made absolute (from the crate root); `None` for paths into
/// other crates.
fn absolute(path: &[String], current: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String>;
    let mut rest = &path[1..];
    match first.as_str() {
        "crate" => base = Vec::new(),
        "self" => base = current.to_vec(),
        "super" => {
            base = current.to_vec();
            base.pop();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// Tarjan's strongly connected components, each sorted.
fn strongly_connected(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on.insert(v);
        if let Some(ws) = s.edges.get(v) {
            for w in ws {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(lw));
                } else if s.on.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(iw));
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            comp.sort();
            s.out.push(comp);
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

#[test]
fn the_checker_finds_a_cycle_and_follows_reexports() {
    let dir = std::env::temp_dir().join(format!("keel-import-cycles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap_or_default();
    let w = |p: &str, s: &str| std::fs::write(dir.join(p), s).unwrap_or_default();
    // lib.rs re-exports b's item; a uses it through the root; b uses a: one cycle a ↔ b, and
    // the re-export does not make lib.rs part of it.
    w(
        "lib.rs",
        "mod a; mod b; pub use b::Thing;\npub struct Root;\n",
    );
    w(
        "a/mod.rs",
        "mod inner;\nuse crate::Thing; // crate::c in a comment\n",
    );
    w(
        "a/inner.rs",
        "fn f() { let _ = \"crate::b::X\"; super::super::Root; }\n",
    );
    w(
        "b.rs",
        "pub struct Thing;\nfn g() { crate::a::helper(); }\n#[cfg(test)]\nmod tests { use super::*; }\n",
    );
    let cycles = cycles_in(&dir);
    assert_eq!(
        cycles,
        vec![vec!["a/mod.rs".to_string(), "b.rs".to_string()]]
    );
    // Without b's use of a there is none.
    w("b.rs", "pub struct Thing;\n");
    assert!(cycles_in(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

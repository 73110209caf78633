//! Function-level localization for the localize bench: the definitions a gold patch edits
//! (computed from the patch and the tree searched), and definition-level BM25 (the baseline).
//!
//! A hunk's old lines are found in the tree at the line its header names, or (when the tree
//! is a release near the base commit, not the base commit itself) wherever its old lines
//! occur exactly; a hunk found nowhere adds nothing. A removed line belongs to the innermost
//! function, method or class holding it, stopping at the first function (a nested helper
//! counts as its outer function); an added run belongs to the definition holding the lines on
//! both sides of it. Edits outside every definition (imports, module constants) name no
//! definition: an issue whose patch edits none is left out of the function-level figures.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use rusqlite::Connection;

/// A definition: path, qualified name, kind, first and last line, depth.
#[derive(Debug, Clone)]
pub struct Def {
    pub path: String,
    pub qualified: String,
    pub kind: String,
    pub start: usize,
    pub end: usize,
    pub depth: i64,
}

/// The function, method and class definitions of the indexed files (all of them), per path.
pub fn definitions(conn: &Connection) -> HashMap<String, Vec<Def>> {
    let mut stmt = conn
        .prepare(
            "SELECT f.path, s.qualified, s.kind, s.start_line, s.end_line, s.depth
             FROM symbols s JOIN files f ON f.id = s.file_id
             WHERE s.kind IN ('function', 'method', 'class') ORDER BY f.path, s.start_line",
        )
        .unwrap();
    let mut out: HashMap<String, Vec<Def>> = HashMap::new();
    let rows = stmt
        .query_map([], |r| {
            Ok(Def {
                path: r.get(0)?,
                qualified: r.get(1)?,
                kind: r.get(2)?,
                start: r.get::<_, i64>(3)?.max(1) as usize,
                end: r.get::<_, i64>(4)?.max(1) as usize,
                depth: r.get(5)?,
            })
        })
        .unwrap();
    for d in rows.flatten() {
        out.entry(d.path.clone()).or_default().push(d);
    }
    out
}

/// One hunk of a unified diff: the old start line and its lines (' ', '-', '+' prefixed).
struct Hunk {
    old_start: usize,
    lines: Vec<String>,
}

/// The hunks of each file of a unified diff.
fn hunks(patch: &str) -> Vec<(String, Vec<Hunk>)> {
    let mut out: Vec<(String, Vec<Hunk>)> = Vec::new();
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("--- ") {
            let path = rest.strip_prefix("a/").unwrap_or(rest).to_string();
            out.push((path, Vec::new()));
        } else if line.starts_with("+++ ") || line.starts_with("diff ") {
            continue;
        } else if let Some(rest) = line.strip_prefix("@@ -") {
            let start: usize = rest
                .split([',', ' '])
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            if let Some((_, hs)) = out.last_mut() {
                hs.push(Hunk {
                    old_start: start,
                    lines: Vec::new(),
                });
            }
        } else if let Some((_, hs)) = out.last_mut()
            && let Some(h) = hs.last_mut()
            && (line.starts_with(' ') || line.starts_with('-') || line.starts_with('+'))
        {
            h.lines.push(line.to_string());
        }
    }
    out
}

/// Where a hunk's old lines start in `file` (1-based): at its header's line if they match
/// there, else at their first exact occurrence.
fn locate(h: &Hunk, file: &[&str]) -> Option<usize> {
    let old: Vec<&str> = h
        .lines
        .iter()
        .filter(|l| !l.starts_with('+'))
        .map(|l| l[1..].trim_end())
        .collect();
    if old.is_empty() {
        // A pure addition with no context (`-U0`): the header names the line it follows.
        return (h.old_start <= file.len()).then_some(h.old_start + 1);
    }
    let matches_at = |at: usize| {
        at >= 1
            && at + old.len() - 1 <= file.len()
            && old
                .iter()
                .enumerate()
                .all(|(i, l)| file[at - 1 + i].trim_end() == *l)
    };
    if matches_at(h.old_start) {
        return Some(h.old_start);
    }
    (1..=file.len()).find(|&at| matches_at(at))
}

/// The definition an edited line belongs to.
fn owner(defs: &[Def], line: usize) -> Option<&Def> {
    let mut holding: Vec<&Def> = defs
        .iter()
        .filter(|d| d.start <= line && line <= d.end)
        .collect();
    holding.sort_by_key(|d| (d.depth, d.start));
    let mut pick = None;
    for d in holding {
        pick = Some(d);
        if d.kind != "class" {
            break;
        }
    }
    pick
}

/// The definitions a gold patch edits in the gold files: `(path, qualified name)`.
pub fn gold_definitions(
    root: &Path,
    patch: &str,
    files: &[String],
    defs: &HashMap<String, Vec<Def>>,
) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, hs) in hunks(patch) {
        if !files.contains(&path) {
            continue;
        }
        let Some(fdefs) = defs.get(&path) else {
            continue;
        };
        let text = std::fs::read_to_string(root.join(&path)).unwrap_or_default();
        let file: Vec<&str> = text.split('\n').collect();
        for h in &hs {
            let Some(at) = locate(h, &file) else { continue };
            let mut old = at; // the old line the next ' ' or '-' line is
            let mut add = |d: Option<&Def>| {
                if let Some(d) = d {
                    out.insert((d.path.clone(), d.qualified.clone()));
                }
            };
            let mut prev_added = false;
            for l in &h.lines {
                match l.as_bytes().first() {
                    Some(b'-') => {
                        add(owner(fdefs, old));
                        old += 1;
                        prev_added = false;
                    }
                    Some(b'+') => {
                        if !prev_added {
                            // Added between old lines `before` and `old`: inside a definition
                            // only when it holds both.
                            let before = old.saturating_sub(1);
                            let a = owner(fdefs, before);
                            let b = owner(fdefs, old);
                            if let (Some(a), Some(b)) = (a, b)
                                && a.qualified == b.qualified
                                && a.start == b.start
                            {
                                add(Some(a));
                            }
                        }
                        prev_added = true;
                    }
                    _ => {
                        old += 1;
                        prev_added = false;
                    }
                }
            }
        }
    }
    out
}

/// Definition-level BM25: every function, method and class of the candidate files is a
/// document (its whole span).
/// A definition's key (path, qualified name), term counts and length.
type DefDoc = ((String, String), HashMap<String, u32>, usize);

pub struct DefBm25 {
    docs: Vec<DefDoc>,
    df: HashMap<String, usize>,
    avg: f64,
}

impl DefBm25 {
    pub fn new(
        root: &Path,
        paths: &[String],
        defs: &HashMap<String, Vec<Def>>,
        tokens: &dyn Fn(&str) -> Vec<String>,
    ) -> DefBm25 {
        let mut docs = Vec::new();
        let mut df: HashMap<String, usize> = HashMap::new();
        let mut seen = BTreeSet::new();
        for p in paths {
            let Some(fdefs) = defs.get(p) else { continue };
            let text = std::fs::read_to_string(root.join(p)).unwrap_or_default();
            let lines: Vec<&str> = text.split('\n').collect();
            for d in fdefs {
                if !seen.insert((d.path.clone(), d.qualified.clone())) {
                    continue;
                }
                let from = d.start.saturating_sub(1).min(lines.len());
                let to = d.end.min(lines.len()).max(from);
                let toks = tokens(&lines[from..to].join("\n"));
                let mut tf: HashMap<String, u32> = HashMap::new();
                for t in &toks {
                    *tf.entry(t.clone()).or_default() += 1;
                }
                for t in tf.keys() {
                    *df.entry(t.clone()).or_default() += 1;
                }
                docs.push(((d.path.clone(), d.qualified.clone()), tf, toks.len()));
            }
        }
        let avg = docs.iter().map(|d| d.2 as f64).sum::<f64>() / docs.len().max(1) as f64;
        DefBm25 { docs, df, avg }
    }

    pub fn rank(
        &self,
        query: &str,
        depth: usize,
        tokens: &dyn Fn(&str) -> Vec<String>,
    ) -> Vec<(String, String)> {
        let mut q = tokens(query);
        q.sort();
        q.dedup();
        let n = self.docs.len() as f64;
        let mut scored: Vec<(f64, &(String, String))> = self
            .docs
            .iter()
            .map(|(key, tf, len)| {
                let mut s = 0.0;
                for t in &q {
                    let Some(&f) = tf.get(t) else { continue };
                    let df = *self.df.get(t).unwrap_or(&0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    let f = f as f64;
                    s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * *len as f64 / self.avg));
                }
                (s, key)
            })
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored
            .into_iter()
            .take(depth)
            .map(|(_, k)| k.clone())
            .collect()
    }
}

/// Acc@k over definitions: `any` — a gold definition among the first k; `all` — every one.
#[derive(Default, Clone)]
pub struct DefTally {
    pub n: usize,
    pub any: [usize; 4],
    pub all: [usize; 4],
}

impl DefTally {
    /// Adds one issue; returns the rank of its first gold definition.
    pub fn add(
        &mut self,
        ranked: &[(String, String)],
        gold: &BTreeSet<(String, String)>,
    ) -> Option<usize> {
        self.n += 1;
        let first = ranked.iter().position(|k| gold.contains(k));
        let last = gold
            .iter()
            .map(|g| ranked.iter().position(|k| k == g))
            .try_fold(0usize, |m, p| p.map(|p| m.max(p)));
        for (i, k) in [1, 5, 10, 20].iter().enumerate() {
            if first.is_some_and(|p| p < *k) {
                self.any[i] += 1;
            }
            if last.is_some_and(|p| p < *k) {
                self.all[i] += 1;
            }
        }
        first
    }

    pub fn merge(&mut self, o: &DefTally) {
        self.n += o.n;
        for i in 0..4 {
            self.any[i] += o.any[i];
            self.all[i] += o.all[i];
        }
    }

    pub fn row(&self, name: &str, label: &str) -> String {
        let pct = |x: usize| 100.0 * x as f64 / self.n.max(1) as f64;
        format!(
            "| {name} | {label} | {} | {:.0}% | {:.0}% | {:.0}% | {:.0}% | {:.0}% | {:.0}% |",
            self.n,
            pct(self.any[0]),
            pct(self.any[1]),
            pct(self.any[2]),
            pct(self.any[3]),
            pct(self.all[1]),
            pct(self.all[3]),
        )
    }
}

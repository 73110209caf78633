//! The codemap: a deterministic structural overview of the workspace that fits a token
//! budget — file counts by language, directories with file counts, and the key files ranked
//! by import-graph centrality (PageRank over resolved imports, ties broken by how much a file
//! defines) with their top-level definitions.
//!
//! The same index always renders the same bytes (everything is sorted; no times, no absolute
//! paths). Tokens are estimated as bytes / 4, like the rest of Keel.

use std::collections::{BTreeMap, HashMap};

use crate::pathrole::PathRole;
use crate::{Index, IndexError};

/// Share of the budget the directory list may use.
const DIR_SHARE: f64 = 0.35;
/// Top-level definitions listed per key file at most.
const MAX_SYMBOLS_PER_FILE: usize = 8;
const PAGERANK_ITERATIONS: usize = 25;
const DAMPING: f64 = 0.85;

fn tokens(s: &str) -> usize {
    s.len().div_ceil(4)
}

struct FileInfo {
    path: String,
    language: Option<String>,
}

impl Index {
    /// The codemap within `budget_tokens` (empty when the index holds no files or the budget
    /// is too small for the header).
    pub fn codemap(&self, budget_tokens: usize) -> Result<String, IndexError> {
        let c = &self.conn;
        let mut stmt = c.prepare("SELECT id, path, language FROM files ORDER BY path")?;
        let files: Vec<(i64, FileInfo)> = stmt
            .query_map([], |r| {
                Ok((
                    r.get(0)?,
                    FileInfo {
                        path: r.get(1)?,
                        language: r.get(2)?,
                    },
                ))
            })?
            .collect::<Result<_, _>>()?;
        if files.is_empty() || budget_tokens == 0 {
            return Ok(String::new());
        }
        let index_of: HashMap<i64, usize> = files
            .iter()
            .enumerate()
            .map(|(i, (id, _))| (*id, i))
            .collect();
        let by_path: HashMap<&str, usize> = files
            .iter()
            .enumerate()
            .map(|(i, (_, f))| (f.path.as_str(), i))
            .collect();
        let mut stmt = c.prepare(
            "SELECT DISTINCT file_id, target FROM imports WHERE target IS NOT NULL ORDER BY 1, 2",
        )?;
        let mut edges: Vec<(usize, usize)> = Vec::new();
        for row in stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))? {
            let (src, target) = row?;
            if let (Some(&s), Some(&t)) = (index_of.get(&src), by_path.get(target.as_str()))
                && s != t
            {
                edges.push((s, t));
            }
        }
        let mut stmt = c.prepare(
            "SELECT file_id, kind, name FROM symbols WHERE depth = 0 AND kind != 'impl'
             ORDER BY file_id, start_line",
        )?;
        let mut top_symbols: HashMap<usize, Vec<String>> = HashMap::new();
        for row in stmt.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
            ))
        })? {
            let (fid, kind, name) = row?;
            if let Some(&i) = index_of.get(&fid) {
                top_symbols
                    .entry(i)
                    .or_default()
                    .push(format!("{} {name}", short_kind(&kind)));
            }
        }
        let rank = pagerank(files.len(), &edges);
        let mut order: Vec<usize> = (0..files.len()).collect();
        // Tests, fixtures, vendored and generated code come after the source they serve.
        let role: Vec<f64> = files
            .iter()
            .map(|(_, f)| match PathRole::of(&f.path) {
                PathRole::Source | PathRole::Data => 1.0,
                PathRole::Docs => 0.5,
                _ => 0.2,
            })
            .collect();
        let score = |i: usize| -> f64 {
            let defs = top_symbols.get(&i).map_or(0, Vec::len) as f64;
            (rank[i] + 1e-4 * (1.0 + defs).ln() / files.len() as f64) * role[i]
        };
        order.sort_by(|&a, &b| {
            score(b)
                .total_cmp(&score(a))
                .then_with(|| files[a].1.path.cmp(&files[b].1.path))
        });

        let mut out = String::new();
        let mut langs: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, f) in &files {
            *langs
                .entry(f.language.as_deref().unwrap_or("text"))
                .or_default() += 1;
        }
        let mut langs: Vec<(&str, usize)> = langs.into_iter().collect();
        langs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let lang_list: Vec<String> = langs.iter().map(|(l, n)| format!("{l} {n}")).collect();
        out.push_str(&format!(
            "Codemap: {} files ({})\n",
            files.len(),
            lang_list.join(", ")
        ));
        if tokens(&out) > budget_tokens {
            return Ok(String::new());
        }
        let dir_budget = ((budget_tokens as f64) * DIR_SHARE) as usize;
        out.push_str(&directories(&files, dir_budget.saturating_sub(2)));
        let heading = "Key files (most imported first) and their top-level definitions:\n";
        if tokens(&out) + tokens(heading) + 12 > budget_tokens {
            return Ok(out);
        }
        out.push_str(heading);
        for i in order {
            let path = &files[i].1.path;
            let syms = top_symbols.get(&i).map(Vec::as_slice).unwrap_or(&[]);
            let mut n = syms.len().min(MAX_SYMBOLS_PER_FILE);
            loop {
                let line = key_file_line(path, &syms[..n], syms.len());
                if tokens(&out) + tokens(&line) <= budget_tokens {
                    out.push_str(&line);
                    break;
                }
                if n == 0 {
                    return Ok(out);
                }
                n /= 2;
            }
        }
        Ok(out)
    }
}

fn key_file_line(path: &str, syms: &[String], total: usize) -> String {
    if syms.is_empty() {
        return format!("  {path}\n");
    }
    let more = if total > syms.len() {
        format!(", +{}", total - syms.len())
    } else {
        String::new()
    };
    format!("  {path}: {}{more}\n", syms.join(", "))
}

fn short_kind(kind: &str) -> &str {
    match kind {
        "function" => "fn",
        "method" => "fn",
        "constant" => "const",
        "interface" => "iface",
        other => other,
    }
}

/// Directories (two levels deep) with their file counts: the biggest first until the budget
/// is used, printed in path order.
fn directories(files: &[(i64, FileInfo)], budget: usize) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (_, f) in files {
        let parts: Vec<&str> = f.path.split('/').collect();
        for depth in 1..parts.len().min(3) {
            *counts.entry(parts[..depth].join("/")).or_default() += 1;
        }
    }
    if counts.is_empty() {
        return String::new();
    }
    let line = |d: &str, n: usize| -> String {
        let depth = d.matches('/').count();
        let name = d.rsplit('/').next().unwrap_or(d);
        format!("{}{name}/ {n}\n", "  ".repeat(depth + 1))
    };
    let mut pick: Vec<(&String, &usize)> = counts.iter().collect();
    pick.sort_by(|a, b| {
        let da = a.0.matches('/').count();
        let db = b.0.matches('/').count();
        da.cmp(&db).then(b.1.cmp(a.1)).then(a.0.cmp(b.0))
    });
    let mut chosen: BTreeMap<&str, usize> = BTreeMap::new();
    let header = "Directories (files):\n";
    let mut used = tokens(header);
    for (d, n) in pick {
        // A subdirectory only under a listed parent.
        if let Some((parent, _)) = d.rsplit_once('/')
            && !chosen.contains_key(parent)
        {
            continue;
        }
        let t = tokens(&line(d, *n));
        if used + t > budget {
            continue;
        }
        used += t;
        chosen.insert(d, *n);
    }
    if chosen.is_empty() {
        return String::new();
    }
    let mut out = header.to_string();
    for (d, n) in chosen {
        out.push_str(&line(d, n));
    }
    out
}

/// PageRank over `edges` (importer → imported); dangling mass spreads evenly.
fn pagerank(n: usize, edges: &[(usize, usize)]) -> Vec<f64> {
    let mut out_degree = vec![0usize; n];
    for (s, _) in edges {
        out_degree[*s] += 1;
    }
    let base = 1.0 / n as f64;
    let mut rank = vec![base; n];
    for _ in 0..PAGERANK_ITERATIONS {
        let dangling: f64 = (0..n)
            .filter(|&i| out_degree[i] == 0)
            .map(|i| rank[i])
            .sum();
        let mut next = vec![(1.0 - DAMPING) * base + DAMPING * dangling * base; n];
        for &(s, t) in edges {
            next[t] += DAMPING * rank[s] / out_degree[s] as f64;
        }
        rank = next;
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pagerank_favours_the_imported() {
        // 0 and 1 import 2; 2 imports 3.
        let r = pagerank(4, &[(0, 2), (1, 2), (2, 3)]);
        assert!(r[2] > r[0] && r[2] > r[1]);
        assert!(r[3] > r[0]);
        let total: f64 = r.iter().sum();
        assert!((total - 1.0).abs() < 1e-9);
    }
}

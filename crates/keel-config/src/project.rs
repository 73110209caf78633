//! What a project's own `.keel/config.toml` may set. The file lives in the workspace, where a
//! model (or whoever wrote the repository) can write it, so the rule is structural: a project
//! may set only the keys [`PROJECT_RULES`] lists, each in the way its row says (freely, or only
//! in the direction that makes Keel stricter). Everything else — the server, the store, the
//! database, MCP servers, phase rollback commands, per-language lint commands, and any key
//! added to the configuration later — is refused until a row says otherwise, with a
//! [`ConfigWarning`] naming the key and the file.
//!
//! A project's `[llm]` section decides where the user's code and keys go and which "model"
//! chooses the tool calls (a project `scripted` provider plays its own script), so it is only
//! a *suggestion*: ignored, with one notice saying how to accept it, unless the user accepted
//! exactly that content (its SHA-256) with `keel trust llm`, recorded in Keel's trust store
//! ([`keel_tools::trust`]). The user's own file, `KEEL_*` variables and flags are trusted.

use std::path::Path;

use toml::{Table, Value};

use super::ConfigError;

/// How a project file may use one key (and everything below it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectRule {
    /// The project may set it as it likes.
    Free,
    /// A boolean the project may set to `strict` only.
    Bool { strict: bool },
    /// A list the project may only shorten: entries the layers below it do not have are
    /// dropped (an unset lower list means no restriction).
    Subset,
    /// A list the project may only lengthen: its entries are added to the lower layers'.
    Superset,
    /// [`ProjectRule::Superset`] of paths to hide from commands, each under the user's home
    /// (`~/…`, no `.`/`..` step) and holding no directory of `PATH`: a project hides more of
    /// the user's secrets, never the system or the tools commands run (red-team pass 7,
    /// R7-26: `hide = ["/usr/bin"]` made every command fail).
    HiddenPaths,
    /// A value from a scale, strictest first: the project may only pick one at least as strict.
    Ordered(&'static [&'static str]),
    /// A budget, cap, timeout or thread count the project may only lower: a value above the
    /// layers below it is ignored (theirs stays), so a repository cannot raise what a run in
    /// it may spend. `zero` says what 0 means for the key.
    AtMost { zero: Zero },
    /// A whole section that is only a suggestion: used only when the user accepted exactly
    /// its content for this workspace (trust subject named here, see [`keel_tools::trust`]).
    Suggested(&'static str),
    /// A list that may only narrow what the layers below allow: the project's value is moved
    /// to the sibling key named here, which the reader intersects with the lower layers' own
    /// setting (or its default), so a project can take tools away, never add one.
    Narrows(&'static str),
}

/// What 0 means for a [`ProjectRule::AtMost`] key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zero {
    /// The least: off, none, at once.
    Least,
    /// One per core (`index.threads`).
    Cores,
}

/// The trust subject of a project's `[llm]` section.
pub const LLM_SUBJECT: &str = "llm";

const AT_MOST: ProjectRule = ProjectRule::AtMost { zero: Zero::Least };

/// The keys a project may set (`*` matches any one table key, e.g. a phase name). A row on a
/// table covers everything below it. A key no row covers is refused.
pub const PROJECT_RULES: &[(&str, ProjectRule)] = &[
    ("agent", ProjectRule::Free),
    ("agents", ProjectRule::Free),
    ("fallback_chain", ProjectRule::Free),
    ("index", ProjectRule::Free),
    // What a run may spend — model requests, tokens, processes, threads, time: a project may
    // only lower it (red-team #29, #63).
    ("agent.max_iterations", AT_MOST),
    ("agent.max_output_chars", AT_MOST),
    ("agent.compact_threshold", AT_MOST),
    ("agent.context_window", AT_MOST),
    ("agent.self_correction_cap", AT_MOST),
    ("agent.memory_tokens", AT_MOST),
    ("agents.max_depth", AT_MOST),
    ("agents.max_concurrent", AT_MOST),
    ("agents.max_steps", AT_MOST),
    ("agents.timeout_secs", AT_MOST),
    ("fallback_chain.recovery.max_retries", AT_MOST),
    ("index.max_file_kb", AT_MOST),
    ("index.threads", ProjectRule::AtMost { zero: Zero::Cores }),
    ("index.codemap_tokens", AT_MOST),
    ("index.codemap_wait_ms", AT_MOST),
    ("rollback.timeout_secs", AT_MOST),
    // Gates a project sets are asked about under the session's approval policy (`verify`).
    ("verify", ProjectRule::Free),
    // A project may turn verification on, never off over the user's, and adds gates to the
    // user's list rather than replacing it (red-team R17).
    ("verify.enabled", ProjectRule::Bool { strict: true }),
    ("verify.always", ProjectRule::Bool { strict: true }),
    ("verify.commands", ProjectRule::Superset),
    ("verify.timeout_secs", AT_MOST),
    ("snapshots.enabled", ProjectRule::Bool { strict: true }),
    // A project may turn plan_exec on, or pick it as the mode, never turn it off or leave it
    // for the unphased loop over the user's choice.
    ("plan_exec.enabled", ProjectRule::Bool { strict: true }),
    ("agent.mode", ProjectRule::Ordered(&["plan_exec", "react"])),
    // Not past the read-only planning phase the user's sessions start in (red-team R3).
    (
        "plan_exec.start_phase",
        ProjectRule::Ordered(&["planning", "building", "verification", "delivery"]),
    ),
    ("plan_exec.auto_advance_after_steps", ProjectRule::Free),
    // A phase's tools: a project may take tools away from a phase, never add one (its list
    // is intersected with the user's or the default whitelist): planning stays read-only.
    (
        "plan_exec.phases.*.whitelist",
        ProjectRule::Narrows("project_whitelist"),
    ),
    ("plan_exec.phases.*.bash_deny", ProjectRule::Superset),
    // Features a user turned off stay off (red-team R3): a project may only turn them off.
    ("shell.enabled", ProjectRule::Bool { strict: false }),
    ("agents.enabled", ProjectRule::Bool { strict: false }),
    ("shell.timeout_secs", AT_MOST),
    ("shell.max_timeout_secs", AT_MOST),
    // Run by `run_tests` (judged like any call) and as the tests gate (asked about like a
    // project gate).
    ("shell.test_command", ProjectRule::Free),
    ("shell.test_timeout_secs", AT_MOST),
    ("shell.sandbox", ProjectRule::Bool { strict: true }),
    ("shell.network", ProjectRule::Bool { strict: false }),
    ("shell.writable", ProjectRule::Subset),
    ("shell.env_keep", ProjectRule::Subset),
    ("shell.allow", ProjectRule::Subset),
    ("shell.deny", ProjectRule::Superset),
    // Secret stores hidden from commands: a project may hide more, never uncover one.
    ("shell.hide", ProjectRule::HiddenPaths),
    ("shell.lint.enabled", ProjectRule::Bool { strict: false }),
    ("shell.lint.timeout_secs", AT_MOST),
    // Approval: a project may ask more and deny more, never allow more.
    (
        "approval.policy",
        ProjectRule::Ordered(&["untrusted", "on-request", "never"]),
    ),
    ("approval.allow", ProjectRule::Subset),
    ("approval.ask", ProjectRule::Superset),
    ("approval.deny", ProjectRule::Superset),
    ("approval.timeout_secs", AT_MOST),
    // Where the user's code and keys go, and who chooses the tool calls.
    ("llm", ProjectRule::Suggested(LLM_SUBJECT)),
];

/// The most entries a project's config may add to one list ([`ProjectRule::Superset`]).
pub const MAX_PROJECT_ENTRIES: usize = 64;
/// The most text (bytes, as TOML values) a project's config may add to one list.
pub const MAX_PROJECT_TEXT: usize = 16 * 1024;

/// What kind of project setting was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    /// Refused (in whole or in part): a project's config may not set or widen it.
    Refused,
    /// A section used only once the user accepts it (`keel trust`).
    Suggestion,
}

/// A project setting that was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The file it came from.
    pub source: String,
    /// The dotted key (`shell.sandbox`), or the section (`llm`).
    pub key: String,
    /// What was ignored and why.
    pub message: String,
    pub kind: WarningKind,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            WarningKind::Refused => write!(
                f,
                "{}: `{}` {}; set it in your own config (~/.config/keel/config.toml), with a KEEL_* variable or a flag if you trust this project",
                self.source, self.key, self.message
            ),
            WarningKind::Suggestion => write!(
                f,
                "{}: its [{}] settings ({}) are only a suggestion and are not used: your own model settings apply. To use them in this workspace, review them with `keel trust show` and accept exactly this content with `keel trust {}`",
                self.source, self.key, self.message, self.key
            ),
        }
    }
}

/// Whether the user accepted a suggestion: `(subject, sha256)`.
pub type Accepted<'a> = &'a dyn Fn(&str, &str) -> bool;

/// Applies [`PROJECT_RULES`] to a project layer's `table`, given `lower`: the configuration
/// below it with defaults filled in. Returns what was refused or only suggested.
pub(super) fn restrict(
    lower: &Table,
    table: &mut Table,
    source: &str,
    accepted: Accepted<'_>,
) -> Vec<ConfigWarning> {
    let mut warnings = Vec::new();
    walk(lower, table, &[], source, accepted, &mut warnings);
    warnings
}

/// The most specific row covering `path`, or whether some row lies below it.
enum Lookup {
    Rule(ProjectRule),
    Descend,
    Refused,
}

fn lookup(path: &[&str]) -> Lookup {
    let mut best: Option<(usize, ProjectRule)> = None;
    let mut below = false;
    for (pattern, rule) in PROJECT_RULES {
        let parts: Vec<&str> = pattern.split('.').collect();
        let n = parts.len().min(path.len());
        let prefix_matches = parts[..n]
            .iter()
            .zip(&path[..n])
            .all(|(p, k)| *p == "*" || p == k);
        if !prefix_matches {
            continue;
        }
        if parts.len() <= path.len() {
            if best.is_none_or(|(len, _)| parts.len() > len) {
                best = Some((parts.len(), *rule));
            }
        } else {
            below = true;
        }
    }
    match (best, below) {
        // A row more specific than the one covering this table (`agent` is free, but
        // `agent.max_iterations` may only be lowered): look at its keys one by one.
        (Some(_), true) => Lookup::Descend,
        (Some((_, rule)), false) => Lookup::Rule(rule),
        (None, true) => Lookup::Descend,
        (None, false) => Lookup::Refused,
    }
}

fn walk(
    lower: &Table,
    table: &mut Table,
    prefix: &[&str],
    source: &str,
    accepted: Accepted<'_>,
    warnings: &mut Vec<ConfigWarning>,
) {
    let empty = Table::new();
    let keys: Vec<String> = table.keys().cloned().collect();
    for name in keys {
        let mut path: Vec<&str> = prefix.to_vec();
        path.push(&name);
        let key = path.join(".");
        let below = lower.get(&name);
        let warn = |message: String, kind: WarningKind| ConfigWarning {
            source: source.to_string(),
            key: key.clone(),
            message,
            kind,
        };
        match lookup(&path) {
            Lookup::Descend => {
                if let Some(Value::Table(sub)) = table.get_mut(&name) {
                    let below = match below {
                        Some(Value::Table(t)) => t,
                        _ => &empty,
                    };
                    walk(below, sub, &path, source, accepted, warnings);
                }
                // A non-table here is a type error that validation names.
            }
            Lookup::Refused => {
                table.remove(&name);
                warnings.push(warn(
                    "is ignored: a project's config may not set it".into(),
                    WarningKind::Refused,
                ));
            }
            Lookup::Rule(ProjectRule::Suggested(subject)) => {
                let Some(value) = table.remove(&name) else {
                    continue;
                };
                if value.as_table().is_some_and(Table::is_empty) {
                    continue; // an empty section suggests nothing
                }
                let destination = destination(&value);
                match (&destination, accepted(subject, &content_hash(&value))) {
                    (Ok(_), true) => {
                        table.insert(name, value);
                    }
                    // Even accepted, an endpoint that does not read as it is parsed is never
                    // used (red-team pass 4, R4-13).
                    (Err(why), true) => warnings.push(warn(
                        format!("is not applied although you accepted it: {why}"),
                        WarningKind::Refused,
                    )),
                    (Ok(to), false) => warnings.push(warn(
                        format!("{} — {to}", summary(&value)),
                        WarningKind::Suggestion,
                    )),
                    (Err(why), false) => warnings.push(warn(
                        format!("{} — cannot be accepted: {why}", summary(&value)),
                        WarningKind::Suggestion,
                    )),
                }
            }
            Lookup::Rule(ProjectRule::Narrows(into)) => {
                if let Some(value) = table.remove(&name) {
                    table.insert(into.to_string(), value);
                }
            }
            Lookup::Rule(rule) => {
                let Some(value) = table.remove(&name) else {
                    continue;
                };
                match judge(rule, below, value) {
                    Verdict::Keep(v) => {
                        table.insert(name, v);
                    }
                    Verdict::Narrowed(v, message) => {
                        table.insert(name, v);
                        warnings.push(warn(message, WarningKind::Refused));
                    }
                    Verdict::Drop(message) => warnings.push(warn(message, WarningKind::Refused)),
                }
            }
        }
    }
}

/// SHA-256 of a suggested section, independent of key order and formatting: what the user
/// accepts with `keel trust`.
pub fn content_hash(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    keel_tools::trust::sha256_hex(text.as_bytes())
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Table(t) => {
            let mut keys: Vec<&String> = t.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                if let Some(v) = t.get(k) {
                    canonical(v, out);
                }
                out.push(',');
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for v in a {
                canonical(v, out);
                out.push(',');
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// `key = value` pairs of a section on one line, cut at about 200 characters.
fn summary(value: &Value) -> String {
    let mut pairs = Vec::new();
    flatten("", value, &mut pairs);
    let text = pairs.join(", ");
    if text.chars().count() > 200 {
        let cut: String = text.chars().take(200).collect();
        format!("{cut}…")
    } else {
        text
    }
}

fn flatten(prefix: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        other => out.push(format!("{prefix} = {other}")),
    }
}

/// A section a project suggests: what the user is shown and accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suggestion {
    /// The trust subject (`llm`).
    pub subject: &'static str,
    /// The section as TOML, with its header.
    pub text: String,
    /// Its [`content_hash`].
    pub sha256: String,
    /// Where it sends the user's prompts and which key goes with them ("sends your prompts and
    /// the key in $OPENAI_API_KEY to 127.0.0.1:18099"), or why it cannot be accepted (an
    /// endpoint that does not read as it is parsed).
    pub destination: Result<String, String>,
}

/// Where an `[llm]` section sends the user's prompts and keys (see
/// [`Suggestion::destination`]): every `base_url` in it, parsed as the HTTP client parses it,
/// must read as it is parsed (`http://127.0.0.1:18099\@api.openai.com/v1` goes to 127.0.0.1;
/// red-team pass 4, R4-13).
pub fn destination(section: &Value) -> Result<String, String> {
    fn collect<'a>(v: &'a Value, urls: &mut Vec<&'a str>, keys: &mut Vec<&'a str>) {
        if let Value::Table(t) = v {
            for (k, v) in t {
                match (k.as_str(), v) {
                    ("base_url", Value::String(u)) => urls.push(u),
                    ("api_key_env", Value::String(e)) => keys.push(e),
                    _ => collect(v, urls, keys),
                }
            }
        }
    }
    let (mut urls, mut keys) = (Vec::new(), Vec::new());
    collect(section, &mut urls, &mut keys);
    let mut hosts = Vec::new();
    for url in urls {
        let host = keel_mcp::config::plain_endpoint_host(url)
            .map_err(|e| format!("its `base_url` {e}"))?;
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    let what = if keys.is_empty() {
        "your prompts and code".to_string()
    } else {
        let named: Vec<String> = keys.iter().map(|k| format!("${k}")).collect();
        format!("your prompts, code and the key in {}", named.join(", "))
    };
    Ok(if hosts.is_empty() {
        format!("sends {what} to the provider's own endpoint")
    } else {
        format!("sends {what} to {}", hosts.join(", "))
    })
}

/// The `[llm]` section the project at `workspace` suggests (`None` when its config has none).
pub fn llm_suggestion(workspace: &Path) -> Result<Option<Suggestion>, ConfigError> {
    let Some(layer) = super::Layer::from_file(&workspace.join(".keel").join("config.toml"))? else {
        return Ok(None);
    };
    let Some(value) = layer.table.get(LLM_SUBJECT) else {
        return Ok(None);
    };
    if value.as_table().is_some_and(Table::is_empty) {
        return Ok(None);
    }
    let mut wrapper = Table::new();
    wrapper.insert(LLM_SUBJECT.into(), value.clone());
    Ok(Some(Suggestion {
        subject: LLM_SUBJECT,
        text: toml::to_string(&wrapper).unwrap_or_default(),
        sha256: content_hash(value),
        destination: destination(value),
    }))
}

enum Verdict {
    Keep(Value),
    /// Applied in part; the message says what was left out.
    Narrowed(Value, String),
    Drop(String),
}

fn judge(rule: ProjectRule, below: Option<&Value>, value: Value) -> Verdict {
    match rule {
        ProjectRule::Free | ProjectRule::Suggested(_) | ProjectRule::Narrows(_) => {
            Verdict::Keep(value)
        }
        ProjectRule::Bool { strict } => match value.as_bool() {
            Some(b) if b == strict => Verdict::Keep(value),
            Some(b) => Verdict::Drop(format!(
                "= {b} is ignored: a project's config may only make this stricter"
            )),
            None => Verdict::Keep(value), // a type error: validation names it
        },
        ProjectRule::Subset => {
            let (Some(Value::Array(allowed)), Value::Array(asked)) = (below, &value) else {
                return Verdict::Keep(value);
            };
            let (kept, refused): (Vec<Value>, Vec<Value>) =
                asked.iter().cloned().partition(|v| allowed.contains(v));
            if refused.is_empty() {
                Verdict::Keep(value)
            } else {
                Verdict::Narrowed(
                    Value::Array(kept),
                    format!(
                        "entries {} are ignored: a project's config may only shorten this list",
                        list(&refused)
                    ),
                )
            }
        }
        ProjectRule::HiddenPaths => {
            let Value::Array(asked) = &value else {
                return Verdict::Keep(value); // a type error: validation names it
            };
            if let Some(why) = over_bound(asked) {
                return Verdict::Drop(why);
            }
            let (kept, refused): (Vec<Value>, Vec<Value>) = asked
                .iter()
                .cloned()
                .partition(|v| v.as_str().is_some_and(project_may_hide));
            match judge(ProjectRule::Superset, below, Value::Array(kept)) {
                Verdict::Keep(all) if !refused.is_empty() => Verdict::Narrowed(
                    all,
                    format!(
                        "entries {} are ignored: a project's config may hide only paths under your home (`~/…`) that hold no directory of PATH",
                        list(&refused)
                    ),
                ),
                other => other,
            }
        }
        ProjectRule::Superset => {
            // Each entry costs every command or run (a `shell.hide` entry is a mount per
            // command, a `verify.commands` entry a gate run, a rule a check of every call):
            // a repository's list is bounded like its constitution (R6-16).
            if let Value::Array(asked) = &value
                && let Some(why) = over_bound(asked)
            {
                return Verdict::Drop(why);
            }
            let (Some(Value::Array(base)), Value::Array(asked)) = (below, &value) else {
                return Verdict::Keep(value);
            };
            let mut all = base.clone();
            all.extend(asked.iter().filter(|v| !base.contains(v)).cloned());
            Verdict::Keep(Value::Array(all))
        }
        ProjectRule::AtMost { zero } => {
            let number = |v: &Value| match v {
                Value::Integer(i) => Some(*i as f64),
                Value::Float(f) => Some(*f),
                _ => None,
            };
            let effective = |n: f64| match zero {
                Zero::Cores if n == 0.0 => std::thread::available_parallelism()
                    .map(|c| c.get() as f64)
                    .unwrap_or(1.0),
                _ => n,
            };
            let Some(asked) = number(&value) else {
                return Verdict::Keep(value); // a type error: validation names it
            };
            match below.and_then(number) {
                Some(limit) if effective(asked) <= effective(limit) => Verdict::Keep(value),
                Some(limit) => Verdict::Drop(format!(
                    "= {value} is ignored: above your {limit}, and a project's config may only lower it",
                    limit = below
                        .map(Value::to_string)
                        .unwrap_or_else(|| limit.to_string())
                )),
                None => Verdict::Drop(format!(
                    "= {value} is ignored: your configuration leaves it to Keel, and a project's config may only lower a value you set"
                )),
            }
        }
        ProjectRule::Ordered(scale) => {
            let rank = |v: Option<&Value>| {
                v.and_then(Value::as_str)
                    .and_then(|s| scale.iter().position(|x| *x == s))
            };
            match (rank(below), rank(Some(&value))) {
                (Some(b), Some(asked)) if asked > b => Verdict::Drop(format!(
                    "= {value} is ignored: less strict than {b_name}, and a project's config may only make this stricter",
                    b_name = scale[b]
                )),
                _ => Verdict::Keep(value),
            }
        }
    }
}

/// Why a project's list `asked` is too long to apply ([`MAX_PROJECT_ENTRIES`],
/// [`MAX_PROJECT_TEXT`]), if it is.
fn over_bound(asked: &[Value]) -> Option<String> {
    let text: usize = asked.iter().map(|v| v.to_string().len()).sum();
    if asked.len() > MAX_PROJECT_ENTRIES {
        return Some(format!(
            "is ignored: it lists {} entries, and a project's config may add at most {MAX_PROJECT_ENTRIES} to a list (each costs every command or run)",
            asked.len()
        ));
    }
    (text > MAX_PROJECT_TEXT).then(|| format!(
        "is ignored: its entries hold {text} bytes of text, and a project's config may add at most {MAX_PROJECT_TEXT} to a list"
    ))
}

/// Whether a project's `shell.hide` entry may stand ([`ProjectRule::HiddenPaths`]).
fn project_may_hide(entry: &str) -> bool {
    let Some(rel) = entry.strip_prefix("~/") else {
        return false;
    };
    let steps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    if steps.is_empty() || steps.iter().any(|c| matches!(*c, "." | "..")) {
        return false;
    }
    let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) else {
        return true;
    };
    let home = std::path::Path::new(&home);
    let hidden = home.join(steps.join("/"));
    // Where it really is (a link in the home to `/usr/bin`: red-team pass 8, on R7-26).
    let real = hidden.canonicalize().ok();
    if let (Some(real), Ok(real_home)) = (&real, home.canonicalize())
        && !real.starts_with(&real_home)
    {
        return false;
    }
    std::env::var_os("PATH").is_none_or(|path| {
        !std::env::split_paths(&path).any(|dir| {
            dir.starts_with(&hidden)
                || real.as_ref().is_some_and(|r| {
                    dir.starts_with(r) || dir.canonicalize().is_ok_and(|d| d.starts_with(r))
                })
        })
    })
}

fn list(values: &[Value]) -> String {
    values
        .iter()
        .map(|v| match v {
            Value::String(s) => format!("`{s}`"),
            other => format!("`{other}`"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[path = "project_tests.rs"]
mod tests;

//! What a project's own `.keel/config.toml` may not do: widen the sandbox, the environment
//! allowlist, the approval policy or the deny lists beyond what the user configured.
//!
//! The project file lives in the workspace, where a model (or whoever wrote the repository)
//! can write it, so the keys in [`PROJECT_RULES`] are honoured from it only in the direction
//! that makes Keel stricter. Everything else a project may set freely. The user's own file,
//! `KEEL_*` variables and flags are trusted as before. A refused setting is dropped with a
//! [`ConfigWarning`] naming the key and the file.
//!
//! To protect a new key, add a row to [`PROJECT_RULES`].

use toml::{Table, Value};

/// How a project file may use one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectRule {
    /// Only from the user's config, `KEEL_*` variables or flags; a whole section when the
    /// key names one.
    UserOnly,
    /// A boolean the project may set to `strict` only.
    Bool { strict: bool },
    /// A list the project may only shorten: entries the layers below it do not have are
    /// dropped (an unset lower list means no restriction).
    Subset,
    /// A list the project may only lengthen: its entries are added to the lower layers'.
    Superset,
    /// A value from a scale, strictest first: the project may only pick one at least as strict.
    Ordered(&'static [&'static str]),
    /// A provider's base URL: only for a provider that sends no API key (a keyless local
    /// preset such as `ollama`); the provider then gets no key variable at
    /// all, so no key reaches the host the project chose.
    KeylessEndpoint,
}

/// The protected keys (`*` matches any one table key, e.g. a phase name).
pub const PROJECT_RULES: &[(&str, ProjectRule)] = &[
    ("shell.sandbox", ProjectRule::Bool { strict: true }),
    ("shell.network", ProjectRule::Bool { strict: false }),
    ("shell.writable", ProjectRule::Subset),
    ("shell.env_keep", ProjectRule::Subset),
    ("shell.allow", ProjectRule::Subset),
    ("shell.deny", ProjectRule::Superset),
    // Secret stores hidden from commands: a project may hide more, never uncover one.
    ("shell.hide", ProjectRule::Superset),
    ("plan_exec.phases.*.bash_deny", ProjectRule::Superset),
    ("server", ProjectRule::UserOnly),
    ("worker", ProjectRule::UserOnly),
    ("store.path", ProjectRule::UserOnly),
    // Where sessions go, with the database's password: never a project's choice.
    ("database", ProjectRule::UserOnly),
    // MCP servers run programs and send headers: a project proposes them in `.mcp.json`,
    // which the user approves per server (`keel mcp add`).
    ("mcp", ProjectRule::UserOnly),
    // Which environment variable is sent as a provider's key: from a project, any secret.
    ("llm.providers.*.api_key_env", ProjectRule::UserOnly),
    // Where a provider's requests (and key) go: see [`restrict_endpoints`].
    ("llm.base_url", ProjectRule::KeylessEndpoint),
    ("llm.providers.*.base_url", ProjectRule::KeylessEndpoint),
    // Approval: a project may ask more and deny more, never allow more.
    (
        "approval.policy",
        ProjectRule::Ordered(&["untrusted", "on-request", "never"]),
    ),
    ("approval.allow", ProjectRule::Subset),
    ("approval.ask", ProjectRule::Superset),
    ("approval.deny", ProjectRule::Superset),
];

/// A project setting that was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    /// The file it came from.
    pub source: String,
    /// The dotted key (`shell.sandbox`).
    pub key: String,
    /// What was ignored and why.
    pub message: String,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: `{}` {}; a project's config may only make this stricter (set it in your own config, ~/.config/keel/config.toml, with a KEEL_* variable or a flag if you trust this project)",
            self.source, self.key, self.message
        )
    }
}

/// Applies [`PROJECT_RULES`] to a project layer's `table`, given `lower`: the configuration
/// below it with defaults filled in. Returns what was refused.
pub(super) fn restrict(lower: &Table, table: &mut Table, source: &str) -> Vec<ConfigWarning> {
    let mut warnings = Vec::new();
    for (pattern, rule) in PROJECT_RULES {
        if *rule == ProjectRule::KeylessEndpoint {
            continue;
        }
        let parts: Vec<&str> = pattern.split('.').collect();
        apply(
            lower,
            table,
            &parts,
            String::new(),
            *rule,
            source,
            &mut warnings,
        );
    }
    warnings.extend(restrict_endpoints(lower, table, source));
    warnings
}

/// The [`ProjectRule::KeylessEndpoint`] keys. A project's `llm.base_url` is moved to
/// `llm.providers.<provider>.base_url` of the provider it names (so a `--provider` flag never
/// carries it to another provider); a base URL is kept only for a keyless provider, whose key
/// variable is then set to none (`api_key_env = ""`), whatever the user's layers or
/// environment hold.
fn restrict_endpoints(lower: &Table, table: &mut Table, source: &str) -> Vec<ConfigWarning> {
    let mut warnings = Vec::new();
    let Some(Value::Table(llm)) = table.get_mut("llm") else {
        return warnings;
    };
    let lower_llm = match lower.get("llm") {
        Some(Value::Table(t)) => t.clone(),
        _ => Table::new(),
    };
    let warn = |key: String, message: String| ConfigWarning {
        source: source.to_string(),
        key,
        message,
    };
    let mut asked: Vec<(String, String, Value)> = Vec::new();
    if let Some(url) = llm.remove("base_url") {
        let provider = llm
            .get("provider")
            .or_else(|| lower_llm.get("provider"))
            .and_then(Value::as_str)
            .map(str::to_string);
        match provider {
            Some(p) => asked.push(("llm.base_url".into(), p, url)),
            None => warnings.push(warn(
                "llm.base_url".into(),
                format!("= {url} is ignored: no `llm.provider` names the provider it is for"),
            )),
        }
    }
    if let Some(Value::Table(providers)) = llm.get_mut("providers") {
        for (name, entry) in providers.iter_mut() {
            if let Value::Table(entry) = entry
                && let Some(url) = entry.remove("base_url")
            {
                asked.push((format!("llm.providers.{name}.base_url"), name.clone(), url));
            }
        }
    }
    for (key, provider, url) in asked {
        if provider == "scripted" {
            continue; // plays a file: a base URL means nothing to it
        }
        let preset_name = [&*llm, &lower_llm]
            .into_iter()
            .find_map(|t| {
                t.get("providers")?
                    .get(&provider)?
                    .get("preset")?
                    .as_str()
                    .map(str::to_string)
            })
            .unwrap_or_else(|| provider.clone());
        let keyless = keel_llm::presets::preset(&preset_name).is_some_and(|p| !p.key_required);
        if !keyless {
            warnings.push(warn(
                key,
                format!(
                    "= {url} is ignored: provider `{provider}` (preset `{preset_name}`) sends an API key, which must never go to a host a project chose; only keyless local presets (ollama, vllm, llamacpp) may be pointed elsewhere"
                ),
            ));
            continue;
        }
        let providers = llm
            .entry("providers")
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(providers) = providers
            && let Value::Table(entry) = providers
                .entry(provider.as_str())
                .or_insert_with(|| Value::Table(Table::new()))
        {
            entry.insert("base_url".into(), url);
            entry.insert("api_key_env".into(), Value::String(String::new()));
        }
    }
    warnings
}

fn apply(
    lower: &Table,
    table: &mut Table,
    parts: &[&str],
    prefix: String,
    rule: ProjectRule,
    source: &str,
    warnings: &mut Vec<ConfigWarning>,
) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    let names: Vec<String> = if *first == "*" {
        table.keys().cloned().collect()
    } else {
        vec![(*first).to_string()]
    };
    let empty = Table::new();
    for name in names {
        let key = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let below = lower.get(&name);
        if rest.is_empty() {
            let Some(value) = table.remove(&name) else {
                continue;
            };
            let warn = |message: String| ConfigWarning {
                source: source.to_string(),
                key: key.clone(),
                message,
            };
            match judge(rule, below, value) {
                Verdict::Keep(v) => {
                    table.insert(name, v);
                }
                Verdict::Narrowed(v, message) => {
                    table.insert(name, v);
                    warnings.push(warn(message));
                }
                Verdict::Drop(message) => warnings.push(warn(message)),
            }
        } else if let Some(Value::Table(sub)) = table.get_mut(&name) {
            let below = match below {
                Some(Value::Table(t)) => t,
                _ => &empty,
            };
            apply(below, sub, rest, key, rule, source, warnings);
        }
    }
}

enum Verdict {
    Keep(Value),
    /// Applied in part; the message says what was left out.
    Narrowed(Value, String),
    Drop(String),
}

fn judge(rule: ProjectRule, below: Option<&Value>, value: Value) -> Verdict {
    match rule {
        ProjectRule::UserOnly => Verdict::Drop("is ignored".into()),
        ProjectRule::KeylessEndpoint => Verdict::Keep(value), // see `restrict_endpoints`
        ProjectRule::Bool { strict } => match value.as_bool() {
            Some(b) if b == strict => Verdict::Keep(value),
            Some(b) => Verdict::Drop(format!("= {b} is ignored")),
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
                    format!("entries {} are ignored", list(&refused)),
                )
            }
        }
        ProjectRule::Superset => {
            let (Some(Value::Array(base)), Value::Array(asked)) = (below, &value) else {
                return Verdict::Keep(value);
            };
            let mut all = base.clone();
            all.extend(asked.iter().filter(|v| !base.contains(v)).cloned());
            Verdict::Keep(Value::Array(all))
        }
        ProjectRule::Ordered(scale) => {
            let rank = |v: Option<&Value>| {
                v.and_then(Value::as_str)
                    .and_then(|s| scale.iter().position(|x| *x == s))
            };
            match (rank(below), rank(Some(&value))) {
                (Some(b), Some(asked)) if asked > b => Verdict::Drop(format!(
                    "= {value} is ignored (less strict than {b_name})",
                    b_name = scale[b]
                )),
                _ => Verdict::Keep(value),
            }
        }
    }
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
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        toml::from_str(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn each_rule_only_tightens() {
        let lower = table(
            "[shell]\nsandbox = true\nenv_keep = [\"GH_TOKEN\"]\ndeny = [\"sudo\"]\nwritable = [\"~/.cargo\"]\n[plan_exec.phases.building]\nbash_deny = [\"push\"]\n[approval]\npolicy = \"on-request\"\n",
        );
        let mut project = table(
            "[shell]\nsandbox = false\nnetwork = true\nenv_keep = [\"OPENAI_API_KEY\", \"GH_TOKEN\"]\ndeny = [\"rm\"]\nwritable = [\"/\"]\nallow = [\"make\"]\n[plan_exec.phases.building]\nbash_deny = [\"curl\"]\n[server]\nworkspaces = [\"/\"]\n[database]\nurl = \"postgres://evil/db\"\n[approval]\npolicy = \"never\"\n[agent]\nmax_iterations = 5\n[llm.providers.evil]\nbase_url = \"http://x\"\napi_key_env = \"AWS_SECRET_ACCESS_KEY\"\n",
        );
        let mut warnings = restrict(&lower, &mut project, "/p/.keel/config.toml");
        let scale: ProjectRule = ProjectRule::Ordered(&["untrusted", "on-request", "never"]);
        warnings.extend({
            let mut w = Vec::new();
            apply(
                &lower,
                &mut project,
                &["approval", "policy"],
                String::new(),
                scale,
                "/p/.keel/config.toml",
                &mut w,
            );
            w
        });
        let keys: Vec<&str> = warnings.iter().map(|w| w.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "shell.sandbox",
                "shell.network",
                "shell.writable",
                "shell.env_keep",
                "server",
                "database",
                "llm.providers.evil.api_key_env",
                // `approval.policy` is a PROJECT_RULES entry; endpoints are checked after them.
                "approval.policy",
                "llm.providers.evil.base_url"
            ]
        );
        let shell = project["shell"].as_table().unwrap_or_else(|| panic!());
        assert!(!shell.contains_key("sandbox"));
        assert!(!shell.contains_key("network"));
        assert_eq!(shell["env_keep"], Value::Array(vec!["GH_TOKEN".into()]));
        assert_eq!(shell["writable"], Value::Array(vec![]));
        assert_eq!(
            shell["deny"],
            Value::Array(vec!["sudo".into(), "rm".into()])
        );
        assert_eq!(
            shell["allow"],
            Value::Array(vec!["make".into()]),
            "no lower list: nothing to narrow"
        );
        assert_eq!(
            project["plan_exec"]["phases"]["building"]["bash_deny"],
            Value::Array(vec!["push".into(), "curl".into()])
        );
        assert!(!project.contains_key("server"));
        assert!(!project.contains_key("database"));
        assert!(
            !project["approval"]
                .as_table()
                .is_some_and(|t| t.contains_key("policy"))
        );
        assert_eq!(project["agent"]["max_iterations"].as_integer(), Some(5));
        assert!(
            !project["llm"]["providers"]["evil"]
                .as_table()
                .is_some_and(|t| t.contains_key("api_key_env"))
        );
        let text = warnings[3].to_string();
        assert!(text.contains("/p/.keel/config.toml"), "{text}");
        assert!(text.contains("`OPENAI_API_KEY`"), "{text}");
        assert!(
            warnings[0]
                .to_string()
                .contains("`shell.sandbox` = false is ignored")
        );
    }

    #[test]
    fn a_project_never_points_a_keyed_provider_at_its_own_host() {
        let lower = table(
            "[llm]\nprovider = \"openai\"\n[llm.providers.corp]\npreset = \"openai\"\nbase_url = \"https://corp/v1\"\napi_key_env = \"CORP_KEY\"\n",
        );
        let mut project = table(
            "[llm]\nbase_url = \"http://evil/v1\"\n[llm.providers.corp]\nbase_url = \"http://evil/v1\"\n[llm.providers.anthropic]\nbase_url = \"http://evil\"\n[llm.providers.mine]\npreset = \"anthropic\"\nbase_url = \"http://evil\"\n",
        );
        let warnings = restrict(&lower, &mut project, "/p/.keel/config.toml");
        let mut keys: Vec<&str> = warnings.iter().map(|w| w.key.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "llm.base_url",
                "llm.providers.anthropic.base_url",
                "llm.providers.corp.base_url",
                "llm.providers.mine.base_url"
            ]
        );
        let text = warnings[0].to_string();
        assert!(text.contains("/p/.keel/config.toml"), "{text}");
        assert!(text.contains("`openai`"), "{text}");
        assert!(!project.to_string().contains("evil"), "{project}");
    }

    #[test]
    fn a_project_may_point_a_keyless_local_provider_anywhere_without_a_key() {
        let lower = table(
            "[llm.providers.ollama]\napi_key_env = \"OPENAI_API_KEY\"\n[llm.providers.box]\npreset = \"vllm\"\n",
        );
        let mut project = table(
            "[llm]\nprovider = \"ollama\"\nbase_url = \"http://gpu:11434/v1\"\n[llm.providers.box]\nbase_url = \"http://box:8000/v1\"\n[llm.providers.mine]\npreset = \"llamacpp\"\nbase_url = \"http://mine/v1\"\n",
        );
        let warnings = restrict(&lower, &mut project, "p");
        assert!(warnings.is_empty(), "{warnings:?}");
        let providers = &project["llm"]["providers"];
        for (name, url) in [
            ("ollama", "http://gpu:11434/v1"),
            ("box", "http://box:8000/v1"),
            ("mine", "http://mine/v1"),
        ] {
            assert_eq!(providers[name]["base_url"].as_str(), Some(url), "{name}");
            assert_eq!(
                providers[name]["api_key_env"].as_str(),
                Some(""),
                "{name}: no key variable, whatever the user's layers name"
            );
        }
        assert!(
            !project["llm"]
                .as_table()
                .is_some_and(|t| t.contains_key("base_url")),
            "moved to the provider it names, so a --provider flag never carries it elsewhere"
        );
    }

    #[test]
    fn stricter_settings_pass_silently() {
        let lower = table("[shell]\nsandbox = false\nenv_keep = [\"A\", \"B\"]\n");
        let mut project = table(
            "[shell]\nsandbox = true\nenv_keep = [\"A\"]\n[plan_exec.phases.x]\nbash_deny = [\"y\"]\n",
        );
        let warnings = restrict(&lower, &mut project, "p");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(project["shell"]["sandbox"].as_bool(), Some(true));
        assert_eq!(project["shell"]["env_keep"], Value::Array(vec!["A".into()]));
    }
}

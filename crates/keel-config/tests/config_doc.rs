//! docs/CONFIG.md lists exactly the configuration keys the code accepts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use keel_config::Config;

/// Dotted key paths of every leaf in `value`; `None`s are absent from serialised TOML, so the
/// optional keys are gathered from a config with every option set.
fn leaf_keys(prefix: &str, value: &toml::Value, out: &mut BTreeSet<String>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                // Maps keyed by user-chosen names (e.g. named providers) document their
                // entries' fields as `section.map.<name>.field`; their defaults are empty.
                leaf_keys(&key, v, out);
            }
        }
        _ => {
            out.insert(prefix.to_string());
        }
    }
}

fn documented_keys(doc: &str) -> BTreeSet<String> {
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|k| k.contains('.'))
        .map(str::to_string)
        .collect()
}

#[test]
fn config_doc_matches_the_code() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/CONFIG.md"))
        .expect("docs/CONFIG.md exists");
    let documented = documented_keys(&doc);

    let mut full = Config::default();
    full.llm.provider = Some("x".into());
    full.llm.model = Some("x".into());
    full.llm.base_url = Some("http://x".into());
    full.llm.script = Some("x".into());
    full.llm.auxiliary_model = Some("x".into());
    full.llm.child_model = Some("x".into());
    full.llm.max_output_tokens = Some(1);
    full.llm.thinking_budget = Some(1024);
    // Maps keyed by user-chosen names: one entry named `<name>` with every field set, so the
    // keys come out as documented (`llm.providers.<name>.base_url`).
    full.llm.providers.insert(
        "<name>".into(),
        keel_config::ProviderEntry {
            preset: Some("x".into()),
            base_url: Some("http://x".into()),
            api_key_env: Some("X".into()),
            reasoning_content: Some(true),
            stream_usage: Some(true),
            tool_results_as_user: Some(true),
        },
    );
    full.llm.models.insert(
        "<name>".into(),
        keel_config::ModelEntry {
            provider: Some("x".into()),
            model: "x".into(),
            context_window: Some(1),
            max_output_tokens: Some(1),
            thinking_budget: Some(1024),
            tool_results_as_user: Some(true),
        },
    );
    full.llm.prices.insert(
        "<model>".into(),
        keel_llm::models::Price {
            input: 1.0,
            output: 1.0,
            cache_read: Some(1.0),
            cache_write: Some(1.0),
        },
    );
    full.store.path = Some("x".into());
    full.database.url = Some("postgres://x/y".into());
    full.worker.health_port = Some(7801);
    full.worker.checkout_dir = Some("x".into());
    full.agent.context_window = Some(100_000);
    full.verify.commands = Some(vec!["x".into()]);
    full.shell.test_command = Some("x".into());
    full.plan_exec.auto_advance_after_steps = Some(3);
    full.shell.max_memory_mb = Some(1024);
    for phase in [
        &mut full.plan_exec.phases.planning,
        &mut full.plan_exec.phases.building,
        &mut full.plan_exec.phases.verification,
        &mut full.plan_exec.phases.delivery,
    ] {
        phase.whitelist = Some(vec!["*".into()]);
        phase.project_whitelist = Some(vec!["read_file".into()]);
        phase.validation_command = Some("x".into());
        phase.rollback_command = Some("x".into());
    }
    full.server.token = Some("x".into());
    full.agents.roles.insert(
        "<name>".into(),
        keel_config::AgentRoleConfig {
            tools: vec!["read_file".into()],
            prompt: "x".into(),
            model: Some("x".into()),
            read_only: true,
        },
    );
    full.mcp.servers.insert(
        "<name>".into(),
        keel_mcp::ServerConfig {
            kind: Some("stdio".into()),
            command: Some("x".into()),
            args: vec!["x".into()],
            env: [("<VAR>".to_string(), "x".to_string())].into(),
            url: Some("http://x".into()),
            headers: [("<Header>".to_string(), "x".to_string())].into(),
            active: true,
            effect: keel_mcp::EffectConfig::ReadOnly,
            disabled: true,
        },
    );
    let value = toml::Value::try_from(&full).expect("config serialises");
    let mut in_code = BTreeSet::new();
    leaf_keys("", &value, &mut in_code);

    let undocumented: Vec<_> = in_code.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&in_code).collect();
    assert!(
        undocumented.is_empty(),
        "keys missing from docs/CONFIG.md: {undocumented:?}"
    );
    assert!(
        stale.is_empty(),
        "docs/CONFIG.md lists keys the code lacks: {stale:?}"
    );

    // Every documented default is accepted by the config loader.
    let parsed: Config = toml::from_str(&toml::to_string(&full).expect("to toml")).expect("parses");
    assert_eq!(parsed, full);
}

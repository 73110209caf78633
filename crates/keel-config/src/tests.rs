//! Tests of `lib.rs`.

use super::*;

fn layer(src: &str, text: &str) -> Layer {
    Layer {
        source: src.into(),
        table: toml::from_str(text).unwrap_or_else(|e| panic!("{e}")),
        scope: LayerScope::User,
    }
}

#[test]
fn layers_override_in_order() {
    let c = Config::from_layers(vec![
        layer(
            "user",
            "[agent]\nmax_iterations = 10\nmax_output_chars = 900\n",
        ),
        layer("project", "[agent]\nmax_iterations = 20\n"),
        Layer::from_env([("KEEL_AGENT__MAX_ITERATIONS".into(), "25".into())]),
        Layer::from_overrides(&[("llm.provider", Value::String("scripted".into()))]),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.agent.max_iterations, 25);
    assert_eq!(c.agent.max_output_chars, 900);
    assert_eq!(c.llm.provider.as_deref(), Some("scripted"));
    assert_eq!(c.llm.max_retries, 4, "defaults fill the rest");
}

#[test]
fn unknown_keys_are_named_with_their_source() {
    let e = Config::from_layers(vec![layer(
        "/p/.keel/config.toml",
        "[agent]\nmax_iter = 3\n",
    )])
    .err()
    .unwrap_or_else(|| panic!("expected an error"));
    assert_eq!(e.source_name, "/p/.keel/config.toml");
    assert!(e.message.contains("max_iter"), "{e}");
    let e = Config::from_layers(vec![Layer::from_env([(
        "KEEL_AGNT__MAX_ITERATIONS".into(),
        "3".into(),
    )])])
    .err()
    .unwrap_or_else(|| panic!("expected an error"));
    assert!(e.to_string().contains("agnt"), "{e}");
    assert!(e.to_string().contains("environment"), "{e}");
}

#[test]
fn bad_values_are_explained() {
    let e = Config::from_layers(vec![layer("f", "[agent]\nmax_iterations = \"many\"\n")])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("max_iterations") || e.contains("invalid type"),
        "{e}"
    );
    let e = Config::from_layers(vec![layer("f", "[agent]\nmax_iterations = 0\n")])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("at least 1"), "{e}");
    let e = Config::from_layers(vec![layer("f", "[agent]\nmode = \"yolo\"\n")])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("accepted: react"), "{e}");
}

#[test]
fn guardrail_sections_parse_and_validate() {
    let c = Config::from_layers(vec![
        layer(
            "p",
            "[agent]\ncompact_threshold = 0.7\nself_correction_cap = 1\n\n[fallback_chain.recovery]\nenabled = false\n\n[verify]\ncommands = [\"cargo test\"]\n",
        ),
        Layer::from_env([(
            "KEEL_FALLBACK_CHAIN__EMERGENCY__ENABLED".into(),
            "false".into(),
        )]),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.agent.compact_threshold, 0.7);
    assert_eq!(c.agent.self_correction_cap, 1);
    assert!(!c.fallback_chain.recovery.enabled);
    assert_eq!(c.fallback_chain.recovery.max_retries, 1, "default kept");
    assert!(!c.fallback_chain.emergency.enabled);
    assert!(c.fallback_chain.enabled);
    assert_eq!(c.verify.commands, Some(vec!["cargo test".to_string()]));
    let limits = c.shell.tool_settings().limits;
    assert_eq!(limits.processes, keel_tools::sandbox::DEFAULT_MAX_PROCESSES);
    assert_eq!(limits.memory_mb, keel_tools::sandbox::default_memory_mb());
    let c = Config::from_layers(vec![layer(
        "u",
        "[shell]\nmax_processes = 0\nmax_memory_mb = 0\n",
    )])
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.shell.tool_settings().limits,
        keel_tools::sandbox::Limits::NONE
    );

    for (text, needle) in [
        ("[agent]\ncompact_threshold = 1.5\n", "compact_threshold"),
        (
            "[fallback_chain.recovery]\nmax_retries = 50\n",
            "max_retries",
        ),
        ("[verify]\ncommands = [\" \"]\n", "empty command"),
        ("[fallback_chain]\nrecovery = 1\n", "recovery"),
        ("[shell]\nmax_processes = 10\n", "at least 300"),
    ] {
        let e = Config::from_layers(vec![layer("f", text)])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn plan_exec_settings_parse_and_bad_values_name_themselves() {
    let c = Config::from_layers(vec![
        layer(
            "project",
            "[agent]\nmode = \"plan_exec\"\n\n[plan_exec]\nauto_advance_after_steps = 4\n\n[plan_exec.phases.planning]\nwhitelist = [\"read_file\", \"list_files\"]\n\n[plan_exec.phases.building]\nvalidation_command = \"cargo check\"\nrollback_command = \"git checkout -- src\"\nbash_deny = ['git\\s+push']\n",
        ),
        Layer::from_env([(
            "KEEL_PLAN_EXEC__PHASES__DELIVERY__WHITELIST".into(),
            "[\"*\"]".into(),
        )]),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.execution_mode(), keel_phase::ExecutionMode::PlanExec);
    assert_eq!(c.plan_exec.auto_advance_after_steps, Some(4));
    assert_eq!(
        c.plan_exec.phases.building.rollback_command.as_deref(),
        Some("git checkout -- src")
    );
    assert_eq!(
        c.plan_exec.phases.delivery.whitelist,
        Some(vec!["*".to_string()])
    );

    for (text, needles) in [
        (
            "[plan_exec.phases.plannig]\nwhitelist = [\"read_file\"]\n",
            &["plannig", "planning"][..],
        ),
        (
            "[plan_exec.phases.building]\nwhitelist = []\n",
            &["plan_exec.phases.building.whitelist is empty"][..],
        ),
        (
            "[plan_exec]\nstart_phase = \"build\"\n",
            &["\"build\" is not a phase"][..],
        ),
        (
            "[plan_exec.phases.verification]\nbash_deny = [\"[a-\"]\n",
            &["plan_exec.phases.verification.bash_deny", "[a-"][..],
        ),
        (
            "[agent]\nmode = \"solo\"\n",
            &["\"solo\" is not a mode", "plan_exec"][..],
        ),
        (
            "[agent]\nmode = \"plan_exec\"\n[plan_exec]\nenabled = false\n",
            &["plan_exec.enabled = false"][..],
        ),
    ] {
        let e = Config::from_layers(vec![layer("f", text)])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        for n in needles {
            assert!(e.contains(n), "{text}: {e}");
        }
    }
}

#[test]
fn a_project_file_cannot_unsandbox_or_leak_keys_but_the_user_can() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".keel")).unwrap_or_else(|e| panic!("{e}"));
    let project = ws.join(".keel/config.toml");
    std::fs::write(
        &project,
        "[shell]\nsandbox = false\nenv_keep = [\"OPENAI_API_KEY\"]\ndeny = [\"curl\"]\n[server]\ntoken = \"attacker-known-token-123\"\n[agent]\nmax_iterations = 7\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let none: Vec<(String, String)> = Vec::new();
    let c = Config::load(None, &ws, none.clone(), Layer::from_overrides(&[]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        c.shell.sandbox,
        "the project file cannot turn the sandbox off"
    );
    assert!(c.shell.env_keep.is_empty(), "{:?}", c.shell.env_keep);
    assert_eq!(c.server.token, None);
    assert!(c.shell.deny.contains(&"sudo".to_string()), "defaults kept");
    assert!(
        c.shell.deny.contains(&"curl".to_string()),
        "additions honoured"
    );
    assert_eq!(c.agent.max_iterations, 7, "other keys apply");
    let said: Vec<String> = c.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 3, "{said:?}");
    for (w, key) in said
        .iter()
        .zip(["server", "shell.env_keep", "shell.sandbox"])
    {
        assert!(w.contains(&format!("`{key}`")), "{w}");
        assert!(w.contains(&project.display().to_string()), "{w}");
    }

    // The same settings from the user's own file, or the environment, apply.
    let user = dir.path().join("user.toml");
    std::fs::write(
        &user,
        "[shell]\nenv_keep = [\"OPENAI_API_KEY\", \"GH_TOKEN\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let env = vec![("KEEL_SHELL__SANDBOX".to_string(), "false".to_string())];
    let c = Config::load(Some(&user), &ws, env, Layer::from_overrides(&[]))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!c.shell.sandbox);
    assert_eq!(
        c.shell.env_keep,
        ["OPENAI_API_KEY"],
        "a project may narrow the user's list"
    );
}

#[test]
fn a_project_file_can_hide_more_secret_stores_but_never_uncover_one() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".keel")).unwrap_or_else(|e| panic!("{e}"));
    let project = ws.join(".keel/config.toml");
    std::fs::write(&project, "[shell]\nhide = [\"~/.project-secret\"]\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let none: Vec<(String, String)> = Vec::new();
    let load = |user: Option<&std::path::Path>| {
        Config::load(user, &ws, none.clone(), Layer::from_overrides(&[]))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let c = load(None);
    for kept in ["~/.ssh", "~/.aws", "~/.netrc", "~/.project-secret"] {
        assert!(
            c.shell.hide.contains(&kept.to_string()),
            "{:?}",
            c.shell.hide
        );
    }
    // An empty project list uncovers nothing.
    std::fs::write(&project, "[shell]\nhide = []\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        load(None).shell.hide.len(),
        keel_tools::sandbox::SECRET_STORES.len()
    );
    // The user's own file decides the list (here: only one store).
    let user = dir.path().join("user.toml");
    std::fs::write(&user, "[shell]\nhide = [\"~/.ssh\"]\n").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(load(Some(&user)).shell.hide, ["~/.ssh"]);
    // A relative entry is an error naming the key.
    std::fs::write(&user, "[shell]\nhide = [\".ssh\"]\n").unwrap_or_else(|e| panic!("{e}"));
    let err = Config::load(Some(&user), &ws, none.clone(), Layer::from_overrides(&[]))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("shell.hide") && err.contains("~/"), "{err}");
}

#[test]
fn env_values_parse_as_scalars() {
    let l = Layer::from_env([
        ("KEEL_AGENT__MAX_ITERATIONS".into(), "7".into()),
        ("KEEL_LLM__MODEL".into(), "gpt-5".into()),
        ("KEEL_HOME".into(), "/x".into()),
        ("PATH".into(), "/bin".into()),
    ]);
    assert_eq!(l.table["agent"]["max_iterations"].as_integer(), Some(7));
    assert_eq!(l.table["llm"]["model"].as_str(), Some("gpt-5"));
    assert!(!l.table.contains_key("home"));
}

#[test]
fn paths_follow_xdg_and_keel_overrides() {
    let env = |k: &str| match k {
        "HOME" => Some("/home/u".to_string()),
        _ => None,
    };
    assert_eq!(
        user_config_path(&env),
        Some(PathBuf::from("/home/u/.config/keel/config.toml"))
    );
    assert_eq!(data_dir(&env), PathBuf::from("/home/u/.local/share/keel"));
    let env2 = |k: &str| match k {
        "KEEL_HOME" => Some("/data".to_string()),
        "KEEL_CONFIG" => Some("/c.toml".to_string()),
        _ => None,
    };
    assert_eq!(data_dir(&env2), PathBuf::from("/data"));
    assert_eq!(user_config_path(&env2), Some(PathBuf::from("/c.toml")));
}

#[test]
fn index_section_is_checked() {
    let c = Config::from_layers(vec![layer(
        "f",
        "[index]\nignore = [\"fixtures/\"]\nmax_file_kb = 64\ncodemap_tokens = 0\n",
    )])
    .unwrap_or_else(|e| panic!("{e}"));
    let s = c.index.settings();
    assert_eq!(
        (s.ignore.as_slice(), s.max_file_bytes),
        (&["fixtures/".to_string()][..], 65_536)
    );
    for (text, want) in [
        ("[index]\ncodemap_tokens = 9000\n", "index.codemap_tokens"),
        ("[index]\nmax_file_kb = 0\n", "index.max_file_kb"),
        ("[index]\nignore = [\"src/{a,b\"]\n", "index.ignore"),
    ] {
        let e = Config::from_layers(vec![layer("f", text)])
            .err()
            .unwrap_or_else(|| panic!("{text} must be refused"));
        assert!(e.to_string().contains(want), "{e}");
    }
}

#[test]
fn with_no_home_in_the_environment_the_data_dir_is_never_the_current_directory() {
    // Red-team pass 8, R8-23: `./.keel` held the server token the model then read.
    let dir = crate::data_dir(&|_| None);
    assert!(dir.is_absolute(), "{}", dir.display());
    let cwd = std::env::current_dir().unwrap_or_default();
    assert!(
        !dir.starts_with(&cwd) || cwd == std::path::Path::new("/"),
        "{}",
        dir.display()
    );
    if let Some(home) = keel_tools::stores::passwd_home() {
        assert_eq!(dir, home.join(".local/share/keel"));
    }
    assert_eq!(
        crate::data_dir(&|k| (k == "HOME").then(|| "/h".to_string())),
        std::path::PathBuf::from("/h/.local/share/keel")
    );
}

#[test]
fn the_temporary_data_dir_is_private_or_fresh() {
    // Red-team pass 8, R8-25: a planted `/tmp/keel-<uid>` link to another user's directory.
    use std::os::unix::fs::MetadataExt;
    let dir = crate::private_temp_dir();
    let m = std::fs::symlink_metadata(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    assert!(m.is_dir() && m.mode() & 0o077 == 0, "{}", dir.display());
}

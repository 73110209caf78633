//! The lifecycle table: what each state means for the first-turn catalog, for `tool_search`
//! and for dispatch, and what the resolver does with removed, deprecated and unknown names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use keel_tools::catalog::TOOL_SEARCH;
use keel_tools::{
    ToolContext, ToolEffect, ToolError, ToolOutput, ToolRegistry, ToolState, TypedTool, Workspace,
    builtin, resolve_call,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// Text to echo back.
    text: String,
}

/// A tool whose name and description are set per test.
struct Echo(&'static str);

impl TypedTool for Echo {
    type Args = EchoArgs;
    const NAME: &'static str = "echo";
    fn description(&self) -> &str {
        "Echo the given text back (a lifecycle test tool)."
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn run(&self, args: EchoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(format!("{}: {}", self.0, args.text)))
    }
}

/// `Echo` under another name.
struct Named(&'static str, Echo);

impl keel_tools::Tool for Named {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        TypedTool::description(&self.1)
    }
    fn input_schema(&self) -> Value {
        keel_tools::schema_for::<EchoArgs>()
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    fn execute<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
    ) -> futures::future::BoxFuture<'a, Result<ToolOutput, ToolError>> {
        keel_tools::Tool::execute(&self.1, args, ctx)
    }
}

fn registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    builtin::register_defaults(&mut r);
    r.register_with_state(
        Arc::new(Named("echo_active", Echo("active"))),
        ToolState::Active,
    )
    .register(Named("echo_deferred", Echo("deferred")))
    .register_with_state(
        Arc::new(Named("echo_hidden", Echo("hidden"))),
        ToolState::Hidden,
    )
    .register_with_state(
        Arc::new(Named("echo_old", Echo("deprecated"))),
        ToolState::Deprecated {
            replacement: "echo_active".into(),
        },
    );
    r.register(Named("echo_gone", Echo("removed")));
    assert!(r.set_state(
        "echo_gone",
        ToolState::Removed {
            replacement: Some("echo_active".into())
        }
    ));
    r
}

fn ctx() -> (tempfile::TempDir, ToolContext) {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(Workspace::new(dir.path()).unwrap());
    (dir, ctx)
}

async fn search(r: &ToolRegistry, query: &str) -> String {
    let (_d, ctx) = ctx();
    r.execute(TOOL_SEARCH, json!({"query": query}), &ctx)
        .await
        .unwrap()
        .content
}

#[tokio::test]
async fn each_state_in_the_catalog_in_search_and_in_dispatch() {
    let r = registry();
    let listed: Vec<String> = r.specs().into_iter().map(|s| s.name).collect();
    assert!(listed.contains(&"echo_active".to_string()));
    for unlisted in [
        "echo_deferred",
        "echo_hidden",
        "echo_old",
        "echo_gone",
        "insert_lines",
    ] {
        assert!(
            !listed.contains(&unlisted.to_string()),
            "{unlisted} is listed"
        );
    }
    // tool_search's description names the deferred tools (and only them).
    let ts = r
        .specs()
        .into_iter()
        .find(|s| s.name == TOOL_SEARCH)
        .unwrap();
    assert!(
        ts.description.contains("echo_deferred"),
        "{}",
        ts.description
    );
    assert!(!ts.description.contains("echo_hidden") && !ts.description.contains("echo_old"));

    let found = search(&r, "echo text back").await;
    assert!(found.contains("## echo_deferred (deferred)"), "{found}");
    assert!(found.contains("## echo_active (active)"), "{found}");
    assert!(found.contains("\"text\""), "schemas are returned: {found}");
    for never in ["echo_hidden", "echo_old", "echo_gone"] {
        assert!(!found.contains(never), "{never} found: {found}");
    }
    let regex = search(&r, "^echo_(d|h)").await;
    assert!(
        regex.contains("echo_deferred") && !regex.contains("echo_hidden"),
        "{regex}"
    );
    let select = search(&r, "select:git_diff,update_plan").await;
    assert!(
        select.contains("## git_diff") && select.contains("## update_plan"),
        "{select}"
    );

    let (_d, ctx) = ctx();
    for (name, says) in [
        ("echo_active", "active"),
        ("echo_deferred", "deferred"),
        ("echo_hidden", "hidden"),
        ("echo_old", "deprecated"),
    ] {
        let out = r.execute(name, json!({"text": "hi"}), &ctx).await.unwrap();
        assert_eq!(out.content, format!("{says}: hi"));
        let meta = out.metadata.unwrap_or(Value::Null);
        if name == "echo_old" {
            assert_eq!(meta["deprecated"]["replacement"], "echo_active");
        } else {
            assert!(meta.get("deprecated").is_none());
        }
    }
    let gone = r.execute("echo_gone", json!({"text": "hi"}), &ctx).await;
    let Err(ToolError::Model(msg)) = gone else {
        panic!("a removed tool ran: {gone:?}")
    };
    assert!(msg.contains("was removed; use `echo_active`"), "{msg}");
    let msg = resolve_call(&r, "echo_gone", &json!({"text": "hi"}), false, None).unwrap_err();
    assert!(
        msg.contains("Use `echo_active` instead") && msg.contains("Schema of echo_active"),
        "{msg}"
    );
    // Old transcripts replay: hidden and deprecated names resolve to themselves.
    for name in ["echo_hidden", "echo_old", "echo_deferred"] {
        let r = resolve_call(&r, name, &json!({"text": "x"}), false, None).unwrap();
        assert_eq!(r.tool, name);
        assert!(r.repairs.is_empty());
    }
}

#[tokio::test]
async fn the_default_catalog_is_ten_tools_with_the_rest_deferred() {
    let mut r = ToolRegistry::new();
    builtin::register_defaults(&mut r);
    keel_tools::shell::register(&mut r, Default::default(), Default::default());
    let listed = r.listed_names();
    assert_eq!(
        listed,
        [
            "apply_patch",
            "codebase_search",
            "create_file",
            "edit_file",
            "grep",
            "list_files",
            "read_file",
            "run_command",
            "run_tests",
            "tool_search"
        ]
    );
    assert_eq!(
        r.deferred_names(),
        ["ask_user", "git_diff", "git_status", "update_plan"]
    );
    assert_eq!(r.state("insert_lines"), Some(&ToolState::Hidden));
    // The catalog's bytes are the same however it was built.
    let again = {
        let mut r = ToolRegistry::new();
        keel_tools::shell::register(&mut r, Default::default(), Default::default());
        builtin::register_defaults(&mut r);
        r
    };
    assert_eq!(
        serde_json::to_string(&r.specs()).unwrap(),
        serde_json::to_string(&again.specs()).unwrap()
    );
    let found = search(&r, "git").await;
    assert!(
        found.contains("git_status") && found.contains("git_diff"),
        "{found}"
    );
    let none = search(&r, "kubernetes").await;
    assert!(none.starts_with("No tool matches"), "{none}");
}

#[test]
fn repairs_are_described_and_clean_calls_are_untouched() {
    let r = registry();
    let clean = resolve_call(&r, "echo_active", &json!({"text": "a"}), false, None).unwrap();
    assert!(clean.repairs.is_empty() && clean.note().is_none());
    let fixed = resolve_call(&r, "echo_active", &json!("{'text': 'a',}"), false, None).unwrap();
    assert_eq!(fixed.args, json!({"text": "a"}));
    assert_eq!(fixed.repairs.len(), 1);
    assert!(
        fixed.repairs[0].how.contains("single quotes"),
        "{:?}",
        fixed.repairs
    );
    assert_eq!(fixed.repairs[0].from, "{'text': 'a',}");
    assert!(
        fixed
            .note()
            .unwrap()
            .starts_with("[keel: arguments repaired")
    );
    let unknown = resolve_call(&r, "ech_active", &json!({"text": "a"}), false, None).unwrap_err();
    assert!(
        unknown.contains("nearest tool is `echo_active`"),
        "{unknown}"
    );
    assert!(unknown.contains("Schema of echo_active"), "{unknown}");
}

/// A model copying a chat template's HTML-escaped rendering (llama-cpp-python) writes `&#34;`
/// for quotes: decoded, and said, before the tool sees them — unless they may be meant.
#[test]
fn html_escaped_quotes_in_arguments_are_decoded_and_said() {
    let r = registry();
    let whole = resolve_call(
        &r,
        "echo_active",
        &json!("{&#34;text&#34;: &#34;a&#34;}"),
        false,
        None,
    )
    .unwrap();
    assert_eq!(whole.args, json!({"text": "a"}));
    assert!(
        whole.repairs.iter().any(|f| f.how.contains("HTML-escaped")),
        "{:?}",
        whole.repairs
    );
    let inner = resolve_call(
        &r,
        "echo_active",
        &json!({"text": "println!(&#34;hi&#34;);"}),
        false,
        None,
    )
    .unwrap();
    assert_eq!(inner.args, json!({"text": "println!(\"hi\");"}));
    assert!(inner.note().is_some_and(|n| n.contains("HTML-escaped")));
    let markup = resolve_call(
        &r,
        "echo_active",
        &json!({"text": "<p>&quot;q&quot;</p>"}),
        false,
        None,
    )
    .unwrap();
    assert_eq!(markup.args, json!({"text": "<p>&quot;q&quot;</p>"}));
    assert!(markup.repairs.is_empty());
}

#[test]
fn the_documented_tables_list_every_alias_and_intent() {
    let doc = include_str!("../../../docs/TOOL_CATALOG.md");
    for a in keel_tools::catalog::ALIASES {
        assert!(
            doc.contains(&format!("| `{}` | {} | {} |", a.name, a.family, a.target)),
            "docs/TOOL_CATALOG.md lacks the alias row for `{}`",
            a.name
        );
    }
    for i in keel_tools::catalog::INTENTS {
        assert!(
            doc.contains(&format!("| `{}` | {} |", i.verb, i.rule)),
            "docs/TOOL_CATALOG.md lacks the intent row for `{}`",
            i.verb
        );
    }
}

#[tokio::test]
async fn a_missing_program_is_named_with_what_to_install() {
    let mut r = ToolRegistry::new();
    keel_tools::shell::register(&mut r, Default::default(), Default::default());
    let (_d, ctx) = ctx();
    let out = r
        .execute(
            "run_command",
            json!({"command": "keel-no-such-program-xyz --version"}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(out.content.starts_with("exit code: 127"), "{}", out.content);
    assert!(
        out.content
            .contains("`keel-no-such-program-xyz` is not installed here")
            && out.content.contains("install `keel-no-such-program-xyz`"),
        "{}",
        out.content
    );
}

#[test]
fn absolute_paths_inside_the_workspace_become_relative_and_others_stay() {
    let r = registry();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let inside = format!("{}/src/a.rs", root.display());
    let got = resolve_call(&r, "Read", &json!({"file_path": inside}), false, Some(root)).unwrap();
    assert_eq!(got.args, json!({"path": "src/a.rs"}));
    assert!(
        got.repairs.iter().any(|x| x.how.contains("absolute path")),
        "{:?}",
        got.repairs
    );
    let whole = format!("{}", root.display());
    let got = resolve_call(&r, "LS", &json!({"path": whole}), false, Some(root)).unwrap();
    assert_eq!(got.args, json!({"path": "."}));
    // Outside, or escaping with `..`: left as sent, for the tool's confinement to refuse.
    for path in [
        "/etc/passwd".to_string(),
        format!("{}/../x", root.display()),
    ] {
        let got = resolve_call(&r, "read_file", &json!({"path": path}), false, Some(root)).unwrap();
        assert_eq!(got.args["path"], path.as_str());
    }
}

/// `replace_all` in every spelling reaches edit_file (it used to be dropped, and the edit then
/// refused as ambiguous); an empty `old_string` creates the file, as in Claude Code and opencode.
#[test]
fn replace_all_is_carried_in_every_spelling() {
    let r = registry();
    let want = json!({"path": "a.go", "edits": [
        {"search": "fmt.Println", "replace": "log.Println", "replace_all": true}
    ]});
    for (name, args) in [
        (
            "Edit",
            json!({"file_path": "a.go", "old_string": "fmt.Println", "new_string": "log.Println", "replace_all": true}),
        ),
        (
            "edit",
            json!({"filePath": "a.go", "oldString": "fmt.Println", "newString": "log.Println", "replaceAll": true}),
        ),
        (
            "edit_file",
            json!({"path": "a.go", "edits": [{"search": "fmt.Println", "replace": "log.Println", "replaceAll": true}]}),
        ),
        (
            "edit_file",
            json!({"path": "a.go", "replace_all": true, "edits": [{"search": "fmt.Println", "replace": "log.Println"}]}),
        ),
        (
            "MultiEdit",
            json!({"file_path": "a.go", "edits": [{"old_string": "fmt.Println", "new_string": "log.Println", "replace_all": true}]}),
        ),
    ] {
        let got = resolve_call(&r, name, &args, false, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (got.tool.as_str(), &got.args),
            ("edit_file", &want),
            "{name}"
        );
        assert!(
            got.repairs.iter().all(|x| !x.how.contains("dropped")),
            "{name}: {:?}",
            got.repairs
        );
    }
    let got = resolve_call(
        &r,
        "edit",
        &json!({"filePath": "new.txt", "oldString": "", "newString": "hello\n"}),
        false,
        None,
    )
    .unwrap();
    assert_eq!(
        (got.tool.as_str(), &got.args),
        (
            "create_file",
            &json!({"path": "new.txt", "content": "hello\n"})
        )
    );
}

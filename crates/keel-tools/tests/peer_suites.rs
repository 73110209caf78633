//! The peers' own edit and patch test suites, run through Keel's tools.
//!
//! `tests/peers/` holds, as data with their licences and commit ids (see its README): Codex's
//! apply-patch scenario fixtures (copied verbatim) and the inline tests of its `lib.rs`,
//! Aider's `tests/basic/test_editblock.py`, opencode's `edit.test.ts` and Cline's
//! `diff.test.ts` (converted to data:
//! the files before, the call the peer's test makes, the files it expects after), and the
//! probes of issue 30. Each call goes through the catalog exactly as a model's would
//! (`resolve_call`: foreign names and spellings), then the tool runs in a temp workspace whose
//! files the session has read.
//!
//! A case passes when the workspace ends as the peer expects (and fails when the peer expects
//! a failure). A case Keel deliberately handles differently names the difference (each is
//! explained in docs/TOOL_CATALOG.md) and Keel's own expected outcome, which is checked
//! instead. A case marked as an open gap must keep failing (it is counted apart until it is
//! fixed or documented). Any other outcome fails this test. The tally is printed:
//! `cargo test -p keel-tools --test peer_suites`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use keel_tools::catalog::resolve_call;
use keel_tools::{ToolContext, ToolOutput, ToolRegistry, Workspace, builtin};
use serde::Deserialize;
use serde_json::{Value, json};

type Tree = BTreeMap<String, Vec<u8>>;

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

#[derive(Debug, Deserialize)]
struct Suite {
    cases: Vec<Case>,
    #[serde(default)]
    disabled_upstream: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct Case {
    name: String,
    /// Why the test has no counterpart in Keel (no calls then).
    #[serde(default)]
    not_applicable: Option<String>,
    /// Files before (a key ending in `/` is a directory).
    #[serde(default)]
    before: BTreeMap<String, String>,
    #[serde(default)]
    calls: Vec<Call>,
    /// The files the peer's test expects after.
    #[serde(default)]
    after: BTreeMap<String, String>,
    #[serde(default)]
    peer_expects_error: bool,
    /// The result carries a diff with an added line.
    #[serde(default)]
    expect_diff: bool,
    /// The result names these files as changed.
    #[serde(default)]
    expect_files: Vec<String>,
    /// Files made read-only before the call.
    #[serde(default)]
    readonly: Vec<String>,
    /// Text the failing call's message must contain (Keel's own probes).
    #[serde(default)]
    error: Option<String>,
    /// A deliberate difference: what Keel does instead.
    #[serde(default)]
    keel: Option<Difference>,
    /// An open gap: the case fails today for a reason not yet decided (a Keel bug or a
    /// difference to document). It is counted apart, and must keep failing: when it passes,
    /// the annotation goes.
    #[serde(default)]
    gap: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
struct Call {
    tool: String,
    args: Value,
}

#[derive(Debug, Clone, Deserialize)]
struct Difference {
    /// The key of the difference in docs/TOOL_CATALOG.md.
    differs: String,
    /// Keel refuses with a message containing this, and changes nothing…
    #[serde(default)]
    error: String,
    /// …or ends with these files instead.
    #[serde(default)]
    after: Option<BTreeMap<String, String>>,
}

#[derive(Debug)]
enum Verdict {
    Pass,
    Deliberate(String),
    Gap,
    NotApplicable,
    Fail(String),
}

/// Every regular file under `dir` by relative path, with its bytes.
fn tree(dir: &Path) -> Tree {
    let mut out = Tree::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn bytes(files: &BTreeMap<String, String>) -> Tree {
    files
        .iter()
        .filter(|(k, _)| !k.ends_with('/'))
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect()
}

fn show(t: &Tree) -> String {
    t.iter()
        .map(|(k, v)| format!("== {k}\n{:?}\n", String::from_utf8_lossy(v)))
        .collect()
}

/// `{ROOT}` in every string of `v` → the workspace root.
fn with_root(v: &Value, root: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("{ROOT}", root)),
        Value::Array(a) => Value::Array(a.iter().map(|x| with_root(x, root)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), with_root(x, root)))
                .collect(),
        ),
        other => other.clone(),
    }
}

async fn run_case(registry: &ToolRegistry, case: &Case) -> Verdict {
    if case.not_applicable.is_some() {
        return Verdict::NotApplicable;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (rel, content) in &case.before {
        let p = root.join(rel);
        if rel.ends_with('/') {
            std::fs::create_dir_all(&p).unwrap();
            continue;
        }
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
    }
    for rel in &case.readonly {
        let p = root.join(rel);
        let mut perms = std::fs::metadata(&p).unwrap().permissions();
        perms.set_readonly(true);
        std::fs::set_permissions(&p, perms).unwrap();
    }
    let before = tree(root);
    let ctx = ToolContext::new(Workspace::new(root).unwrap());
    // A session reads files before it edits them.
    for rel in before.keys() {
        let _ = registry
            .execute("read_file", json!({ "path": rel }), &ctx)
            .await;
    }
    let root_text = root.to_string_lossy().into_owned();
    let mut results: Vec<Result<ToolOutput, String>> = Vec::new();
    for call in &case.calls {
        let args = with_root(&call.args, &root_text);
        let result = match resolve_call(registry, &call.tool, &args, false, Some(root)) {
            Ok(r) => registry
                .execute(&r.tool, r.args, &ctx)
                .await
                .map_err(|e| e.to_string()),
            Err(msg) => Err(msg),
        };
        results.push(result);
    }
    let after = tree(root);
    let last = results.last();
    let mut problems = Vec::new();
    if after != bytes(&case.after) {
        problems.push(format!(
            "files differ\n--- got\n{}--- the peer expects\n{}",
            show(&after),
            show(&bytes(&case.after))
        ));
    }
    if case.peer_expects_error {
        match last {
            Some(Err(msg)) => {
                if let Some(want) = &case.error
                    && !msg.contains(want.as_str())
                {
                    problems.push(format!("the error lacks `{want}`: {msg}"));
                }
            }
            other => problems.push(format!("the call should fail: {other:?}")),
        }
    } else {
        for r in &results {
            if let Err(msg) = r {
                problems.push(format!("a call failed: {msg}"));
            }
        }
    }
    if let Some(Ok(out)) = last {
        if case.expect_diff
            && !out.details.diff.as_deref().is_some_and(|d| {
                d.lines()
                    .any(|l| l.starts_with('+') && !l.starts_with("+++"))
            })
        {
            problems.push(format!("no diff with an added line: {:?}", out.details));
        }
        for f in &case.expect_files {
            if !out.details.files.contains(f) {
                problems.push(format!(
                    "`{f}` is not among the changed files {:?}",
                    out.details.files
                ));
            }
        }
    }
    if let Some(gap) = &case.gap {
        return if problems.is_empty() {
            Verdict::Fail(format!(
                "recorded as the open gap `{gap}`, but it passes now: drop the annotation"
            ))
        } else {
            Verdict::Gap
        };
    }
    match (&case.keel, problems.is_empty()) {
        (None, true) => Verdict::Pass,
        (Some(d), true) => Verdict::Fail(format!(
            "documented as the deliberate difference `{}`, but Keel now does what the peer expects: drop the annotation",
            d.differs
        )),
        (None, false) => Verdict::Fail(problems.join("\n")),
        (Some(d), false) => {
            let want = d.after.as_ref().map(bytes).unwrap_or(before);
            match last {
                Some(Err(msg)) if msg.contains(&d.error) && after == want => {
                    Verdict::Deliberate(d.differs.clone())
                }
                // A difference where Keel does the edit and the peer refuses it.
                Some(Ok(_)) if d.error.is_empty() && d.after.is_some() && after == want => {
                    Verdict::Deliberate(d.differs.clone())
                }
                other => Verdict::Fail(format!(
                    "neither the peer's result nor Keel's documented one (`{}`: an error with `{}`):\n{}\nlast result: {other:?}",
                    d.differs,
                    d.error,
                    problems.join("\n")
                )),
            }
        }
    }
}

fn load(path: &str) -> Suite {
    let text = std::fs::read_to_string(peers().join(path)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Codex's scenario directories: `input/`, `patch.txt`, `expected/`; the workspace must end
/// equal to `expected/`.
fn codex_scenarios() -> Vec<Case> {
    let dir = peers().join("codex/scenarios");
    let differences: Value = serde_json::from_str(
        &std::fs::read_to_string(peers().join("codex/keel_differences.json")).unwrap(),
    )
    .unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let text_tree = |p: PathBuf| -> BTreeMap<String, String> {
        tree(&p)
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8(v).unwrap()))
            .collect()
    };
    names
        .into_iter()
        .map(|name| {
            let case = dir.join(&name);
            let keel = differences["scenarios"].get(&name).map(|d| Difference {
                differs: d["differs"].as_str().unwrap().to_string(),
                error: d["error"].as_str().unwrap().to_string(),
                after: None,
            });
            let before = text_tree(case.join("input"));
            let after = text_tree(case.join("expected"));
            Case {
                name: name.clone(),
                not_applicable: None,
                // Codex checks only the final files; ending as they began is a rejection.
                peer_expects_error: before == after,
                before,
                calls: vec![Call {
                    tool: "apply_patch".into(),
                    args: json!({
                        "patch": std::fs::read_to_string(case.join("patch.txt")).unwrap()
                    }),
                }],
                after,
                expect_diff: false,
                expect_files: Vec::new(),
                readonly: Vec::new(),
                error: None,
                keel,
                gap: None,
            }
        })
        .collect()
}

#[derive(Default)]
struct Tally {
    pass: usize,
    deliberate: BTreeMap<String, usize>,
    not_applicable: usize,
    gaps: usize,
    failures: Vec<String>,
}

impl Tally {
    fn total(&self) -> usize {
        self.pass
            + self.deliberate.values().sum::<usize>()
            + self.not_applicable
            + self.gaps
            + self.failures.len()
    }
}

#[tokio::test]
async fn the_peers_suites_pass_or_differ_on_purpose() {
    let mut registry = ToolRegistry::new();
    builtin::register_defaults(&mut registry);
    let doc = include_str!("../../../docs/TOOL_CATALOG.md");
    let suites: Vec<(&str, Vec<Case>, usize)> = {
        let lib = load("codex/lib_rs_tests.json");
        let aider = load("aider/test_editblock.json");
        let opencode = load("opencode/edit_test.json");
        let probes = load("probes.json");
        let cline = load("cline/diff_test.json");
        vec![
            ("Codex apply-patch scenarios", codex_scenarios(), 0),
            (
                "Codex apply-patch lib.rs tests",
                lib.cases,
                lib.disabled_upstream.len(),
            ),
            (
                "Aider test_editblock.py",
                aider.cases,
                aider.disabled_upstream.len(),
            ),
            (
                "opencode edit.test.ts",
                opencode.cases,
                opencode.disabled_upstream.len(),
            ),
            ("Keel's probes (issue 30)", probes.cases, 0),
            ("Cline diff.test.ts", cline.cases, 0),
        ]
    };
    let mut all = Tally::default();
    let mut report = String::new();
    let mut disabled = 0;
    for (suite, cases, off) in &suites {
        let mut t = Tally::default();
        for case in cases {
            match run_case(&registry, case).await {
                Verdict::Pass => t.pass += 1,
                Verdict::Deliberate(key) => {
                    if doc.contains(&format!("`{key}`")) {
                        *t.deliberate.entry(key).or_default() += 1;
                    } else {
                        t.failures.push(format!(
                            "{suite} / {}: docs/TOOL_CATALOG.md must explain the difference `{key}`",
                            case.name
                        ));
                    }
                }
                Verdict::NotApplicable => t.not_applicable += 1,
                Verdict::Gap => t.gaps += 1,
                Verdict::Fail(why) => t.failures.push(format!("{suite} / {}: {why}", case.name)),
            }
        }
        disabled += off;
        report.push_str(&format!(
            "  {suite:<34} {:>3} cases: {:>3} pass, {} deliberate differences, {} not applicable, {} open gaps, {} failing\n",
            t.total(),
            t.pass,
            t.deliberate.values().sum::<usize>(),
            t.not_applicable,
            t.gaps,
            t.failures.len()
        ));
        all.pass += t.pass;
        all.not_applicable += t.not_applicable;
        all.gaps += t.gaps;
        for (k, n) in t.deliberate {
            *all.deliberate.entry(k).or_default() += n;
        }
        all.failures.extend(t.failures);
    }
    let differences: Vec<String> = all
        .deliberate
        .iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect();
    let applicable = all.total() - all.not_applicable;
    let disabled = if disabled > 0 {
        format!("; {disabled} more disabled upstream")
    } else {
        String::new()
    };
    let _ = writeln!(
        std::io::stderr(),
        "peer suites: {} cases ({applicable} applicable to Keel's tools{disabled}): {} pass, {} deliberate differences ({}), {} not applicable, {} open gaps, {} failing\n{report}",
        all.total(),
        all.pass,
        all.deliberate.values().sum::<usize>(),
        differences.join(", "),
        all.not_applicable,
        all.gaps,
        all.failures.len(),
    );
    assert!(
        all.failures.is_empty(),
        "{} case(s) fail:\n\n{}",
        all.failures.len(),
        all.failures.join("\n\n")
    );
    // Every applicable case but the documented differences and the recorded gaps passes.
    assert_eq!(
        all.pass + all.deliberate.values().sum::<usize>() + all.gaps,
        applicable
    );
}

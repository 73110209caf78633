//! Each kind of mistake in a flow file is reported with file, line and column before
//! anything runs.

use std::path::Path;

use keel_flow::{DiagKind, compile};

fn diags(text: &str) -> Vec<(DiagKind, u64, u64, String)> {
    match compile(text, Path::new("flows/x.yaml")) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .diagnostics
            .into_iter()
            .map(|d| (d.kind, d.pos.line, d.pos.column, d.to_string()))
            .collect(),
    }
}

#[test]
fn a_valid_flow_compiles_with_implicit_dependencies() {
    let flow = compile(
        "name: ok\ninputs:\n  task: {type: string}\nnodes:\n  - id: a\n    type: shell\n    command: echo ${inputs.task}\n  - id: b\n    type: test\n    command: echo ${nodes.a.output}\n  - id: gate\n    type: branch\n    condition: ${nodes.b.passed}\n    then: [c]\n  - id: c\n    type: shell\n    command: echo done\n",
        Path::new("x.yaml"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        flow.node("b").map(|n| n.deps.clone()),
        Some(vec!["a".to_string()])
    );
    assert_eq!(
        flow.node("c").map(|n| n.deps.clone()),
        Some(vec!["gate".to_string()])
    );
}

#[test]
fn unknown_node_type_points_at_the_type() {
    let d = diags("name: x\nnodes:\n  - id: a\n    type: agnet\n    task: hi\n");
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, DiagKind::UnknownNodeType);
    assert_eq!((d[0].1, d[0].2), (4, 11), "{d:?}");
    assert!(
        d[0].3
            .starts_with("flows/x.yaml:4:11: unknown node type `agnet`"),
        "{}",
        d[0].3
    );
    assert!(d[0].3.contains("did you mean `agent`"), "{}", d[0].3);
}

#[test]
fn missing_references_name_what_is_missing() {
    let d = diags(
        "name: x\nnodes:\n  - id: a\n    type: shell\n    command: echo ${nodes.nope.output}\n  - id: b\n    type: shell\n    command: echo ${inputs.what}\n  - id: c\n    type: shell\n    needs: [ghost]\n    command: echo ${nodes.a.passed}\n",
    );
    let kinds: Vec<_> = d.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(
        kinds,
        vec![
            (DiagKind::MissingReference, 5),
            (DiagKind::MissingReference, 8),
            (DiagKind::MissingReference, 11),
            (DiagKind::MissingReference, 12),
        ],
        "{d:?}"
    );
    assert!(d[0].3.contains("there is no node `nope`"), "{}", d[0].3);
    assert!(d[1].3.contains("no input `what`"), "{}", d[1].3);
    assert!(d[2].3.contains("no node `ghost`"), "{}", d[2].3);
    assert!(d[3].3.contains("has no field `passed`"), "{}", d[3].3);
}

#[test]
fn cycles_are_reported_with_their_path() {
    let d = diags(
        "name: x\nnodes:\n  - id: a\n    type: shell\n    needs: [b]\n    command: echo a\n  - id: b\n    type: shell\n    command: echo ${nodes.a.output}\n",
    );
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, DiagKind::Cycle);
    assert_eq!(d[0].1, 3);
    assert!(d[0].3.contains("cycle: a → b → a"), "{}", d[0].3);
}

#[test]
fn type_mismatches_are_reported() {
    let d = diags(
        "name: x\ninputs:\n  n: {type: number, default: abc}\nnodes:\n  - id: a\n    type: agent\n    task: hi\n  - id: gate\n    type: branch\n    condition: ${nodes.a.output}\n    then: [a]\n",
    );
    let kinds: Vec<_> = d.iter().map(|x| (x.0, x.1)).collect();
    assert!(kinds.contains(&(DiagKind::TypeMismatch, 3)), "{d:?}");
    assert!(kinds.contains(&(DiagKind::TypeMismatch, 10)), "{d:?}");
    let branch = d
        .iter()
        .find(|x| x.1 == 10)
        .map(|x| x.3.clone())
        .unwrap_or_default();
    assert!(
        branch.contains("`nodes.a.output` is a string, a bool is needed"),
        "{branch}"
    );
}

#[test]
fn syntax_and_unknown_fields_have_positions() {
    let d = diags("name: x\nnodes:\n  - id: a\n    type: shell\n    comand: ls\n");
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].0, DiagKind::Syntax);
    assert_eq!(d[0].1, 5, "{d:?}");
    assert!(d[0].3.starts_with("flows/x.yaml:5:"), "{}", d[0].3);
}

#[test]
fn a_review_must_loop_back_to_an_agent_it_depends_on() {
    let d = diags(
        "name: x\nnodes:\n  - id: impl\n    type: agent\n    task: do it\n  - id: rev\n    type: review\n    task: look\n    on_changes: impl\n",
    );
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].0, d[0].1), (DiagKind::Invalid, 6));
    assert!(d[0].3.contains("needs: [impl]"), "{}", d[0].3);
}

#[test]
fn deliver_and_loop_backs_are_refused_inside_parallel_branches() {
    let d = diags(
        "name: x\nnodes:\n  - id: p\n    type: parallel\n    branches:\n      - name: one\n        nodes:\n          - {id: a, type: agent, task: t}\n          - {id: r, type: review, task: t, needs: [a], on_changes: a}\n          - {id: d, type: deliver}\n",
    );
    let lines: Vec<u64> = d.iter().map(|x| x.1).collect();
    assert_eq!(lines, vec![9, 10], "{d:?}");
    assert!(d[0].3.contains("cannot loop back"), "{}", d[0].3);
    assert!(
        d[1].3.contains("deliver node cannot sit inside"),
        "{}",
        d[1].3
    );
}

#[test]
fn a_pr_file_outside_the_flows_directory_is_refused() {
    for bad in ["../../../root/.bashrc", "/etc/cron.d/x", "a/../../b"] {
        let d = diags(&format!(
            "name: x\nnodes:\n  - id: d\n    type: deliver\n    pr_file: \"{bad}\"\n"
        ));
        assert!(
            d.iter()
                .any(|d| d.0 == DiagKind::Invalid && d.3.contains("pr_file")),
            "{bad}: {d:?}"
        );
    }
    assert!(
        diags("name: x\nnodes:\n  - id: d\n    type: deliver\n    pr_file: prs/next.md\n")
            .is_empty()
    );
}

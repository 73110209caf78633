use std::sync::Arc;

use super::*;
use serde_json::json;

fn skill(root: &Path, dir: &str, text: &str) {
    let d = root.join(dir);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(d.join("SKILL.md"), text).unwrap_or_else(|e| panic!("{e}"));
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let r = dir.path();
    skill(
        r,
        ".keel/skills/style",
        "---\nname: style\ndescription: House style\nactivation: always\n---\nALWAYS-BODY\n",
    );
    skill(
        r,
        ".keel/skills/sql",
        "---\nname: sql\ndescription: SQL migrations\nactivation: glob\nglobs: [\"**/*.sql\"]\n---\nGLOB-BODY\n",
    );
    skill(
        r,
        ".claude/skills/pdf",
        "---\nname: pdf\ndescription: Fill PDF forms\n---\nMODEL-BODY\n",
    );
    std::fs::write(r.join(".claude/skills/pdf/forms.py"), "x").unwrap_or_else(|e| panic!("{e}"));
    skill(
        r,
        ".agents/skills/release",
        "---\nname: release\ndescription: Cut a release\nactivation: manual\ntools: [read_file, run_command]\n---\nMANUAL-BODY\n",
    );
    skill(
        r,
        ".agents/skills/broken",
        "---\nname: broken\nactivation: sometimes\n---\nx\n",
    );
    dir
}

#[test]
fn discovery_reads_every_root_and_reports_bad_folders() {
    let dir = fixture();
    let set = discover(dir.path(), None);
    let names: Vec<&str> = set.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["pdf", "release", "sql", "style"]);
    assert_eq!(set.problems.len(), 1);
    assert!(set.problems[0].message.contains("description"));
    let pdf = set.get("pdf").unwrap_or_else(|| panic!("pdf"));
    assert_eq!(pdf.origin, ".claude/skills");
    assert_eq!(pdf.files, vec!["forms.py".to_string()]);
}

#[test]
fn each_activation_mode() {
    let dir = fixture();
    let set = Arc::new(discover(dir.path(), None));
    let mut state = SkillState::new(set, dir.path());
    let first = state.first_message("fix the build").join("\n");
    assert!(first.contains("ALWAYS-BODY"), "always: injected");
    assert!(first.contains("- pdf: Fill PDF forms"), "model: listed");
    assert!(!first.contains("MODEL-BODY") && !first.contains("GLOB-BODY"));
    assert!(!first.contains("release"), "manual: not even listed");
    // model: loaded by the tool, once.
    let loaded = state
        .call(&json!({"name": "pdf"}))
        .map(|o| o.content)
        .unwrap_or_default();
    assert!(loaded.contains("MODEL-BODY") && loaded.contains("forms.py"));
    assert!(
        state.call(&json!({"name": "release"})).is_err(),
        "manual skills are the user's"
    );
    // glob: on the first matching file.
    assert!(state.on_paths(&["src/a.rs".into()]).is_empty());
    assert!(
        state
            .on_paths(&["db/1.sql".into()])
            .join("")
            .contains("GLOB-BODY")
    );
    assert!(state.on_paths(&["db/2.sql".into()]).is_empty());
    // manual: by $name (or $ns:name) only.
    assert!(state.check("edit_file").is_none());
    let m = state.mentioned("please run $agents:release now").join("");
    assert!(m.contains("MANUAL-BODY"));
    assert!(
        state.mentioned("costs $5 and $release").is_empty(),
        "already loaded"
    );
    // Tool restriction names the skill.
    let refusal = state.check("edit_file").unwrap_or_default();
    assert!(refusal.contains("skill `release`") && refusal.contains("read_file, run_command"));
    assert!(state.check("read_file").is_none() && state.check("skill").is_none());
}

#[test]
fn new_skills_are_created_once_and_read_back() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = create(dir.path(), "deploy", "Deploy the app").unwrap_or_else(|e| panic!("{e}"));
    assert!(file.ends_with(".keel/skills/deploy/SKILL.md"));
    assert!(create(dir.path(), "deploy", "again").is_err());
    assert!(create(dir.path(), "Bad Name", "x").is_err());
    let set = discover(dir.path(), None);
    assert_eq!(set.skills[0].activation, Activation::Model);
    assert_eq!(set.skills[0].description, "Deploy the app");
}

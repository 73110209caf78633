//! The task layer of a task's run: what `keel work start` shows without `--execute` (the
//! intent preview) and sends as the session's first message with it.
//!
//! It holds the task, its acceptance criteria, a bounded excerpt of its PRD, every answered
//! blocker of the task (from all its earlier sessions) and the instructions for the proof the
//! final answer must end with. It goes in the first user message — never the system prompt,
//! which stays byte-identical across tasks.

use keel_store::BlockerRecord;
use keel_store::work::{PrdRecord, TaskRecord};

/// Longest PRD excerpt in the task layer (characters).
pub const PRD_EXCERPT_CHARS: usize = 5_000;

/// The PRD cut to [`PRD_EXCERPT_CHARS`], with a note when cut.
pub fn prd_excerpt(prd: &PrdRecord) -> String {
    let body = prd.body.trim();
    let count = body.chars().count();
    if count <= PRD_EXCERPT_CHARS {
        return body.to_string();
    }
    let cut: String = body.chars().take(PRD_EXCERPT_CHARS).collect();
    format!(
        "{cut}\n[… PRD #{} cut at {PRD_EXCERPT_CHARS} of {count} characters; `keel prd show {}` has all of it]",
        prd.id, prd.id
    )
}

/// The task layer for `task`.
pub fn task_brief(
    task: &TaskRecord,
    prd: Option<&PrdRecord>,
    answered: &[BlockerRecord],
) -> String {
    let mut out = format!(
        "# Task #{}: {}\n\n{}\n",
        task.id, task.title, task.description
    );
    out.push_str("\n## Acceptance criteria\n");
    for (i, c) in task.criteria.iter().enumerate() {
        out.push_str(&format!("{}. {c}\n", i + 1));
    }
    if !task.depends_on.is_empty() {
        let deps: Vec<String> = task.depends_on.iter().map(|d| format!("#{d}")).collect();
        out.push_str(&format!(
            "\nThis task builds on tasks {} (done; their work is in the workspace).\n",
            deps.join(", ")
        ));
    }
    if let Some(prd) = prd {
        out.push_str(&format!(
            "\n<prd id=\"{}\" version=\"{}\" title=\"{}\">\n{}\n</prd>\n",
            prd.id,
            prd.version,
            prd.title.replace('"', "'"),
            prd_excerpt(prd)
        ));
    }
    if let Some(answers) = keel_engine::blockers::answers_text(answered) {
        out.push('\n');
        out.push_str(answers.trim_end());
        out.push('\n');
    }
    out.push_str(PROOF_INSTRUCTIONS);
    out
}

/// How the final answer reports each criterion (parsed by [`crate::proof`]).
pub const PROOF_INSTRUCTIONS: &str = "
## Proof
When you are done, end your final answer with one line per acceptance criterion:
`CRITERION <n>: met — evidence: <kind> <what>` or `CRITERION <n>: not shown`, where <kind> is
`test` (a test file or test id that passes), `command` (a command you ran, with its output
showing it) or `file` (a file in the workspace). A criterion without evidence counts as
unverified.
";

#[cfg(test)]
mod tests {
    use super::*;
    use keel_store::BlockerStatus;
    use keel_store::work::TaskStatus;

    fn task() -> TaskRecord {
        TaskRecord {
            id: 2,
            prd: Some(1),
            title: "Add a --name flag".into(),
            description: "greet.py takes --name".into(),
            criteria: vec!["`greet.py --name Bo` prints Hello, Bo".into()],
            size: "s".into(),
            status: TaskStatus::Ready,
            question: None,
            session_id: None,
            sessions: vec![],
            depends_on: vec![1],
            pid: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn the_brief_holds_criteria_a_bounded_prd_and_answers() {
        let prd = PrdRecord {
            id: 1,
            title: "Greeter".into(),
            version: 3,
            body: "x".repeat(12_000),
            created_at: 0,
            updated_at: 0,
        };
        let answer = BlockerRecord {
            id: "b1".into(),
            session_id: "s".into(),
            question: "Which greeting?".into(),
            source: "model".into(),
            evidence: vec![],
            status: BlockerStatus::Answered,
            answer: Some("Use Hello".into()),
            created_at: 0,
            answered_at: Some(1),
        };
        let b = task_brief(&task(), Some(&prd), &[answer]);
        assert!(b.contains("1. `greet.py --name Bo` prints Hello, Bo"));
        assert!(b.contains("A: Use Hello"));
        assert!(b.contains("version=\"3\""));
        assert!(b.contains("cut at 5000 of 12000"));
        assert!(b.len() < 7_000, "the PRD excerpt is bounded");
    }
}

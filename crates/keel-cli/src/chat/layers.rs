//! What `/memory`, `/skills`, `/rules` and `/context` print: the same data as `keel memory
//! list`, `keel skills list` and `keel context` (issue 17), as notice text for the transcript.

use keel_engine::context::{Dashboard, Placement};
use keel_engine::rules::RuleFile;
use keel_engine::skills::SkillSet;
use keel_store::MemoryEntry;

/// `/memory`: the stored entries, as `keel memory list` prints them.
pub fn memory_text(entries: &[MemoryEntry]) -> String {
    let mut out = Vec::new();
    if let Err(e) = crate::memory::render(&mut out, entries, false) {
        return format!("✗ cannot show memory: {e}");
    }
    let mut text = String::from_utf8_lossy(&out).trim_end().to_string();
    if !entries.is_empty() {
        text.push_str("\n(edit with keel memory add|rm|edit)");
    }
    text
}

/// `/skills`: the skills found for this workspace and the skipped ones.
pub fn skills_text(set: &SkillSet) -> String {
    let mut lines = Vec::new();
    if set.skills.is_empty() {
        lines.push("No skills. Create one with: keel skills new NAME".to_string());
    }
    for s in &set.skills {
        let mut line = format!(
            "{} ({}, {}): {}",
            s.name,
            s.activation.as_str(),
            s.origin,
            s.description
        );
        if !s.tools.is_empty() {
            line.push_str(&format!("  tools: {}", s.tools.join(", ")));
        }
        lines.push(line);
    }
    for p in &set.problems {
        lines.push(format!("skipped {}: {}", p.path, p.message));
    }
    lines.join("\n")
}

/// `/rules`: the project's `.keel/rules/*.md` files and when each applies.
pub fn rules_text(files: &[RuleFile]) -> String {
    if files.is_empty() {
        return "No rules files in .keel/rules/ (other instruction files: /context)".to_string();
    }
    files
        .iter()
        .map(|f| {
            let when = if f.globs.is_empty() {
                "always".to_string()
            } else {
                format!("when touching {}", f.globs.join(", "))
            };
            let n = f.body.lines().count();
            let s = if n == 1 { "" } else { "s" };
            format!("{} ({when}, {n} line{s})", f.source)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `/context`'s layer table: every layer of what the model is told here.
pub fn context_text(d: &Dashboard) -> String {
    let mut lines = vec![format!(
        "system prompt: {} bytes, about {} tokens",
        d.system_prompt_bytes, d.system_prompt_tokens
    )];
    for l in &d.layers {
        let place = match l.placement {
            Placement::Head => "head",
            Placement::FirstMessage => "first message",
            Placement::OnDemand => "on demand",
        };
        lines.push(format!(
            "{}: {} tokens, {} item{} ({place}) — {}",
            l.name,
            l.tokens,
            l.items,
            if l.items == 1 { "" } else { "s" },
            l.source
        ));
    }
    for s in &d.skipped {
        lines.push(format!("not read: {s}"));
    }
    lines.join("\n")
}

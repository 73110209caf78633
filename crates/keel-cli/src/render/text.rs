//! Text pieces every renderer shares (`keel run`'s output, `keel chat`'s transcript, the
//! listings): terminal styles, compact numbers, the usage line, a tool call's argument summary,
//! first lines and one-line timestamps.

use keel_engine::time::utc_datetime;
use keel_protocol::Usage;
use serde_json::Value;

/// Terminal styles; all empty when colour is off.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub dim: &'static str,
    pub bold: &'static str,
    pub red: &'static str,
    pub green: &'static str,
    pub yellow: &'static str,
    pub cyan: &'static str,
    pub reset: &'static str,
}

impl Style {
    pub fn new(color: bool) -> Self {
        if color {
            Self {
                dim: "\x1b[2m",
                bold: "\x1b[1m",
                red: "\x1b[31m",
                green: "\x1b[32m",
                yellow: "\x1b[33m",
                cyan: "\x1b[36m",
                reset: "\x1b[0m",
            }
        } else {
            Self {
                dim: "",
                bold: "",
                red: "",
                green: "",
                yellow: "",
                cyan: "",
                reset: "",
            }
        }
    }
}

/// `destructive: `rm` deletes files`, or the class alone when there is no reason.
pub fn class_and_reason(class: &str, reason: &str) -> String {
    if reason.is_empty() {
        class.to_string()
    } else {
        format!("{class}: {reason}")
    }
}

/// `1.2k in · 340 out · $0.0042`, leaving out what is zero.
pub fn usage_line(u: &Usage) -> String {
    if u.input_tokens == 0 && u.output_tokens == 0 && u.cost_usd == 0.0 {
        // Every real request has input tokens: zero means the provider did not say (some
        // local servers send no usage). "0 tokens" would be a wrong figure.
        return "tokens not reported".to_string();
    }
    // A server that sent no usage: Keel's estimate, marked as such (`~`).
    let about = if u.estimated { "~" } else { "" };
    let mut parts = vec![
        format!("{about}{} tokens in", compact(u.input_tokens)),
        format!("{about}{} out", compact(u.output_tokens)),
    ];
    if u.cache_read_tokens > 0 {
        parts.push(format!("{} cached", compact(u.cache_read_tokens)));
    }
    if u.cost_usd > 0.0 {
        parts.push(format!("${:.4}", u.cost_usd));
    }
    parts.join(" · ")
}

/// `1.2k`, `34k`, `1.5M`: a token count for a status line.
pub fn compact(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{:.0}k", n as f64 / 1e3)
    } else if n >= 1_000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// An `update_plan` checklist: one line per step, the current one highlighted.
pub fn render_plan(plan: &serde_json::Value, s: Style) -> String {
    let mut out = String::new();
    let steps = plan
        .get("steps")
        .and_then(serde_json::Value::as_array)
        .cloned()
        .unwrap_or_default();
    let done = steps.iter().filter(|st| st["status"] == "done").count();
    out.push_str(&format!(
        "    {}plan ({done}/{} done){}\n",
        s.dim,
        steps.len(),
        s.reset
    ));
    for step in &steps {
        let text = first_line(step["step"].as_str().unwrap_or(""), 100);
        let line = match step["status"].as_str() {
            Some("done") => format!("{}✓ {text}{}", s.green, s.reset),
            Some("in_progress") => format!("{}▸ {text}{}", s.bold, s.reset),
            _ => format!("{}○ {text}{}", s.dim, s.reset),
        };
        out.push_str(&format!("      {line}\n"));
    }
    out
}

/// The argument a person wants to see first: a path, pattern or command; else compact JSON.
pub fn summarize_args(args: &Value) -> String {
    for key in ["path", "command", "pattern", "query", "symbol", "question"] {
        if let Some(v) = args.get(key).and_then(Value::as_str) {
            let mut s = v.to_string();
            if key == "path" {
                if let Some(sym) = args.get("symbol").and_then(Value::as_str) {
                    s.push_str(&format!(" ({sym})"));
                } else if let Some(start) = args.get("start_line").and_then(Value::as_u64) {
                    let end = args.get("end_line").and_then(Value::as_u64);
                    s.push_str(&match end {
                        Some(e) => format!(":{start}-{e}"),
                        None => format!(":{start}-"),
                    });
                }
            }
            return first_line(&s, 100);
        }
    }
    let compact = args.to_string();
    if compact == "{}" {
        String::new()
    } else {
        first_line(&compact, 100)
    }
}

/// The first non-blank line of `text`, trimmed, cut to `max` characters with `…`.
pub fn first_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() > max {
        let cut: String = line.chars().take(max).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

/// A one-line timestamp for listings.
pub fn when(ms: u64) -> String {
    utc_datetime(ms)
}

/// `text` on one line (runs of white space made one space), cut to `max` characters with `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

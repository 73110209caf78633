//! Human output of `keel eval`: a run's report (failures first, with the check's output tail
//! and the session to inspect), the run list, and two runs compared.

use std::io::Write;

use keel_engine::time::utc_datetime;
use keel_eval::{Change, Comparison};
use keel_store::eval::{EvalRunRecord, EvalTaskResult};

pub fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

fn pct(passed: usize, total: usize) -> String {
    if total == 0 {
        "0%".into()
    } else {
        format!("{:.0}%", passed as f64 * 100.0 / total as f64)
    }
}

fn model_of(run: &EvalRunRecord) -> String {
    match (run.provider.is_empty(), run.model.is_empty()) {
        (true, true) => "(no session ran)".into(),
        (false, true) => run.provider.clone(),
        (true, false) => run.model.clone(),
        (false, false) => format!("{}/{}", run.provider, run.model),
    }
}

/// One line per task as it finishes (stderr, while the suite runs).
pub fn progress_line(done: usize, total: usize, r: &EvalTaskResult) -> String {
    let verdict = if r.success { "passed" } else { "FAILED" };
    format!(
        "keel: [{done}/{total}] {}: {verdict} ({}, {} steps, {})",
        r.id,
        r.status,
        r.steps,
        secs(r.wall_ms)
    )
}

const HEADER: [&str; 9] = [
    "TASK", "RESULT", "STATUS", "STEPS", "TOK IN", "TOK OUT", "COST", "TIME", "SESSION",
];

fn row(r: &EvalTaskResult) -> [String; 9] {
    [
        r.id.clone(),
        if r.success { "pass" } else { "FAIL" }.into(),
        r.status.clone(),
        r.steps.to_string(),
        r.input_tokens.to_string(),
        r.output_tokens.to_string(),
        format!("${:.4}", r.cost_usd),
        secs(r.wall_ms),
        if r.session_id.is_empty() {
            "-".into()
        } else {
            r.session_id.clone()
        },
    ]
}

fn table(out: &mut impl Write, rows: &[[String; 9]]) -> std::io::Result<()> {
    let mut width = [0usize; 9];
    for r in rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(width)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    Ok(())
}

/// The report of one run: summary, failures with their evidence, then every task.
pub fn run_report(out: &mut impl Write, run: &EvalRunRecord) -> std::io::Result<()> {
    let total = run.results.len();
    let passed = run.passed();
    writeln!(
        out,
        "Eval run #{} · suite {} · {} · {passed}/{total} passed ({}) · {}",
        run.id,
        run.suite,
        model_of(run),
        pct(passed, total),
        secs(run.wall_ms)
    )?;
    let failures: Vec<&EvalTaskResult> = run.results.iter().filter(|r| !r.success).collect();
    if !failures.is_empty() {
        writeln!(out, "\nFailed:")?;
    }
    for r in &failures {
        writeln!(out, "  {} (run ended {})", r.id, r.status)?;
        if !r.error.is_empty() {
            writeln!(out, "    why: {}", r.error.lines().next().unwrap_or(""))?;
        }
        if r.check_exit.is_some() || !r.check_tail.is_empty() {
            let ended = r
                .check_exit
                .map_or("did not exit normally".to_string(), |c| {
                    format!("exit code {c}")
                });
            writeln!(out, "    check: {ended}; its output ends:")?;
            for line in r.check_tail.lines() {
                writeln!(out, "      | {line}")?;
            }
        }
        if !r.session_id.is_empty() {
            writeln!(out, "    inspect: keel sessions show {}", r.session_id)?;
        }
    }
    writeln!(out)?;
    let mut rows = vec![HEADER.map(String::from)];
    rows.extend(failures.iter().map(|r| row(r)));
    rows.extend(run.results.iter().filter(|r| r.success).map(row));
    let sum = |f: fn(&EvalTaskResult) -> u64| run.results.iter().map(f).sum::<u64>();
    rows.push([
        "TOTAL".into(),
        format!("{passed}/{total}"),
        String::new(),
        sum(|r| u64::from(r.steps)).to_string(),
        sum(|r| r.input_tokens).to_string(),
        sum(|r| r.output_tokens).to_string(),
        format!(
            "${:.4}",
            run.results.iter().map(|r| r.cost_usd).sum::<f64>()
        ),
        secs(run.wall_ms),
        String::new(),
    ]);
    table(out, &rows)?;
    if passed > 0 {
        writeln!(
            out,
            "\nDistill a passing task: keel eval promote {} --task ID --as rule|skill|memory",
            run.id
        )?;
    }
    Ok(())
}

/// The stored runs, newest first.
pub fn run_list(out: &mut impl Write, runs: &[EvalRunRecord]) -> std::io::Result<()> {
    if runs.is_empty() {
        return writeln!(out, "No eval runs yet: keel eval SUITE.toml");
    }
    let mut rows =
        vec![["RUN", "WHEN (UTC)", "SUITE", "MODEL", "PASSED", "TIME"].map(String::from)];
    for r in runs {
        rows.push([
            format!("#{}", r.id),
            utc_datetime(r.created_at),
            r.suite.clone(),
            model_of(r),
            format!("{}/{}", r.passed(), r.results.len()),
            secs(r.wall_ms),
        ]);
    }
    let mut width = [0usize; 6];
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    Ok(())
}

fn cell(r: Option<&EvalTaskResult>) -> String {
    match r {
        None => "-".into(),
        Some(r) => format!(
            "{} {}st {}tok {}",
            if r.success { "pass" } else { "FAIL" },
            r.steps,
            r.input_tokens + r.output_tokens,
            secs(r.wall_ms)
        ),
    }
}

fn change(c: Change) -> &'static str {
    match c {
        Change::Fixed => "fixed in B",
        Change::Broken => "BROKEN in B",
        Change::BothPassed => "both pass",
        Change::BothFailed => "both fail",
        Change::OnlyA => "only in A",
        Change::OnlyB => "only in B",
    }
}

fn money(v: f64) -> String {
    let sign = if v < 0.0 { '-' } else { '+' };
    format!("{sign}${:.4}", v.abs())
}

fn signed(v: f64, decimals: usize) -> String {
    format!("{v:+.decimals$}")
}

/// Two runs side by side, the significance of the success-rate difference and mean deltas.
pub fn comparison(
    out: &mut impl Write,
    a: &EvalRunRecord,
    b: &EvalRunRecord,
    c: &Comparison,
) -> std::io::Result<()> {
    writeln!(
        out,
        "A = eval run #{} (suite {}, {})\nB = eval run #{} (suite {}, {})\n",
        a.id,
        a.suite,
        model_of(a),
        b.id,
        b.suite,
        model_of(b)
    )?;
    let mut rows = vec![["TASK", "A", "B", "CHANGE"].map(String::from)];
    for t in &c.tasks {
        rows.push([
            t.id.clone(),
            cell(t.a.as_ref()),
            cell(t.b.as_ref()),
            change(t.change).into(),
        ]);
    }
    rows.push([
        "TOTAL".into(),
        format!(
            "{}/{} ({})",
            c.passed_a,
            a.results.len(),
            pct(c.passed_a, a.results.len())
        ),
        format!(
            "{}/{} ({})",
            c.passed_b,
            b.results.len(),
            pct(c.passed_b, b.results.len())
        ),
        String::new(),
    ]);
    let mut width = [0usize; 4];
    for r in &rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    let verdict = if c.p_value < 0.05 {
        "significant at the 0.05 level"
    } else if c.fixed + c.broken < 6 {
        "not significant: fewer than 6 tasks changed outcome, which can never reach p < 0.05"
    } else {
        "not significant at the 0.05 level"
    };
    writeln!(
        out,
        "\nSuccess on {} paired tasks: fixed in B {}, broken in B {}; exact McNemar test (two-sided, on the tasks that changed outcome): p = {:.4} ({verdict}).",
        c.paired, c.fixed, c.broken, c.p_value
    )?;
    let d = &c.mean_delta;
    writeln!(
        out,
        "Mean per task, B − A: steps {}, tokens in {}, tokens out {}, cost {}, time {} s.",
        signed(d.steps, 1),
        signed(d.input_tokens, 0),
        signed(d.output_tokens, 0),
        money(d.cost_usd),
        signed(d.wall_ms / 1000.0, 1)
    )?;
    if a.suite != b.suite {
        writeln!(
            out,
            "Note: the runs come from different suites ({} and {}); only tasks with the same id are paired.",
            a.suite, b.suite
        )?;
    }
    Ok(())
}

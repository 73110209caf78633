//! Comparing two eval runs task by task: paired outcomes, the exact McNemar test on the
//! discordant pairs, and mean differences of steps, tokens, cost and wall time.
//!
//! **Why McNemar.** Both runs attempt the same tasks, so outcomes are paired: a task that is
//! easy passes in both and says nothing about which setup is better. Only the discordant pairs
//! carry information — `b` tasks fixed by run B (failed in A, passed in B) and `c` broken by it.
//! Under "no difference" each discordant pair is a fair coin, so the two-sided exact p-value is
//! `min(1, 2 · P(X ≤ min(b, c)))` with `X ~ Binomial(b + c, ½)`. (Fisher's exact test would
//! treat the runs as independent samples and waste the pairing.)

use keel_store::eval::{EvalRunRecord, EvalTaskResult};
use serde::Serialize;

/// How a task's outcome changed from run A to run B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Failed in A, passed in B.
    Fixed,
    /// Passed in A, failed in B.
    Broken,
    BothPassed,
    BothFailed,
    /// The task is in only one of the runs.
    OnlyA,
    OnlyB,
}

/// One task side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskPair {
    pub id: String,
    pub a: Option<EvalTaskResult>,
    pub b: Option<EvalTaskResult>,
    pub change: Change,
}

/// Mean per-task differences B − A over the tasks both runs have.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MeanDeltas {
    pub steps: f64,
    pub input_tokens: f64,
    pub output_tokens: f64,
    pub cost_usd: f64,
    pub wall_ms: f64,
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: i64,
    pub b: i64,
    pub tasks: Vec<TaskPair>,
    /// Tasks in both runs.
    pub paired: usize,
    pub passed_a: usize,
    pub passed_b: usize,
    /// Discordant pairs: fixed by B, broken by B.
    pub fixed: usize,
    pub broken: usize,
    /// Two-sided exact McNemar p-value on the paired tasks.
    pub p_value: f64,
    pub mean_delta: MeanDeltas,
}

/// `ln(n!)`.
fn ln_factorial(n: u64) -> f64 {
    (2..=n).map(|k| (k as f64).ln()).sum()
}

/// Two-sided exact McNemar p-value for `b` and `c` discordant pairs.
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    let ln_n = ln_factorial(n);
    let half = n as f64 * 0.5f64.ln();
    let tail: f64 = (0..=k)
        .map(|i| (ln_n - ln_factorial(i) - ln_factorial(n - i) + half).exp())
        .sum();
    (2.0 * tail).min(1.0)
}

/// Compares run `a` with run `b`, tasks in A's order then B's extra ones.
pub fn compare(a: &EvalRunRecord, b: &EvalRunRecord) -> Comparison {
    let mut tasks = Vec::new();
    for ra in &a.results {
        let rb = b.results.iter().find(|r| r.id == ra.id);
        let change = match rb {
            None => Change::OnlyA,
            Some(rb) => match (ra.success, rb.success) {
                (true, true) => Change::BothPassed,
                (false, false) => Change::BothFailed,
                (false, true) => Change::Fixed,
                (true, false) => Change::Broken,
            },
        };
        tasks.push(TaskPair {
            id: ra.id.clone(),
            a: Some(ra.clone()),
            b: rb.cloned(),
            change,
        });
    }
    for rb in b
        .results
        .iter()
        .filter(|rb| !a.results.iter().any(|ra| ra.id == rb.id))
    {
        tasks.push(TaskPair {
            id: rb.id.clone(),
            a: None,
            b: Some(rb.clone()),
            change: Change::OnlyB,
        });
    }
    let count = |c: Change| tasks.iter().filter(|t| t.change == c).count();
    let (fixed, broken) = (count(Change::Fixed), count(Change::Broken));
    let mut mean = MeanDeltas::default();
    let mut paired = 0usize;
    for t in &tasks {
        if let (Some(x), Some(y)) = (&t.a, &t.b) {
            paired += 1;
            mean.steps += f64::from(y.steps) - f64::from(x.steps);
            mean.input_tokens += y.input_tokens as f64 - x.input_tokens as f64;
            mean.output_tokens += y.output_tokens as f64 - x.output_tokens as f64;
            mean.cost_usd += y.cost_usd - x.cost_usd;
            mean.wall_ms += y.wall_ms as f64 - x.wall_ms as f64;
        }
    }
    if paired > 0 {
        let n = paired as f64;
        mean.steps /= n;
        mean.input_tokens /= n;
        mean.output_tokens /= n;
        mean.cost_usd /= n;
        mean.wall_ms /= n;
    }
    Comparison {
        a: a.id,
        b: b.id,
        paired,
        passed_a: a.passed(),
        passed_b: b.passed(),
        fixed,
        broken,
        p_value: mcnemar_exact(fixed as u64, broken as u64),
        mean_delta: mean,
        tasks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, success: bool, steps: u32) -> EvalTaskResult {
        EvalTaskResult {
            id: id.into(),
            success,
            steps,
            wall_ms: 100,
            ..EvalTaskResult::default()
        }
    }

    fn run(id: i64, results: Vec<EvalTaskResult>) -> EvalRunRecord {
        EvalRunRecord {
            id,
            suite: "s".into(),
            suite_path: "s.toml".into(),
            provider: "p".into(),
            model: "m".into(),
            results,
            created_at: 0,
            wall_ms: 0,
        }
    }

    #[test]
    fn exact_mcnemar_matches_the_binomial() {
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        // One discordant pair: p = 2 · ½ = 1.
        assert!((mcnemar_exact(1, 0) - 1.0).abs() < 1e-12);
        // 6 vs 0: 2 · (½)^6 = 0.03125.
        assert!((mcnemar_exact(6, 0) - 0.03125).abs() < 1e-12);
        assert!((mcnemar_exact(0, 6) - 0.03125).abs() < 1e-12);
        // 8 vs 2: 2 · (1 + 10 + 45) / 1024 = 0.109375.
        assert!((mcnemar_exact(8, 2) - 0.109_375).abs() < 1e-12);
        // Large counts stay finite.
        let p = mcnemar_exact(600, 400);
        assert!(p > 0.0 && p < 1e-9, "{p}");
    }

    #[test]
    fn pairs_changes_and_means() {
        let a = run(
            1,
            vec![
                result("x", true, 2),
                result("y", false, 4),
                result("z", true, 3),
                result("only-a", true, 1),
            ],
        );
        let b = run(
            2,
            vec![
                result("x", true, 4),
                result("y", true, 4),
                result("z", false, 6),
                result("only-b", false, 1),
            ],
        );
        let c = compare(&a, &b);
        let changes: Vec<Change> = c.tasks.iter().map(|t| t.change).collect();
        assert_eq!(
            changes,
            [
                Change::BothPassed,
                Change::Fixed,
                Change::Broken,
                Change::OnlyA,
                Change::OnlyB
            ]
        );
        assert_eq!((c.paired, c.fixed, c.broken), (3, 1, 1));
        assert_eq!((c.passed_a, c.passed_b), (3, 2));
        assert!((c.mean_delta.steps - 5.0 / 3.0).abs() < 1e-9);
        assert_eq!(c.p_value, 1.0);
    }
}

//! Finding and reading flows: the flow directories of a workspace, a name or path resolved
//! to a file, the listing, and a flow compiled with its `NAME=VALUE` inputs.

use std::path::{Path, PathBuf};

use crate::setup;

pub(crate) fn flow_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join(".keel/flows")];
    if let Ok(skills) = std::fs::read_dir(root.join(".keel/skills")) {
        let mut more: Vec<PathBuf> = skills.flatten().map(|e| e.path().join("flows")).collect();
        more.sort();
        dirs.extend(more);
    }
    dirs
}

/// A path as given, or a listed flow's name.
pub(crate) fn resolve(root: &Path, file: &Path) -> PathBuf {
    if file.exists() {
        // Absolute, so a run knows whether the file lies in the workspace (repository
        // content, whose choice of model is not used) wherever it is resumed.
        return std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    }
    let name = file.display().to_string();
    keel_flow::find_flows(&flow_dirs(root))
        .into_iter()
        .find(|p| p.file_stem().is_some_and(|s| s.to_string_lossy() == name))
        .unwrap_or_else(|| file.to_path_buf())
}

pub(crate) fn compile(file: &Path) -> anyhow::Result<(keel_flow::Flow, String)> {
    let source = std::fs::read_to_string(file).map_err(|e| {
        setup::UsageError(format!(
            "cannot read flow file {}: {e} (`keel flow list` shows the flows here)",
            file.display()
        ))
    })?;
    let flow = keel_flow::compile(&source, file)
        .map_err(|e| setup::UsageError(format!("the flow has mistakes:\n{e}")))?;
    Ok((flow, source))
}

/// One line per flow found here (`keel flow list`, `/workflow` in chat).
pub(crate) fn listing(root: &Path) -> Vec<String> {
    keel_flow::find_flows(&flow_dirs(root))
        .into_iter()
        .map(|f| {
            let shown = f.strip_prefix(root).unwrap_or(&f).display().to_string();
            match keel_flow::compile_file(&f) {
                Ok(flow) => format!(
                    "{:<24} {}  {}",
                    flow.name,
                    shown,
                    flow.description
                        .unwrap_or_default()
                        .lines()
                        .next()
                        .unwrap_or("")
                ),
                Err(e) => format!("{shown}: invalid ({} mistakes)", e.diagnostics.len()),
            }
        })
        .collect()
}

fn parse_inputs(pairs: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .ok_or_else(|| {
                    setup::UsageError(format!("--input takes NAME=VALUE, got `{p}`")).into()
                })
        })
        .collect()
}

/// A flow compiled with its inputs resolved, ready for [`Executor::start`].
pub(crate) struct Prepared {
    pub flow: keel_flow::Flow,
    pub source: String,
    pub values: std::collections::BTreeMap<String, keel_flow::ir::Value>,
}

/// Reads and compiles `file` and resolves `NAME=VALUE` inputs; errors are usage errors that
/// name file:line:column.
pub(crate) fn prepare(file: &Path, inputs: &[String]) -> anyhow::Result<Prepared> {
    let (flow, source) = compile(file)?;
    let given = parse_inputs(inputs)?;
    let values = flow.resolve_inputs(&given).map_err(setup::UsageError)?;
    Ok(Prepared {
        flow,
        source,
        values,
    })
}

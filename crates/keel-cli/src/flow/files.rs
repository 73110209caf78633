//! Finding and reading flows: the flow directories of a workspace, a name or path resolved
//! to a file, the listing, and a flow compiled with its `NAME=VALUE` inputs.

use std::path::{Path, PathBuf};

use crate::setup;

/// A path as given, or a listed flow's name.
pub(crate) fn resolve(root: &Path, file: &Path) -> PathBuf {
    // `symlink_metadata`: a link names a file too (reading it decides whether it may be read).
    if file.symlink_metadata().is_ok() {
        // Absolute, so a run knows whether the file lies in the workspace (repository
        // content, whose choice of model is not used) wherever it is resumed.
        return std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
    }
    let name = file.display().to_string();
    keel_flow::find_flows(root)
        .into_iter()
        .find(|p| p.file_stem().is_some_and(|s| s.to_string_lossy() == name))
        .unwrap_or_else(|| file.to_path_buf())
}

/// Reads and compiles the flow at `file`: in the workspace at `root` as a project file (a
/// link out of the workspace, a FIFO or a device refused, at most 1 MB), elsewhere as the
/// user's own (regular and bounded too).
pub(crate) fn compile(root: &Path, file: &Path) -> anyhow::Result<(keel_flow::Flow, String)> {
    let cannot = |why: String| {
        setup::UsageError(format!(
            "cannot read flow file {}: {why} (`keel flow list` shows the flows here)",
            file.display()
        ))
    };
    let source = match keel_flow::read_flow(root, file) {
        Ok(Some(text)) => text,
        Ok(None) => return Err(cannot("it does not exist".into()).into()),
        Err(e) => return Err(cannot(format!("it {}", e.problem)).into()),
    };
    let flow = keel_flow::compile(&source, file)
        .map_err(|e| setup::UsageError(format!("the flow has mistakes:\n{e}")))?;
    Ok((flow, source))
}

/// One line per flow found here (`keel flow list`, `/workflow` in chat).
pub(crate) fn listing(root: &Path) -> Vec<String> {
    keel_flow::find_flows(root)
        .into_iter()
        .map(|f| {
            let shown = f.strip_prefix(root).unwrap_or(&f).display().to_string();
            match keel_flow::compile_file(root, &f) {
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
                Err(e) => match e.diagnostics.as_slice() {
                    [only] => format!("{shown}: invalid: {}", only.message),
                    all => format!("{shown}: invalid ({} mistakes)", all.len()),
                },
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
pub(crate) fn prepare(root: &Path, file: &Path, inputs: &[String]) -> anyhow::Result<Prepared> {
    let (flow, source) = compile(root, file)?;
    let given = parse_inputs(inputs)?;
    let values = flow.resolve_inputs(&given).map_err(setup::UsageError)?;
    Ok(Prepared {
        flow,
        source,
        values,
    })
}

//! `keel sandbox`: debug the shell guardrails. `--check "CMD"` prints the command-safety
//! analysis as one JSON object without running anything; `-- CMD ARGS…` runs a program in the
//! workspace under the read-only (`--read-only`) or the workspace-write sandbox.

use std::ffi::OsString;
use std::io::Write;

use anyhow::Context;
use keel_config::Layer;
use keel_tools::sandbox::{self, SandboxPolicy};
use keel_tools::shell::{CommandSafety, SafetyClass, exec};

use crate::args::SandboxArgs;
use crate::{exit, setup};

/// What `--check` prints: exactly these two keys.
#[derive(serde::Serialize)]
struct CheckOutput<'a> {
    class: SafetyClass,
    reasons: &'a [String],
}

pub fn execute(args: SandboxArgs) -> anyhow::Result<u8> {
    let workspace = setup::workspace_dir(args.common.workspace.as_deref())?;
    let config = setup::load_config(&workspace, Layer::from_overrides(&[]))?;
    if let Some(command) = &args.check {
        let analysis = CommandSafety::with_allow(&config.shell.allow).classify(command);
        let out = CheckOutput {
            class: analysis.class,
            reasons: &analysis.reasons,
        };
        say!("{}", crate::out::json(&out)?);
        return Ok(exit::COMPLETED);
    }
    if args.command.is_empty() {
        return Err(setup::UsageError(
            "nothing to do: pass --check \"CMD\" to analyse a command, or -- CMD ARGS… to run one"
                .into(),
        )
        .into());
    }
    let settings = config.shell.tool_settings();
    let policy = if args.read_only {
        SandboxPolicy::ReadOnly
    } else {
        SandboxPolicy::WorkspaceWrite
    };
    let policy = settings.policy_for(policy);
    if policy == SandboxPolicy::Off {
        tell!("keel sandbox: the sandbox is switched off (`shell.sandbox = false`)");
    } else if sandbox::is_available() {
        tell!(
            "keel sandbox: {} policy; {}",
            policy.as_str(),
            sandbox::describe_support()
        );
    } else {
        tell!("keel sandbox: {}", sandbox::describe_support());
    }
    let mut req = exec::ExecRequest::new(
        args.command.iter().map(OsString::from).collect(),
        &workspace,
    );
    req.policy = policy;
    req.timeout = settings.max_timeout;
    // The user's own command line: their network setting.
    req.roots = settings.approved_roots_for(&workspace);
    req.env_keep = settings.env_keep.clone();
    // The user typed it: what it installs into a virtual environment is theirs.
    req.approved = true;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let out = runtime.block_on(exec::run(req))?;
    // Raw: the user's own command's output, passed on as a shell would.
    crate::out::raw_stdout().write_all(out.stdout.text().as_bytes())?;
    crate::out::raw_stderr().write_all(out.stderr.text().as_bytes())?;
    if let Some(report) = &out.quarantined {
        tell!("{report}");
    }
    Ok(match out.ending {
        exec::Ending::Exited(c) => u8::try_from(c).unwrap_or(exit::FAILED),
        exec::Ending::Signalled(s) => u8::try_from(128 + s).unwrap_or(exit::FAILED),
        exec::Ending::TimedOut => 124,
        exec::Ending::Cancelled => exit::CANCELLED,
    })
}

//! `keel flow run FILE --queue`: the run is stored as `queued` in the shared PostgreSQL
//! database and becomes a job that a `keel worker` runs (see `keel_queue::flows`); `keel flow
//! status RUN --follow` watches it from any machine.

use std::io::Write;
use std::path::Path;

use keel_config::Layer;
use tokio_util::sync::CancellationToken;

use super::exec::{executor, runtime, store_error};
use super::files::{Prepared, prepare};
use crate::args::ProviderArgs;
use crate::backend::{Backend, database_url};
use crate::{exit, setup};

pub fn queue(
    root: &Path,
    file: &Path,
    inputs: &[String],
    llm: &ProviderArgs,
    json: bool,
) -> anyhow::Result<u8> {
    let Prepared {
        flow,
        source,
        values,
    } = prepare(root, file, inputs)?;
    let config = setup::load_config(root, Layer::from_overrides(&[]))?;
    let Some(url) = database_url(&config) else {
        return Err(setup::UsageError(
            "--queue hands the run to `keel worker`s through a shared PostgreSQL database: set KEEL_DATABASE_URL (or `[database] url`), run `keel db migrate`, and start a worker with `keel worker`".into(),
        )
        .into());
    };
    let overrides = crate::launch::overrides(llm, None, None);
    let run_id = runtime()?.block_on(async {
        let backend = Backend::open(&config).await?;
        let exec = executor(
            &config,
            backend.flows(),
            backend.sessions(),
            overrides.clone(),
            None,
            std::sync::Arc::new(|_: &keel_flow::FlowEvent| {}),
            CancellationToken::new(),
        );
        let run_id = exec
            .queue(&flow, &source, root, &values)
            .await
            .map_err(|e| match e {
                keel_flow::FlowError::Store(s) => store_error(s),
                other => anyhow::Error::from(other),
            })?;
        let pool = keel_queue::connect(&url).await?;
        keel_queue::push_flow(&pool, keel_queue::FlowJob::new(&run_id, &overrides)).await?;
        anyhow::Ok(run_id)
    })?;
    let mut out = crate::out::stdout();
    if json {
        writeln!(
            out,
            "{}",
            serde_json::json!({"run_id": run_id, "flow": flow.name, "status": "queued"})
        )?;
    } else {
        writeln!(
            out,
            "queued flow run {run_id} ({}); a keel worker runs it — follow it with `keel flow status {run_id} --follow`",
            flow.name
        )?;
    }
    Ok(exit::COMPLETED)
}

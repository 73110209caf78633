//! Retries and the per-model fallback list, as a provider wrapping providers.
//!
//! [`ReliableProvider`] sends a request to its current model; a retryable failure — before the
//! first byte or in the middle of the stream — is retried with the [`RetryPolicy`]'s backoff,
//! announced in-stream as [`StreamEvent::Retry`]. When the model still fails after its retries
//! (or fails in a way retrying cannot fix), the next model of the fallback list takes over,
//! announced as [`StreamEvent::Fallback`]. After the last model, the last error is returned
//! as is, with the provider's message. A model that failed over stays skipped for
//! [`FALLBACK_COOL_DOWN`], so a dead main model does not cost every turn its retry budget.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream;

use crate::retry::RetryPolicy;
use crate::{ChatRequest, EventStream, LlmError, Provider, ProviderInfo, StreamEvent};

/// How long a failed-over model is skipped before it is tried first again.
pub const FALLBACK_COOL_DOWN: Duration = Duration::from_secs(600);

/// Retries each model, then falls over to the next one.
pub struct ReliableProvider {
    models: Vec<Arc<dyn Provider>>,
    policy: RetryPolicy,
    /// The model to start with, and since when (after a fallback).
    active: Arc<Mutex<(usize, Option<Instant>)>>,
}

impl std::fmt::Debug for ReliableProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReliableProvider")
            .field(
                "models",
                &self.models.iter().map(|m| m.info()).collect::<Vec<_>>(),
            )
            .field("policy", &self.policy)
            .finish()
    }
}

impl ReliableProvider {
    /// Wraps `main` with `policy`.
    pub fn new(main: Arc<dyn Provider>, policy: RetryPolicy) -> Self {
        Self {
            models: vec![main],
            policy,
            active: Arc::new(Mutex::new((0, None))),
        }
    }

    /// Adds models tried in order when the previous one fails after its retries.
    pub fn with_fallbacks(mut self, fallbacks: Vec<Arc<dyn Provider>>) -> Self {
        self.models.extend(fallbacks);
        self
    }

    /// The models, main first.
    pub fn models(&self) -> &[Arc<dyn Provider>] {
        &self.models
    }

    fn start_index(&self) -> usize {
        let Ok(mut active) = self.active.lock() else {
            return 0;
        };
        match active.1 {
            Some(since) if since.elapsed() >= FALLBACK_COOL_DOWN => {
                *active = (0, None);
                0
            }
            _ => active.0,
        }
    }

    fn remember(models: &Mutex<(usize, Option<Instant>)>, index: usize) {
        if let Ok(mut active) = models.lock() {
            *active = (index, (index > 0).then(Instant::now));
        }
    }
}

/// Where the wrapper stands while streaming.
struct State {
    models: Vec<Arc<dyn Provider>>,
    request: Arc<ChatRequest>,
    policy: RetryPolicy,
    active: Arc<Mutex<(usize, Option<Instant>)>>,
    /// Model indexes in the order they are tried: the start model, the rest of the list,
    /// then the ones before the start model.
    order: Vec<usize>,
    /// Position in `order`.
    position: usize,
    /// Retries spent on the current model.
    attempt: u32,
    /// Events the current attempt has delivered.
    delivered: usize,
    /// Whether the previous attempt's stream ended empty, before any event.
    previous_empty: bool,
    inner: Option<EventStream>,
    /// A notice to deliver before the next attempt, and the delay after it.
    pending: Option<(StreamEvent, Duration)>,
    /// The delay to wait before the next attempt (the notice has been delivered).
    wait: Option<Duration>,
    finished: bool,
}

impl State {
    fn current(&self) -> usize {
        self.order[self.position]
    }

    /// Decides what follows `error`: a retry, a fallback, or the end.
    fn after_error(&mut self, error: LlmError) -> Result<(), LlmError> {
        self.inner = None;
        self.attempt += 1;
        let empty = self.delivered == 0 && matches!(error, LlmError::Truncated(_));
        self.delivered = 0;
        let error = if empty && std::mem::replace(&mut self.previous_empty, true) {
            // The same empty reply twice: the server answers this request that way.
            LlmError::InvalidResponse(format!(
                "the server sent an empty reply stream twice for the same request ({error}); it is likely rejecting the request without saying why: check its log"
            ))
        } else {
            self.previous_empty = empty;
            error
        };
        if let Some(delay) = self.policy.delay_for(self.attempt, &error) {
            self.pending = Some((
                StreamEvent::Retry {
                    attempt: self.attempt,
                    attempts: self.policy.attempts_for(&error),
                    delay,
                    message: error.summary(),
                },
                delay,
            ));
            return Ok(());
        }
        if self.position + 1 < self.order.len() && falls_over(&error) {
            let from = label(self.models[self.current()].as_ref());
            self.position += 1;
            self.attempt = 0;
            self.previous_empty = false;
            let to = label(self.models[self.current()].as_ref());
            self.pending = Some((
                StreamEvent::Fallback {
                    from,
                    to,
                    message: error.to_string(),
                },
                Duration::ZERO,
            ));
            return Ok(());
        }
        Err(error)
    }
}

/// Whether another model might succeed where this one failed. A request Keel could not even
/// build, or a script that ran out, will not get better elsewhere.
fn falls_over(error: &LlmError) -> bool {
    !matches!(error, LlmError::ScriptExhausted(_))
}

fn label(p: &dyn Provider) -> String {
    let info = p.info();
    format!("{}/{}", info.provider, info.model)
}

impl Provider for ReliableProvider {
    fn info(&self) -> ProviderInfo {
        self.models[self.start_index().min(self.models.len() - 1)].info()
    }

    fn adaptations(&self) -> Vec<String> {
        self.models[self.start_index().min(self.models.len() - 1)].adaptations()
    }

    fn probe_template(
        &self,
    ) -> BoxFuture<'_, Option<Result<crate::provider::TemplateProbe, LlmError>>> {
        self.models[self.start_index().min(self.models.len() - 1)].probe_template()
    }

    fn token_scale(&self) -> Option<crate::tokens::TokenScale> {
        self.models[self.start_index().min(self.models.len() - 1)].token_scale()
    }

    fn fast_forward(&self, played: &[String]) {
        for m in &self.models {
            m.fast_forward(played);
        }
    }

    fn stream<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<EventStream, LlmError>> {
        let n = self.models.len();
        let start = self.start_index().min(n - 1);
        let state = State {
            models: self.models.clone(),
            request: Arc::new(request.clone()),
            policy: self.policy.clone(),
            active: self.active.clone(),
            order: (start..n).chain(0..start).collect(),
            position: 0,
            attempt: 0,
            delivered: 0,
            previous_empty: false,
            inner: None,
            pending: None,
            wait: None,
            finished: false,
        };
        Box::pin(async move {
            let stream = stream::unfold(state, |mut st| async move {
                loop {
                    if st.finished {
                        return None;
                    }
                    if let Some(delay) = st.wait.take() {
                        // The consumer already has the notice: wait, then try again.
                        tokio::time::sleep(delay).await;
                    }
                    if let Some((notice, delay)) = st.pending.take() {
                        st.wait = Some(delay);
                        return Some((Ok(notice), st));
                    }
                    let Some(inner) = st.inner.as_mut() else {
                        let provider = st.models[st.current()].clone();
                        match provider.stream(&st.request).await {
                            Ok(s) => st.inner = Some(s),
                            Err(e) => {
                                if let Err(e) = st.after_error(e) {
                                    st.finished = true;
                                    return Some((Err(e), st));
                                }
                            }
                        }
                        continue;
                    };
                    match inner.next().await {
                        Some(Ok(event)) => {
                            st.delivered += 1;
                            if matches!(event, StreamEvent::Finish { .. }) {
                                st.finished = true;
                                if st.position > 0 {
                                    ReliableProvider::remember(&st.active, st.current());
                                }
                            }
                            return Some((Ok(event), st));
                        }
                        Some(Err(e)) => {
                            if let Err(e) = st.after_error(e) {
                                st.finished = true;
                                return Some((Err(e), st));
                            }
                        }
                        None => {
                            let e = LlmError::Truncated(
                                "the reply stream closed without a final event".into(),
                            );
                            if let Err(e) = st.after_error(e) {
                                st.finished = true;
                                return Some((Err(e), st));
                            }
                        }
                    }
                }
            });
            Ok(stream.boxed())
        })
    }
}

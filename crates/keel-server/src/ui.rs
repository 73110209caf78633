//! The web UI: static ES modules and CSS from the repository's `web/` directory, embedded in
//! the binary at build time (no bundler, nothing to install next to the binary).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, PathParams};

/// `(name, content type, body)` of every UI file.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../../web/index.html"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../../web/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../web/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../web/api.js"),
    ),
    (
        "chat.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../web/chat.js"),
    ),
    (
        "phase.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../web/phase.js"),
    ),
    (
        "markdown.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../web/markdown.js"),
    ),
    (
        "sessions.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../web/sessions.js"),
    ),
    (
        "tasks.js",
        "text/javascript; charset=utf-8",
        include_str!("../../../web/tasks.js"),
    ),
];

/// The page's content security policy: its own scripts, styles and connections only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(name: &str) -> Option<Response> {
    let (_, content_type, body) = ASSETS.iter().find(|(n, _, _)| *n == name)?;
    let mut response = (StatusCode::OK, *body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    Some(response)
}

/// `GET /`: the page.
pub async fn index() -> Response {
    asset("index.html")
        .unwrap_or_else(|| ApiError::internal("the UI page is missing").into_response())
}

/// `GET /ui/{file}`: a module or stylesheet.
pub async fn file(PathParams(name): PathParams<String>) -> Response {
    asset(&name).unwrap_or_else(|| {
        ApiError::not_found(format!("the UI has no file `{name}`")).into_response()
    })
}

/// The names of the embedded files.
pub fn names() -> impl Iterator<Item = &'static str> {
    ASSETS.iter().map(|(n, _, _)| *n)
}

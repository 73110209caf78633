//! Who may talk to the server: the bearer token, the `Origin` check (no cross-site requests or
//! WebSocket hijacking from a page the user happens to visit) and the `Host` check of a
//! loopback server (no DNS rebinding).
//!
//! The policy: every server requires a token, generated when none is configured — on loopback
//! too, since any local process (a sandboxed command included) could otherwise drive it. A
//! generated token is printed in the start-up URL (`#token=…`, which the web UI picks up) and
//! stored readable only by the user ([`write_token_file`]). Tokens are compared in constant
//! time. The static web UI needs no token (it holds no data); everything under `/api/` does.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// Why the server cannot start with the given security settings.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error(
        "the server token is {0} characters long; use at least {MIN_TOKEN_CHARS} (or leave it unset to get a generated one)"
    )]
    ShortToken(usize),
    #[error("cannot generate a server token: {0}")]
    Random(String),
}

/// The shortest token accepted from configuration.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Access rules of one running server.
#[derive(Debug, Clone)]
pub struct Access {
    token: Option<String>,
    loopback: bool,
    allowed_origins: Vec<String>,
}

/// How the server's token came about (to tell the user once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOrigin {
    /// From configuration or `--token`.
    Configured,
    /// Generated at start-up (shown once).
    Generated(String),
}

impl Access {
    /// The rules for a server bound to `ip`: a configured `token` is required, and without
    /// one a generated token is (on every address, loopback included).
    pub fn for_bind(
        ip: IpAddr,
        token: Option<String>,
        allowed_origins: Vec<String>,
    ) -> Result<(Self, TokenOrigin), SecurityError> {
        let loopback = ip.is_loopback();
        let token = token.filter(|t| !t.trim().is_empty());
        let (token, origin) = match token {
            Some(t) => {
                let t = t.trim().to_string();
                if t.chars().count() < MIN_TOKEN_CHARS {
                    return Err(SecurityError::ShortToken(t.chars().count()));
                }
                (Some(t), TokenOrigin::Configured)
            }
            None => {
                let t = generate_token()?;
                (Some(t.clone()), TokenOrigin::Generated(t))
            }
        };
        let allowed_origins = allowed_origins
            .into_iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        Ok((
            Self {
                token,
                loopback,
                allowed_origins,
            },
            origin,
        ))
    }

    /// Whether API requests need the bearer token.
    pub fn requires_token(&self) -> bool {
        self.token.is_some()
    }

    /// Checks one request: host, origin, then (for `/api/`) the token.
    pub fn check(
        &self,
        headers: &HeaderMap,
        path: &str,
        query: Option<&str>,
    ) -> Result<(), ApiError> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if self.loopback && !host.is_empty() && !is_loopback_host(host) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                format!("this server only answers requests addressed to localhost, not `{host}`"),
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("").trim_end_matches('/');
            if !self.origin_allowed(origin, host) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden_origin",
                    format!(
                        "requests from the web page at `{origin}` are not allowed; only the server's own pages{} may call the API",
                        if self.allowed_origins.is_empty() {
                            " (add others with `[server] allowed_origins`)"
                        } else {
                            " and `[server] allowed_origins`"
                        }
                    ),
                ));
            }
        }
        if path.starts_with("/api/")
            && let Some(expected) = &self.token
        {
            // A URL's query string ends up in logs, proxies and browser history: it may carry
            // the token only where a browser cannot send a header (WebSocket and EventSource).
            let given = bearer(headers)
                .or_else(|| is_stream_route(path).then(|| query_token(query)).flatten());
            let ok = given.is_some_and(|g| bool::from(g.as_bytes().ct_eq(expected.as_bytes())));
            if !ok {
                return Err(ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "this server requires its token: send `Authorization: Bearer <token>` (or `?token=<token>` for WebSocket and event streams); the token was printed when the server started",
                ));
            }
        }
        Ok(())
    }

    fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let origin = origin.to_ascii_lowercase();
        if !host.is_empty() {
            let host = host.to_ascii_lowercase();
            if origin == format!("http://{host}") || origin == format!("https://{host}") {
                return true;
            }
        }
        self.allowed_origins.contains(&origin)
    }
}

/// Stores a generated token as `server-token` in `dir` (Keel's data directory, made 0700),
/// readable and writable by the user only, for local clients; returns the file's path.
pub fn write_token_file(dir: &Path, token: &str) -> std::io::Result<PathBuf> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    keel_store::private::tighten_private_dir(dir)?;
    let path = dir.join("server-token");
    // Removed first: an existing file (or a link planted in its place) keeps its own mode.
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(&path)?;
    #[cfg(unix)]
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(format!("{token}\n").as_bytes())?;
    Ok(path)
}

/// A 256-bit random token, hex-encoded.
pub fn generate_token() -> Result<String, SecurityError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| SecurityError::Random(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The two routes a browser opens without headers: `/api/v1/sessions/{id}/ws` and
/// `/api/v1/sessions/{id}/events/stream` (exactly these shapes, one segment for the id).
fn is_stream_route(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/api/v1/sessions/") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let id_ok = |id: &str| !id.is_empty() && id != "." && id != "..";
    match parts.as_slice() {
        [id, "ws"] | [id, "events", "stream"] => id_ok(id),
        _ => false,
    }
}

fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="))
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    let name = name.to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The middleware applying [`Access::check`] to every request.
pub async fn guard(State(access): State<Arc<Access>>, request: Request, next: Next) -> Response {
    let uri = request.uri();
    match access.check(request.headers(), uri.path(), uri.query()) {
        Ok(()) => next.run(request).await,
        Err(e) => {
            let unauthorized = e.status == StatusCode::UNAUTHORIZED;
            let mut response = e.into_response();
            if unauthorized {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                *k,
                HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("")),
            );
        }
        h
    }

    fn loopback() -> IpAddr {
        IpAddr::from([127, 0, 0, 1])
    }

    #[test]
    fn every_bind_without_a_token_generates_one_loopback_included() {
        for ip in [IpAddr::from([0, 0, 0, 0]), loopback()] {
            let (access, origin) =
                Access::for_bind(ip, None, vec![]).unwrap_or_else(|e| panic!("{e}"));
            let TokenOrigin::Generated(token) = origin else {
                panic!("no generated token on {ip}");
            };
            assert_eq!(token.len(), 64);
            assert!(access.requires_token());
            let h = headers(&[("host", "127.0.0.1:7700")]);
            assert_eq!(
                access
                    .check(&h, "/api/v1/sessions", None)
                    .map_err(|e| e.code),
                Err("unauthorized"),
                "{ip}: a request without the token is refused"
            );
        }
        let short = Access::for_bind(loopback(), Some("abc".into()), vec![]);
        assert!(matches!(short, Err(SecurityError::ShortToken(3))));
        assert_ne!(generate_token().ok(), generate_token().ok());
    }

    #[test]
    fn the_token_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("server-token"), "old").unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(
            dir.path().join("server-token"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        let path = write_token_file(dir.path(), "t0k3n").unwrap_or_else(|e| panic!("{e}"));
        let meta = std::fs::metadata(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let dir_mode = std::fs::metadata(dir.path())
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(dir_mode, 0o700, "Keel's data directory is made private");
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some("t0k3n\n")
        );
    }

    #[test]
    fn the_token_is_required_under_api_only() {
        let (access, _) = Access::for_bind(
            IpAddr::from([10, 0, 0, 1]),
            Some("s3cret-token-0123456789".into()),
            vec![],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let h = headers(&[("host", "10.0.0.1:7700")]);
        assert_eq!(
            access
                .check(&h, "/api/v1/sessions", None)
                .map_err(|e| e.code),
            Err("unauthorized")
        );
        assert!(
            access.check(&h, "/", None).is_ok(),
            "the UI page needs no token"
        );
        let h = headers(&[
            ("host", "10.0.0.1:7700"),
            ("authorization", "Bearer s3cret-token-0123456789"),
        ]);
        assert!(access.check(&h, "/api/v1/sessions", None).is_ok());
        let h = headers(&[
            ("host", "10.0.0.1:7700"),
            ("authorization", "Bearer s3cret-token-012345678X"),
        ]);
        assert!(access.check(&h, "/api/v1/sessions", None).is_err());
        let h = headers(&[("host", "10.0.0.1:7700")]);
        assert!(
            access
                .check(
                    &h,
                    "/api/v1/sessions/x/ws",
                    Some("since_seq=3&token=s3cret-token-0123456789")
                )
                .is_ok()
        );
    }

    #[test]
    fn the_query_token_is_accepted_on_streams_only() {
        let (access, _) =
            Access::for_bind(loopback(), Some("s3cret-token-0123456789".into()), vec![])
                .unwrap_or_else(|e| panic!("{e}"));
        let h = headers(&[("host", "127.0.0.1:7700")]);
        let q = Some("token=s3cret-token-0123456789");
        for stream in [
            "/api/v1/sessions/abc/ws",
            "/api/v1/sessions/abc/events/stream",
        ] {
            assert!(access.check(&h, stream, q).is_ok(), "{stream}");
        }
        for other in [
            "/api/v1/sessions",
            "/api/v1/sessions/abc",
            "/api/v1/sessions/abc/events",
            "/api/v1/sessions/abc/approve",
            "/api/v1/sessions/abc/messages",
            "/api/v1/tasks",
            "/api/v1/openapi.json",
            "/api/v1/sessions//ws",
            "/api/v1/sessions/a/b/ws",
            "/api/v1/sessions/abc/ws/x",
            "/api/v1/sessions/../ws",
        ] {
            assert_eq!(
                access.check(&h, other, q).map_err(|e| e.code),
                Err("unauthorized"),
                "{other} must need the Authorization header"
            );
        }
    }

    #[test]
    fn foreign_origins_and_hosts_are_refused() {
        let (access, _) = Access::for_bind(
            loopback(),
            Some("s3cret-token-0123456789".into()),
            vec!["https://keel.example.com/".into()],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let same = headers(&[
            ("host", "127.0.0.1:7700"),
            ("origin", "http://127.0.0.1:7700"),
            ("authorization", "Bearer s3cret-token-0123456789"),
        ]);
        assert!(access.check(&same, "/api/v1/sessions", None).is_ok());
        let listed = headers(&[
            ("host", "localhost:7700"),
            ("origin", "https://keel.example.com"),
            ("authorization", "Bearer s3cret-token-0123456789"),
        ]);
        assert!(access.check(&listed, "/api/v1/sessions", None).is_ok());
        let foreign = headers(&[
            ("host", "127.0.0.1:7700"),
            ("origin", "https://evil.example"),
        ]);
        assert_eq!(
            access
                .check(&foreign, "/api/v1/sessions", None)
                .map_err(|e| e.code),
            Err("forbidden_origin")
        );
        let other_port = headers(&[
            ("host", "127.0.0.1:7700"),
            ("origin", "http://127.0.0.1:9999"),
        ]);
        assert!(access.check(&other_port, "/api/v1/sessions", None).is_err());
        // DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host.
        let rebound = headers(&[
            ("host", "evil.example:7700"),
            ("origin", "http://evil.example:7700"),
        ]);
        assert_eq!(
            access
                .check(&rebound, "/api/v1/sessions", None)
                .map_err(|e| e.code),
            Err("forbidden_host")
        );
        for ok in ["localhost", "127.0.0.1:1", "[::1]:7700", "app.localhost:3"] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in ["example.com", "10.0.0.1:80", "[::2]:1", "127.0.0.1.nip.io"] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }
}

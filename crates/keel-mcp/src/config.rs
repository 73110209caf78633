//! Where MCP servers are defined: `[mcp]` in Keel's TOML (user layers only), a user-level
//! `mcp.json` beside the user config, and a project's Claude-Code-compatible `.mcp.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keel_tools::project::{CONFIG_LIMIT, Problem, ProjectDir, ProjectFileError, read_user_file};
use serde::{Deserialize, Serialize};

/// `[mcp]`: servers and how long they may take to start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// Seconds a server may take to start and list its tools before it counts as failed.
    pub startup_timeout_secs: u64,
    /// Seconds one tool call may take.
    pub call_timeout_secs: u64,
    /// `[mcp.servers.NAME]`.
    pub servers: BTreeMap<String, ServerConfig>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            startup_timeout_secs: 30,
            call_timeout_secs: 120,
            servers: BTreeMap::new(),
        }
    }
}

/// What Keel's approval policy treats an MCP server's tools as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectConfig {
    /// May do anything: asked about unless an approval rule allows it (the default).
    #[default]
    Unknown,
    /// Reads only: runs without asking.
    ReadOnly,
}

/// One server: a spawned process (`command`, `args`, `env`) or a streamable HTTP endpoint
/// (`type = "http"`, `url`, `headers`). The same shape as a `.mcp.json` entry, plus Keel's
/// own keys (`active`, `effect`, `disabled`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `stdio` (the default when `command` is set) or `http`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The program to run (stdio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables set for the server on top of the allowlisted environment; `${VAR}` is
    /// expanded from Keel's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The endpoint (http).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent with every request; `${VAR}` is expanded from Keel's environment
    /// (`Authorization = "Bearer ${TOKEN}"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Put this server's tools in the first-turn catalog instead of deferring them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub active: bool,
    /// What the approval policy treats the tools as.
    #[serde(default, skip_serializing_if = "is_default_effect")]
    pub effect: EffectConfig,
    /// `true` keeps the definition but never starts the server.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
}

fn is_default_effect(e: &EffectConfig) -> bool {
    *e == EffectConfig::Unknown
}

/// How a server is reached, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A spawned process speaking JSON-RPC on stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl ServerConfig {
    /// The validated transport, or what is wrong with the definition.
    pub fn transport(&self) -> Result<Transport, String> {
        let kind =
            self.kind
                .as_deref()
                .unwrap_or(if self.url.is_some() { "http" } else { "stdio" });
        match kind {
            "stdio" => {
                let command = self
                    .command
                    .clone()
                    .filter(|c| !c.trim().is_empty())
                    .ok_or("a stdio server needs `command`")?;
                Ok(Transport::Stdio {
                    command,
                    args: self.args.clone(),
                    env: self.env.clone(),
                })
            }
            "http" | "streamable-http" | "streamable_http" => {
                let raw = self
                    .url
                    .clone()
                    .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                    .ok_or("an http server needs `url` starting with http:// or https://")?;
                let url = checked_url(&raw)?;
                Ok(Transport::Http {
                    url,
                    headers: self.headers.clone(),
                })
            }
            "sse" => Err(
                "the legacy SSE transport is not supported; use `type = \"http\"` \
                          (streamable HTTP)"
                    .into(),
            ),
            other => Err(format!(
                "unknown server type `{other}`; use `stdio` or `http`"
            )),
        }
    }
}

/// Checks `raw` the way the HTTP client will parse it (WHATWG URL), so that the host Keel shows
/// the user is the host it connects to: `http://a.example\@b.example/` is a request to
/// `a.example` that a naive reading shows as `b.example` (red-team pass 3, R3-4). Refuses a
/// user or password in the URL, and `${NAME}` references anywhere but after the host (the
/// environment must not pick where the request goes). Returns `raw`; after expansion,
/// [`expanded_url`] gives the text to connect to.
pub fn checked_url(raw: &str) -> Result<String, String> {
    let rest = raw.split_once("://").map_or(raw, |(_, r)| r);
    let authority = rest.split(['/', '\\', '?', '#']).next().unwrap_or(rest);
    if authority.contains("${") {
        return Err(format!(
            "`url` {raw:?} takes its host from a variable; name the host in the file (variables may follow it, in the path)"
        ));
    }
    let parsed = url::Url::parse(&placeholders(raw))
        .map_err(|e| format!("`url` {raw:?} is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("`url` {raw:?} must start with http:// or https://"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "`url` {raw:?} holds a user or password; put credentials in `headers` (e.g. `Authorization = \"Bearer ${{TOKEN}}\"`) so Keel can show where they go"
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("`url` {raw:?} names no host"));
    }
    Ok(raw.to_string())
}

/// The host (and an explicit port) an endpoint URL a repository chose sends requests to — a
/// project's suggested `[llm] base_url` — when the URL reads as it is parsed: parsed as the HTTP
/// client parses it (WHATWG URL), `http`/`https`, no user or password, and its text the same as
/// the parsed URL's (up to a final `/`), so `http://127.0.0.1:18099\@api.openai.com/v1` (a
/// request to 127.0.0.1 that reads as api.openai.com) is refused (red-team pass 4, R4-13).
pub fn plain_endpoint_host(raw: &str) -> Result<String, String> {
    let parsed = url::Url::parse(raw).map_err(|e| format!("{raw:?} is not a valid URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{raw:?} must start with http:// or https://"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!("{raw:?} holds a user or password"));
    }
    let host = url_host(raw).ok_or_else(|| format!("{raw:?} names no host"))?;
    let shown = parsed.as_str();
    if shown != raw && shown.strip_suffix('/') != Some(raw) {
        return Err(format!(
            "{raw:?} does not read as it is parsed: requests go to {host} ({shown}); write the URL plainly"
        ));
    }
    Ok(host)
}

/// The URL to connect to once `template`'s variables are expanded into `expanded`: parsed as
/// the client parses it, and refused if its host is not the one [`url_host`] showed for the
/// template.
pub fn expanded_url(template: &str, expanded: &str) -> Result<String, String> {
    let parsed = url::Url::parse(expanded)
        .map_err(|e| format!("`url` is not a valid URL once its variables are expanded: {e}"))?;
    if url_host(expanded) != url_host(template) {
        return Err(format!(
            "`url` {template:?} goes to another host once its variables are expanded; name the host in the file"
        ));
    }
    Ok(parsed.to_string())
}

/// `${NAME}` references replaced by a neutral word, to parse a URL before expansion.
fn placeholders(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        match rest[i..].find('}') {
            Some(j) => {
                out.push('v');
                rest = &rest[i + j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The host (and an explicit port) a URL's requests go to, as the HTTP client reads it.
pub fn url_host(url: &str) -> Option<String> {
    let parsed = url::Url::parse(&placeholders(url)).ok()?;
    let host = parsed.host_str()?;
    Some(match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    })
}

/// Where a server definition came from; project definitions need the user's approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `[mcp.servers]` in the user's config or the user-level `mcp.json`.
    User(PathBuf),
    /// The workspace's `.mcp.json`, written by whoever wrote the project.
    Project(PathBuf),
}

impl Origin {
    /// The file it came from.
    pub fn path(&self) -> &Path {
        match self {
            Origin::User(p) | Origin::Project(p) => p,
        }
    }

    /// True for a project's `.mcp.json`.
    pub fn is_project(&self) -> bool {
        matches!(self, Origin::Project(_))
    }
}

/// A server definition with its name and origin.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerDef {
    pub name: String,
    pub config: ServerConfig,
    pub origin: Origin,
}

/// A `.mcp.json` file (Claude Code's format).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpJson {
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, ServerConfig>,
}

/// Reads the user's `mcp.json` (or any `.mcp.json` by path); a missing file is empty. A
/// symlink is followed (it is the user's file), but only a regular file is read, at most
/// 256 KB.
pub fn read_mcp_json(path: &Path) -> Result<McpJson, String> {
    parse_mcp_json(path, read_user_file(path, CONFIG_LIMIT))
}

/// Reads the project's `.mcp.json` as a project file: beneath the workspace, so a symlink
/// out of it, a FIFO, a device or a file over 256 KB is an error saying so — never followed,
/// waited on or read without end. A missing file is empty.
pub fn read_project_mcp_json(workspace: &Path) -> Result<McpJson, String> {
    let path = project_file(workspace);
    let read = ProjectDir::open(workspace)
        .map_err(|e| ProjectFileError {
            path: path.display().to_string(),
            problem: Problem::Io(e.to_string()),
        })
        .and_then(|p| p.read(".mcp.json", CONFIG_LIMIT));
    parse_mcp_json(&path, read)
}

fn parse_mcp_json(
    path: &Path,
    read: Result<Option<String>, ProjectFileError>,
) -> Result<McpJson, String> {
    let text = match read {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(McpJson::default()),
        Err(e) => return Err(format!("{} not read: it {}", path.display(), e.problem)),
    };
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "{} is not a valid .mcp.json ({{\"mcpServers\": {{NAME: {{command, args, env}} | {{type: \"http\", url, headers}}}}}}): {e}",
            path.display()
        )
    })
}

/// The project's `.mcp.json`.
pub fn project_file(workspace: &Path) -> PathBuf {
    workspace.join(".mcp.json")
}

/// The user-level `mcp.json` in Keel's user config directory.
pub fn user_file(user_config_dir: &Path) -> PathBuf {
    user_config_dir.join("mcp.json")
}

/// Every defined server: TOML `[mcp.servers]` first, then the user-level `mcp.json`, then
/// the project's `.mcp.json`; a name defined by the user wins over the project's. Problems
/// with a file come back as warnings, never as a refusal to run.
pub fn collect(
    config: &McpConfig,
    config_source: &Path,
    user_config_dir: Option<&Path>,
    workspace: &Path,
) -> (Vec<ServerDef>, Vec<String>) {
    let mut out: BTreeMap<String, ServerDef> = BTreeMap::new();
    let mut warnings = Vec::new();
    for (name, c) in &config.servers {
        out.insert(
            name.clone(),
            ServerDef {
                name: name.clone(),
                config: c.clone(),
                origin: Origin::User(config_source.to_path_buf()),
            },
        );
    }
    let mut files = Vec::new();
    if let Some(dir) = user_config_dir {
        files.push((user_file(dir), false));
    }
    files.push((project_file(workspace), true));
    for (path, project) in files {
        let read = if project {
            read_project_mcp_json(workspace)
        } else {
            read_mcp_json(&path)
        };
        match read {
            Ok(file) => {
                for (name, c) in file.mcp_servers {
                    if out.contains_key(&name) {
                        continue;
                    }
                    let origin = if project {
                        Origin::Project(path.clone())
                    } else {
                        Origin::User(path.clone())
                    };
                    out.insert(
                        name.clone(),
                        ServerDef {
                            name,
                            config: c,
                            origin,
                        },
                    );
                }
            }
            Err(e) => warnings.push(e),
        }
    }
    (out.into_values().collect(), warnings)
}

/// Expands `${VAR}` from `env`; an unset variable is an error naming it.
pub fn expand(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unclosed `${{` in `{value}`"));
        };
        let name = &after[..end];
        match env(name) {
            Some(v) => out.push_str(&v),
            None => return Err(format!("the environment variable `{name}` is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_url_is_shown_and_used_as_the_client_reads_it() {
        // Red-team pass 3, R3-4: `\` ends the authority for the HTTP client, so the request
        // (and the bearer token) went to 127.0.0.2:18081 while the approval said localhost.
        let server = |url: &str| ServerConfig {
            url: Some(url.into()),
            ..ServerConfig::default()
        };
        let Ok(Transport::Http { url, .. }) =
            server("http://127.0.0.2:18081\\@localhost:18080/mcp").transport()
        else {
            panic!("an http server");
        };
        assert_eq!(url_host(&url).as_deref(), Some("127.0.0.2:18081"), "{url}");
        let sent = expanded_url(&url, &url).unwrap_or_else(|e| panic!("{e}"));
        assert!(sent.starts_with("http://127.0.0.2:18081/"), "{sent}");
        for bad in [
            "https://attacker.example:443@api.github.com/mcp",
            "https://user:pw@api.github.com/mcp",
            "http://",
            "https://exa mple.com/",
            "https://${HOST}/mcp",
            "https://api.github.com${X}/mcp",
        ] {
            assert!(server(bad).transport().is_err(), "{bad}");
        }
        assert_eq!(
            url_host("https://api.github.com/mcp").as_deref(),
            Some("api.github.com")
        );
        // Variables after the host are fine, and cannot move it.
        let t = "https://api.example.com/v1/${PROJECT}/mcp";
        assert!(server(t).transport().is_ok());
        assert!(expanded_url(t, "https://api.example.com/v1/p/mcp").is_ok());
        assert!(expanded_url(t, "https://evil.example/v1/p/mcp").is_err());
    }

    #[test]
    fn mcp_json_in_claude_code_format() {
        let json = r#"{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}},
            "web": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${T}"}}
        }}"#;
        let f: McpJson = serde_json::from_str(json).unwrap_or_default();
        assert_eq!(f.mcp_servers.len(), 2);
        let fs = f.mcp_servers.get("fs").map(ServerConfig::transport);
        assert!(matches!(fs, Some(Ok(Transport::Stdio { .. }))), "{fs:?}");
        let web = f.mcp_servers.get("web").map(ServerConfig::transport);
        assert!(matches!(web, Some(Ok(Transport::Http { .. }))), "{web:?}");
    }

    #[test]
    fn bad_definitions_say_what_is_missing() {
        let c = ServerConfig::default();
        assert!(c.transport().err().unwrap_or_default().contains("command"));
        let c = ServerConfig {
            kind: Some("sse".into()),
            ..ServerConfig::default()
        };
        assert!(c.transport().err().unwrap_or_default().contains("http"));
    }

    #[test]
    fn expands_variables() {
        let env = |k: &str| (k == "T").then(|| "abc".to_string());
        assert_eq!(expand("Bearer ${T}", &env), Ok("Bearer abc".into()));
        assert!(expand("${NOPE}", &env).is_err());
        assert_eq!(expand("plain", &env), Ok("plain".into()));
    }
}

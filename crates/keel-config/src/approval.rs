//! `[approval]`: which tool calls wait for a person's yes or no.

use serde::{Deserialize, Serialize};

/// When tool calls need a person's approval.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Ask nothing; run what the sandbox allows (headless `keel run`'s default).
    Never,
    /// Ask before destructive, network and unknown commands (the interactive default).
    #[default]
    OnRequest,
    /// Ask before everything but reading.
    Untrusted,
}

impl ApprovalPolicy {
    /// `never`, `on-request` or `untrusted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Never => "never",
            ApprovalPolicy::OnRequest => "on-request",
            ApprovalPolicy::Untrusted => "untrusted",
        }
    }

    /// Parses a policy name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "never" => Some(ApprovalPolicy::Never),
            "on-request" => Some(ApprovalPolicy::OnRequest),
            "untrusted" => Some(ApprovalPolicy::Untrusted),
            _ => None,
        }
    }
}

impl std::fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[approval]`. Rules name a tool (`"create_file"`) or a tool and a command prefix
/// (`"run_command:git push"`). `deny` wins over `allow`, `allow` over `ask`, and all three over
/// the policy. A project's `.keel/config.toml` may only make this stricter (its rows in
/// [`super::PROJECT_RULES`]): its `policy` counts only when stricter, its `ask` and `deny` are
/// added, its `allow` may only drop entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalConfig {
    /// `untrusted`, `on-request` or `never` (`keel run --approval` overrides it; headless
    /// runs default to `never`).
    pub policy: ApprovalPolicy,
    /// Calls that run without asking.
    pub allow: Vec<String>,
    /// Calls that always ask (unless the policy is `never`).
    pub ask: Vec<String>,
    /// Calls that never run.
    pub deny: Vec<String>,
    /// Seconds a call waits for an answer before it is denied.
    pub timeout_secs: u64,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        Self {
            policy: ApprovalPolicy::OnRequest,
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            timeout_secs: 600,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;
    use crate::Layer;

    use super::*;

    fn load(user: &str, project: &str) -> Result<Config, crate::ConfigError> {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join(".keel")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join(".keel/config.toml"), project)
            .unwrap_or_else(|e| panic!("{e}"));
        let user_file = dir.path().join("user.toml");
        std::fs::write(&user_file, user).unwrap_or_else(|e| panic!("{e}"));
        Config::load(
            Some(&user_file),
            dir.path(),
            Vec::new(),
            Layer::from_overrides(&[]),
        )
    }

    #[test]
    fn a_project_may_only_make_approval_stricter() {
        let c = load(
            "[approval]\npolicy = \"on-request\"\nallow = [\"run_command:make\", \"run_command:ls\"]\n",
            "[approval]\npolicy = \"never\"\nallow = [\"run_command:rm\", \"run_command:ls\"]\nask = [\"create_file\"]\ndeny = [\"run_command:git push\"]\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.approval.policy,
            ApprovalPolicy::OnRequest,
            "never is looser"
        );
        // The project may only drop allow entries: `rm` was not allowed below.
        assert_eq!(c.approval.allow, vec!["run_command:ls".to_string()]);
        assert_eq!(c.approval.ask, vec!["create_file".to_string()]);
        assert_eq!(c.approval.deny, vec!["run_command:git push".to_string()]);
        let refused: Vec<&str> = c.warnings.iter().map(|w| w.key.as_str()).collect();
        assert!(refused.contains(&"approval.policy"), "{refused:?}");
        assert!(refused.contains(&"approval.allow"), "{refused:?}");

        let c = load("", "[approval]\npolicy = \"untrusted\"\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.approval.policy, ApprovalPolicy::Untrusted);
        assert!(c.warnings.is_empty());
        // A bad project value names the file.
        let err = load("", "[approval]\npolicy = \"sometimes\"\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("config.toml"), "{err}");
    }
}

//! The verdict on a command line: its [`SafetyClass`] (the most severe of its parts') and the
//! [`Analysis`] that explains it, lists its simple commands for rules, and names the project
//! files a test run's judgement read.

use serde::{Deserialize, Serialize};

use super::project::Source;
use super::rules::RuleMatch;
use super::words::Word;

/// What a command may do, from harmless to harmful. A command's class is the most severe of
/// its parts'.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum SafetyClass {
    /// Only reads files and prints.
    #[default]
    ReadOnly,
    /// Creates or changes files (in the workspace or temp directories).
    WritesWorkspace,
    /// Talks to the network (downloads, pushes, remote calls).
    Network,
    /// Cannot be judged statically: may do anything.
    Unknown,
    /// Deletes or overwrites data, rewrites history, writes outside the workspace, or ends
    /// processes.
    Destructive,
}

impl SafetyClass {
    /// `read_only`, `writes_workspace`, `network`, `unknown` or `destructive`.
    pub fn as_str(self) -> &'static str {
        match self {
            SafetyClass::ReadOnly => "read_only",
            SafetyClass::WritesWorkspace => "writes_workspace",
            SafetyClass::Network => "network",
            SafetyClass::Unknown => "unknown",
            SafetyClass::Destructive => "destructive",
        }
    }
}

impl std::fmt::Display for SafetyClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict on one command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analysis {
    pub class: SafetyClass,
    /// Why: which word, which redirection. For read-only commands, the programs seen.
    pub reasons: Vec<String>,
    /// Every simple command found (words as written when not literal), for deny-lists.
    #[serde(skip)]
    pub commands: Vec<Vec<String>>,
    /// The same commands' words, with what is known about each.
    #[serde(skip)]
    pub(crate) words: Vec<Vec<Word>>,
    /// The project files a test run's judgement read ([`CommandSafety::classify_test_run`]).
    #[serde(skip)]
    pub sources: Vec<Source>,
    /// Project files the judgement looked for and did not find (a `GNUmakefile` make would
    /// prefer, an optional include): part of the fingerprint, so one appearing later ends an
    /// approval (R6-14).
    #[serde(skip)]
    pub absent: Vec<std::path::PathBuf>,
    /// An interpreter runs code given inline (`python3 -c "import gen; gen.main()"`, `node -e`),
    /// a module (`python3 -m pkg`) or code piped in: what it loads from the workspace
    /// (`import gen`) is named nowhere Keel can fingerprint, so a caller remembering an
    /// approval of it treats the workspace's code as part of what was approved (red-team
    /// pass 6, R6-5).
    #[serde(skip)]
    pub runs_inline_code: bool,
    /// What the line changes among the workspace's installed dependencies: a package
    /// manager's install (`` `pip install -e .` ``), and each write it names inside a
    /// dependency tree (`` writes `.venv/…/zz.pth` ``). A person's approval lifts the
    /// dependency-tree protections for the command only when this is not empty — and the
    /// approval prompt's reason then says so (red-team pass 9, R9-13).
    #[serde(skip)]
    pub changes_installed: Vec<String>,
}

impl Analysis {
    /// True when the command only reads.
    pub fn is_read_only(&self) -> bool {
        self.class == SafetyClass::ReadOnly
    }

    /// The first deny-list entry (word prefix, e.g. `"git push"`) that one of the command's
    /// simple commands starts with.
    pub fn denied_by<'a>(&self, deny: &'a [String]) -> Option<&'a str> {
        deny.iter()
            .map(String::as_str)
            .find(|entry| self.rule_match(entry) == RuleMatch::Yes)
    }

    /// A short hash of the project files the judgement read, and of those it looked for and
    /// did not find (`None` when it read none): a caller that remembers an approval keys it
    /// with this, so a changed script — or a new file the program would read first — asks
    /// again.
    pub fn sources_fingerprint(&self) -> Option<String> {
        if self.sources.is_empty() && self.absent.is_empty() {
            return None;
        }
        let mut text = String::new();
        for s in &self.sources {
            text.push_str(&format!(
                "{}\0{}\0{:016x}\n",
                s.path.display(),
                s.what,
                s.hash
            ));
        }
        for path in &self.absent {
            text.push_str(&format!("{}\0absent\n", path.display()));
        }
        // A collision-resistant digest: a remembered approval is keyed by it, and a 32-bit
        // FNV of FNVs was forged by brute force over a comment (red-team pass 8, R8-13).
        let mut fp = crate::trust::sha256_hex(text.as_bytes());
        fp.truncate(16);
        Some(fp)
    }

    /// What a person is shown beside the command about the project files it was judged by:
    /// ` [reads package.json (scripts.test); #1a2b3c4d]` (` [#1a2b3c4d]` when it found none of
    /// the files it looked for); empty when it looked for none.
    pub fn sources_note(&self) -> String {
        let Some(fp) = self.sources_fingerprint() else {
            return String::new();
        };
        let files: Vec<String> = self
            .sources
            .iter()
            .map(|s| format!("{} ({})", s.path.display(), s.what))
            .collect();
        let files: String = files.join(", ").chars().take(200).collect();
        if files.is_empty() {
            format!(" [#{fp}]")
        } else {
            format!(" [reads {files}; #{fp}]")
        }
    }

    /// How the rule `rule` (a word prefix, `"git push"`) matches the line's simple commands,
    /// nested ones included: [`RuleMatch::Maybe`] when a word it would compare is not known
    /// before the line runs. A line that does more than read may also run the rule's command
    /// through a program Keel does not know as a wrapper (`taskset 1 rm f`, `script -c "rm
    /// f"`): the rule's words anywhere after a program make a possible match (pass 2, R10).
    pub fn rule_match(&self, rule: &str) -> RuleMatch {
        match super::rules::match_any(rule, &self.words) {
            RuleMatch::No if !self.is_read_only() => {
                super::rules::match_as_payload(rule, &self.words)
            }
            found => found,
        }
    }
}

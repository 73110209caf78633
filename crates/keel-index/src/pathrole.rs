//! What a file is for, from its path: source, tests, fixtures, vendored or generated code,
//! docs and examples. Search ranks the non-source kinds below the source they exercise or
//! describe; the codemap leaves them out of its key files.

/// The role of a file in its project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathRole {
    Source,
    /// Test code (`tests/`, `test_x.py`, `x_test.go`, `x.spec.ts`, `__tests__/`).
    Test,
    /// Data and projects the tests run on (`tests/fixtures/`, `testdata/`, `tests/roots/`).
    Fixture,
    /// Third-party code copied in (`vendor/`, `third_party/`, `node_modules/`, `_vendor/`,
    /// a web library under its release's name: `jquery-3.5.1.js`).
    Vendored,
    /// Generated code (`*_pb2.py`, `*.pb.go`, `*.generated.ts`, `*.min.js`).
    Generated,
    /// Documentation and examples (`docs/`, `examples/`, `*.md`, `*.rst`).
    Docs,
    /// Data, configuration and package metadata (`*.json`, `*.yaml`, `setup.cfg`, `setup.py`,
    /// `PKG-INFO`, lock files): rarely where a reported behaviour is fixed.
    Data,
}

impl PathRole {
    /// Classifies a workspace-relative path (`/` separators).
    pub fn of(path: &str) -> PathRole {
        let lower = path.to_ascii_lowercase();
        let segs: Vec<&str> = lower.split('/').collect();
        let (dirs, name) = segs.split_at(segs.len().saturating_sub(1));
        let name = name.first().copied().unwrap_or("");
        let dir_is = |names: &[&str]| dirs.iter().any(|d| names.contains(d));
        if dir_is(&[
            "vendor",
            "vendored",
            "_vendor",
            "third_party",
            "thirdparty",
            "node_modules",
            "external",
            "externals",
            "extern",
        ]) || vendored_packages(dirs)
            || versioned_asset(name)
        {
            return PathRole::Vendored;
        }
        if name.ends_with("_pb2.py")
            || name.ends_with("_pb2_grpc.py")
            || name.ends_with(".pb.go")
            || name.contains(".generated.")
            || name.ends_with(".min.js")
            || name.ends_with("_generated.rs")
            || name == "_version.py"
            || dir_is(&["generated", "__generated__"])
        {
            return PathRole::Generated;
        }
        let in_tests = dir_is(&[
            "test",
            "tests",
            "testing",
            "__tests__",
            "spec",
            "specs",
            "unittests",
        ]);
        if dir_is(&[
            "fixtures",
            "fixture",
            "testdata",
            "test_data",
            "snapshots",
            "__snapshots__",
            "roots",
            "cassettes",
        ]) && (in_tests || dir_is(&["fixtures", "testdata", "test_data"]))
        {
            return PathRole::Fixture;
        }
        let stem = name.split('.').next().unwrap_or(name);
        let test_name = stem.starts_with("test_")
            || stem == "test"
            || stem == "tests"
            || stem == "conftest"
            || stem.ends_with("_test")
            || stem.ends_with("_tests")
            || stem.ends_with("_spec")
            || name.contains(".test.")
            || name.contains(".spec.")
            || (stem.starts_with("test") && stem.len() > 4 && name.ends_with(".java"))
            || (stem.ends_with("test") && name.ends_with(".java"));
        if in_tests || test_name {
            return PathRole::Test;
        }
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        if dir_is(&[
            "doc",
            "docs",
            "documentation",
            "example",
            "examples",
            "sample",
            "samples",
            "demo",
            "demos",
            "tutorial",
            "tutorials",
            "benchmarks",
            "bench",
            "asv_bench",
        ]) || matches!(ext, "md" | "rst" | "txt" | "adoc")
            || is_project_record(name)
            || is_message_catalog(name)
        {
            return PathRole::Docs;
        }
        if matches!(
            ext,
            "json"
                | "yaml"
                | "yml"
                | "toml"
                | "cfg"
                | "ini"
                | "conf"
                | "xml"
                | "csv"
                | "tsv"
                | "lock"
                | "properties"
                | "plist"
        ) || matches!(
            name,
            "pkg-info" | "manifest.in" | "metadata" | "record" | "setup.py"
        ) {
            return PathRole::Data;
        }
        PathRole::Source
    }

    /// How much of its score a file of this role keeps (1.0 for source). Tests and fixtures
    /// keep theirs when the query is about tests; docs keep more when the query is not a
    /// report of behaviour.
    pub fn weight(self, about_tests: bool, behaviour: bool) -> f64 {
        match self {
            PathRole::Source => 1.0,
            PathRole::Test if about_tests => 1.0,
            PathRole::Fixture if about_tests => 0.8,
            PathRole::Test => 0.45,
            PathRole::Fixture => 0.3,
            PathRole::Vendored => 0.4,
            PathRole::Generated => 0.4,
            PathRole::Docs if behaviour => 0.5,
            PathRole::Docs => 0.85,
            PathRole::Data if behaviour => 0.6,
            PathRole::Data => 1.0,
        }
    }

    /// A short word for explanations (`test file`).
    pub fn label(self) -> &'static str {
        match self {
            PathRole::Source => "source",
            PathRole::Test => "test file",
            PathRole::Fixture => "test fixture",
            PathRole::Vendored => "vendored code",
            PathRole::Generated => "generated code",
            PathRole::Docs => "docs or example",
            PathRole::Data => "data or config",
        }
    }
}

/// A web library copied in at a release, its version in its name (`jquery-3.5.1.js`,
/// `underscore-1.13.1.min.js`, `bootstrap-4.0.0.css`).
fn versioned_asset(name: &str) -> bool {
    let Some(stem) = [".min.js", ".js", ".min.css", ".css", ".mjs"]
        .iter()
        .find_map(|e| name.strip_suffix(e))
    else {
        return false;
    };
    let Some((_, version)) = stem.rsplit_once(['-', '_']) else {
        return false;
    };
    let version = version.strip_prefix('v').unwrap_or(version);
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Other projects copied into a package's `packages/` directory
/// (`requests/packages/urllib3/…`); a top-level `packages/` holds a monorepo's own packages.
fn vendored_packages(dirs: &[&str]) -> bool {
    dirs.iter().skip(1).any(|d| *d == "packages")
}

/// A gettext message catalog (`sphinx.po`, `django.pot`): the project's user-visible
/// messages again, once per language.
pub fn is_message_catalog(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".po") || lower.ends_with(".pot")
}

/// A project's record kept beside its code under a bare conventional name (`CHANGES`,
/// `AUTHORS`, `.mailmap`, `CHANGES.old`): prose about the project, which matches a report's
/// words everywhere (a changelog holds every earlier fix's description).
fn is_project_record(name: &str) -> bool {
    let stem = name.strip_suffix(".old").unwrap_or(name);
    matches!(
        stem,
        "changes"
            | "changelog"
            | "history"
            | "news"
            | "authors"
            | "contributors"
            | "license"
            | "licence"
            | "copying"
            | "readme"
            | ".mailmap"
            | "thanks"
            | "notice"
            | "maintainers"
            | "codeowners"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_paths() {
        use PathRole::*;
        for (path, want) in [
            ("src/sqlfluff/core/parser/helpers.py", Source),
            ("pydicom/tests/test_json.py", Test),
            ("test/core/linter_test.py", Test),
            ("tests/roots/test-ext-autodoc/target/__init__.py", Fixture),
            ("test/fixtures/linter/indentation_errors.sql", Fixture),
            ("internal/store/store_test.go", Test),
            ("web/src/chart.spec.ts", Test),
            ("web/src/__tests__/chart.ts", Test),
            ("conftest.py", Test),
            ("src/main/java/com/acme/Parser.java", Source),
            ("src/test/java/com/acme/ParserTest.java", Test),
            ("vendor/github.com/x/y/y.go", Vendored),
            ("pkg/api/v1/api.pb.go", Generated),
            ("docs/conf.py", Docs),
            ("examples/plot_grid.py", Docs),
            ("README.md", Docs),
            ("moto/support/resources/checks.json", Data),
            ("src/sqlfluff/core/default_config.cfg", Data),
            ("PKG-INFO", Data),
            ("Cargo.lock", Data),
            ("setup.py", Data),
            ("dask/_version.py", Generated),
            ("src/testing_utils.rs", Source),
            ("src/contest.py", Source),
            ("CHANGES", Docs),
            ("CHANGES.old", Docs),
            ("AUTHORS", Docs),
            (".mailmap", Docs),
            ("pkg/history.py", Source),
            ("pkg/changes/diff.py", Source),
            ("sphinx/themes/basic/static/jquery-3.5.1.js", Vendored),
            ("static/underscore-1.13.1.min.js", Vendored),
            ("web/bootstrap_v4.0.css", Vendored),
            ("web/app-main.js", Source),
            ("web/app-1.js", Source),
        ] {
            assert_eq!(PathRole::of(path), want, "{path}");
        }
        assert!(Test.weight(false, true) < Source.weight(false, true));
        assert_eq!(Test.weight(true, true), 1.0);
    }
}

//! Query parsing on real issue texts.
use super::*;

/// marshmallow-code/marshmallow#1342 (SWE-bench dev marshmallow-1343), shortened.
const PYTHON: &str = r#"[version 2.20.0] TypeError: 'NoneType' object is not subscriptable
After update from version 2.19.5 to 2.20.0 I got error for code like:

```python
from marshmallow import Schema, fields, validates

class Bar(Schema):
    value = fields.String()

    @validates('value')  # <- issue here
    def validate_value(self, value):
        pass
```

```
Traceback (most recent call last):
  File "/_/bug_mschema.py", line 19, in <module>
    'bar': 'invalid',
  File "/_/env/lib/python3.7/site-packages/marshmallow/schema.py", line 628, in validate
    _, errors = self._do_load(data, many, partial=partial, postprocess=False)
  File "/_/env/lib/python3.7/site-packages/marshmallow/fields.py", line 465, in _deserialize
    data, errors = self.schema.load(value)
  File "/_/env/lib/python3.7/site-packages/marshmallow/schema.py", line 894, in _invoke_field_validators
    value = data[field_obj.attribute or field_name]
TypeError: 'NoneType' object is not subscriptable
```
"#;

/// `list` holds `name` (the list is printed when not).
fn has(list: &[String], name: &str) {
    assert!(list.iter().any(|i| i == name), "{name}: {list:?}");
}

/// `list` does not hold `name`.
fn lacks(list: &[String], name: &str) {
    assert!(!list.iter().any(|i| i == name), "{name}: {list:?}");
}

#[test]
fn only_the_innermost_frames_source_line_counts_as_a_snippet() {
    let r = Report::parse(PYTHON);
    // `_do_load` and `load` are called from outer frames (the traceback already weighs
    // them); `field_obj` is on the failing line.
    lacks(&r.block_identifiers, "_do_load");
    has(&r.block_identifiers, "field_obj");
    // The reporter's own code block still counts.
    has(&r.block_identifiers, "validate_value");
}

#[test]
fn python_traceback_innermost_frame_first() {
    let r = Report::parse(PYTHON);
    assert!(r.long);
    assert_eq!(
        r.title,
        "[version 2.20.0] TypeError: 'NoneType' object is not subscriptable"
    );
    let frames: Vec<(&str, Option<usize>, Option<&str>)> = r
        .frames
        .iter()
        .map(|f| (f.path.as_str(), f.line, f.function.as_deref()))
        .collect();
    assert_eq!(
        frames[0],
        (
            "/_/env/lib/python3.7/site-packages/marshmallow/schema.py",
            Some(894),
            Some("_invoke_field_validators")
        )
    );
    assert_eq!(frames.len(), 4);
    assert_eq!(frames[3], ("/_/bug_mschema.py", Some(19), None));
    assert!(r.errors.contains(&ErrorLine {
        kind: Some("TypeError".into()),
        message: "'NoneType' object is not subscriptable".into()
    }));
    // Snippet identifiers, dotted names split, keywords and builtins left out.
    assert!(r.block_identifiers.iter().any(|i| i == "validates"));
    assert!(r.block_identifiers.iter().any(|i| i == "validate_value"));
    assert!(
        r.dotted
            .contains(&vec!["fields".to_string(), "String".to_string()])
    );
    assert!(
        !r.block_identifiers
            .iter()
            .any(|i| i == "def" || i == "self" || i == "pass")
    );
    assert!(!r.about_tests);
}

#[test]
fn rust_panics_and_backtraces() {
    // The current format (Rust ≥ 1.73) and the old one.
    let r = Report::parse(
        "keel crashes on an empty config\n\nthread 'main' panicked at crates/keel-config/src/load.rs:88:14:\ncalled `Option::unwrap()` on a `None` value\nstack backtrace:\n   0: rust_begin_unwind\n   1: keel_config::load::parse_layer\n             at ./crates/keel-config/src/load.rs:88:14\n   2: keel_cli::main\n             at ./crates/keel-cli/src/main.rs:40:5\n",
    );
    assert_eq!(r.frames[0].path, "crates/keel-config/src/load.rs");
    assert_eq!(r.frames[0].line, Some(88));
    assert_eq!(r.frames[1].function.as_deref(), Some("parse_layer"));
    assert_eq!(r.frames[2].path, "./crates/keel-cli/src/main.rs");
    assert_eq!(r.frames[2].function.as_deref(), Some("main"));
    let old = Report::parse(
        "thread 'main' panicked at 'index out of bounds: the len is 3 but the index is 7', src/buffer.rs:120:9\nnote: run with `RUST_BACKTRACE=1`",
    );
    assert_eq!(old.frames[0].path, "src/buffer.rs");
    assert_eq!(old.frames[0].line, Some(120));
    assert_eq!(
        old.errors[0].message,
        "index out of bounds: the len is 3 but the index is 7"
    );
}

#[test]
fn js_stack_traces() {
    let r = Report::parse(
        "Crash when rendering an empty chart\n\nTypeError: Cannot read properties of undefined (reading 'length')\n    at renderBars (/home/u/app/web/src/chart.ts:42:17)\n    at Object.renderChart (webpack:///./web/src/chart.ts:10:3)\n    at file:///home/u/app/web/src/main.ts:7:1\n",
    );
    assert_eq!(r.frames.len(), 3);
    assert_eq!(r.frames[0].path, "/home/u/app/web/src/chart.ts");
    assert_eq!(r.frames[0].line, Some(42));
    assert_eq!(r.frames[0].function.as_deref(), Some("renderBars"));
    assert_eq!(r.frames[1].function.as_deref(), Some("renderChart"));
    assert_eq!(r.frames[2].path, "/home/u/app/web/src/main.ts");
    assert_eq!(r.errors[0].kind.as_deref(), Some("TypeError"));
}

#[test]
fn go_panics() {
    let r = Report::parse(
        "store: nil map on Get after Close\n\npanic: assignment to entry in nil map\n\ngoroutine 1 [running]:\nexample.com/app/internal/store.(*Store).Put(0xc000010018, {0x4b6f2e, 0x3})\n\t/home/u/app/internal/store/store.go:31 +0x4c\nmain.main()\n\t/home/u/app/main.go:12 +0x2a\nexit status 2\n",
    );
    assert_eq!(r.errors[0].message, "assignment to entry in nil map");
    assert_eq!(r.frames[0].path, "/home/u/app/internal/store/store.go");
    assert_eq!(r.frames[0].line, Some(31));
    assert_eq!(r.frames[0].function.as_deref(), Some("Put"));
    assert_eq!(r.frames[1].function.as_deref(), Some("main"));
}

#[test]
fn spans_messages_and_titles() {
    // pydicom/pydicom#1693 (SWE-bench dev pydicom-1694), shortened.
    let r = Report::parse(
        "Dataset.to_json_dict can still generate exceptions when suppress_invalid_tags=True\n**Describe the bug**\nI'm using `Dataset.to_json_dict(suppress_invalid_tags=True)` and can live with losing invalid tags.\n\nMy thought was simply to move the `data_element = self[key]` into the try/catch block.\n    raise TypeError(\"Could not convert value to integer without loss\")\nTypeError: Could not convert value to integer without loss\n",
    );
    for want in [
        "Dataset",
        "to_json_dict",
        "suppress_invalid_tags",
        "data_element",
    ] {
        assert!(
            r.span_identifiers.iter().any(|i| i == want),
            "{want}: {r:?}"
        );
    }
    assert!(
        r.dotted
            .contains(&vec!["Dataset".to_string(), "to_json_dict".to_string()])
    );
    assert_eq!(
        r.errors.last().map(|e| e.message.as_str()),
        Some("Could not convert value to integer without loss")
    );
    // Prose words are not identifiers.
    assert!(
        !r.span_identifiers
            .iter()
            .any(|i| i == "thought" || i == "using")
    );
    // A message in an inline span: sqlfluff/sqlfluff#1758.
    let r = Report::parse(
        "dbt fix wipes the file\n\nReported error: `UnicodeEncodeError: 'charmap' codec can't encode character`\n",
    );
    assert_eq!(r.errors[0].kind.as_deref(), Some("UnicodeEncodeError"));
    // Tests in the title.
    assert!(Report::parse("test_client fixtures leak a temp dir").about_tests);
    let short = Report::parse("parse_config");
    assert!(!short.long);
}

#[test]
fn a_title_describing_a_fault() {
    for t in [
        "Fix false positive for `unused-variable` in comprehensions",
        "autodoc crashes on a property of a dataclass",
        "Default values of keyword-only arguments are not rendered",
        "sphinx-build doesn't pass -q to latexmk",
        "KeyError is raised if a section title and a table title are the same",
    ] {
        assert!(Report::parse(t).fault, "{t}");
    }
    for t in [
        "Add an option for condensed rendering of Literal types",
        "Support for astropy.units",
        "How to configure the cache directory",
        "parse_config",
    ] {
        assert!(!Report::parse(t).fault, "{t}");
    }
}

/// pyvista/pyvista#4314 (SWE-bench dev pyvista-4315), its `pv.Report()` block shortened.
const ENVIRONMENT: &str = r#"Rectilinear grid does not allow Sequences as inputs
```python
import pyvista as pv
pv.RectilinearGrid([0, 1], [0, 1], [0, 1])
```
### System Information

```shell
--------------------------------------------------------------------------------
  Date: Wed Apr 19 20:15:10 2023 UTC

                OS : Linux
            CPU(s) : 2
        GPU Vendor : Mesa/X.org
       GPU Version : 4.5 (Core Profile) Mesa 20.3.5

  Python 3.11.2 (main, Mar 23 2023, 17:12:29) [GCC 10.2.1 20210110]

           pyvista : 0.38.5
               vtk : 9.2.6
--------------------------------------------------------------------------------
```

```yaml
grid:
  spacing: 0.5
  max_cells: 100
```
"#;

#[test]
fn an_environment_report_is_not_read_as_code() {
    let r = Report::parse(ENVIRONMENT);
    let all: Vec<&String> = r
        .block_identifiers
        .iter()
        .chain(&r.span_identifiers)
        .collect();
    for noise in ["Vendor", "GPU", "Version", "vtk", "Linux"] {
        assert!(!all.iter().any(|i| *i == noise), "{noise}: {all:?}");
    }
    assert!(all.iter().any(|i| *i == "RectilinearGrid"), "{all:?}");
    // A config block with versions nowhere stays config.
    assert!(
        r.config_keys.iter().any(|k| k.name == "max_cells"),
        "{:?}",
        r.config_keys
    );
    assert_eq!(environment_line("numpy : 1.24.2"), Some(true));
    assert_eq!(environment_line("MONAI version: 0.6.0"), Some(true));
    assert_eq!(environment_line("pydicom 2.1.0"), Some(true));
    assert_eq!(environment_line("max_cells: 100"), Some(false));
    assert_eq!(environment_line("x = foo(1.5)"), Some(false));
}

#[test]
fn tilde_fences_and_caret_markers() {
    let r = Report::parse(
        "Crash in the loader\n\n~~~\nTraceback (most recent call last):\n  File \"pkg/loader.py\", line 3, in load\n    return parse_blob(data)\n           ^^^^^^^^^^^^^^^^\nValueError: bad blob\n~~~\n\nThe `load` docs say nothing.\n",
    );
    assert_eq!(r.frames.len(), 1, "{:?}", r.frames);
    // The innermost frame's line counts; the marker line is no code.
    has(&r.block_identifiers, "parse_blob");
    has(&r.span_identifiers, "load");
}

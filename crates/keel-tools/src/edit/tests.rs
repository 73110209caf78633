use super::*;
use proptest::prelude::*;

fn apply(text: &str, search: &str, replace: &str) -> Result<(String, AppliedEdit), EditErrorKind> {
    SearchReplaceEditor::default().apply_one(text, &Edit::new(search, replace))
}

const PY: &str = "class Tasks:\n    def add(self, title, priority=0):\n        \"\"\"Add a task.\"\"\"\n        self.items.append((title, priority))\n        return len(self.items)\n\n    def clear(self):\n        self.items = []\n";

/// (name, file, search, replace, expected level, expected file after)
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    MatchLevel,
    &'static str,
);

const CASES: &[Case] = &[
    (
        "exact inside a line",
        "let x = compute(1, 2);\n",
        "compute(1, 2)",
        "compute(2, 1)",
        MatchLevel::Exact,
        "let x = compute(2, 1);\n",
    ),
    (
        "exact multi-line block",
        "a\nb\nc\n",
        "b\nc\n",
        "B\nC\n",
        MatchLevel::Exact,
        "a\nB\nC\n",
    ),
    (
        "whitespace runs and trailing spaces differ",
        "fn f() {\n    let  x =  1;   \n    x\n}\n",
        "    let x = 1;\n    x\n",
        "    let x = 2;\n    x\n",
        MatchLevel::WhitespaceNormalised,
        "fn f() {\n    let x = 2;\n    x\n}\n",
    ),
    (
        "model dropped the indentation",
        PY,
        "def clear(self):\n    self.items = []\n",
        "def clear(self):\n    self.items.clear()\n    self.cleared = True\n",
        MatchLevel::IndentationAgnostic,
        "class Tasks:\n    def add(self, title, priority=0):\n        \"\"\"Add a task.\"\"\"\n        self.items.append((title, priority))\n        return len(self.items)\n\n    def clear(self):\n        self.items.clear()\n        self.cleared = True\n",
    ),
    (
        "model wrote spaces, the file has tabs",
        "func main() {\n\tif ok {\n\t\trun()\n\t}\n}\n",
        "if ok {\n    run()\n}",
        "if ok {\n    run()\n    log()\n}",
        MatchLevel::IndentationAgnostic,
        "func main() {\n\tif ok {\n\t\trun()\n\t\tlog()\n\t}\n}\n",
    ),
    (
        "fuzzy: a misremembered line",
        PY,
        "    def add(self, title, priority=0):\n        \"\"\"Add a new task.\"\"\"\n        self.items.append((title, priority))\n        return len(self.items)\n",
        "    def add(self, title, priority=0):\n        \"\"\"Add a task.\"\"\"\n        self.items.append((title.strip(), priority))\n        return len(self.items)\n",
        MatchLevel::Fuzzy,
        "class Tasks:\n    def add(self, title, priority=0):\n        \"\"\"Add a task.\"\"\"\n        self.items.append((title.strip(), priority))\n        return len(self.items)\n\n    def clear(self):\n        self.items = []\n",
    ),
    (
        "fuzzy: a missing line, wrong indentation",
        "impl Stack {\n    pub fn push(&mut self, value: i32) -> usize {\n        self.items.push(value);\n        self.len += 1;\n        self.dirty = true;\n        self.log(\"push\", value);\n        self.notify_listeners(value);\n        self.len\n    }\n}\n",
        "pub fn push(&mut self, value: i32) -> usize {\n    self.items.push(value);\n    self.len += 1;\n    self.log(\"push\", value);\n    self.notify_listeners(value);\n    self.len\n}\n",
        "pub fn push(&mut self, value: i32) -> usize {\n    self.items.push(value);\n    self.len = self.items.len();\n    self.notify_listeners(value);\n    self.len\n}\n",
        MatchLevel::Fuzzy,
        // The line the model never saw (`dirty`) is kept, not silently deleted.
        "impl Stack {\n    pub fn push(&mut self, value: i32) -> usize {\n        self.items.push(value);\n        self.len = self.items.len();\n        self.dirty = true;\n        self.notify_listeners(value);\n        self.len\n    }\n}\n",
    ),
    (
        "fuzzy never cuts a block short of its closing line",
        "impl Stack {\n    pub fn push(&mut self, v: i32) {\n        self.len += 1;\n        self.items.push(v);\n        self.dirty = true;\n    }\n}\n",
        "pub fn push(&mut self, v: i32) {\n    self.len += 1;\n    self.items.push(v);\n    self.dirty = true\n}\n",
        "pub fn push(&mut self, v: i32) {\n    self.items.push(v);\n}\n",
        MatchLevel::Fuzzy,
        "impl Stack {\n    pub fn push(&mut self, v: i32) {\n        self.items.push(v);\n    }\n}\n",
    ),
    (
        "deleting lines leaves no blank line behind",
        "a\nb\nc\n",
        "b \n",
        "",
        MatchLevel::WhitespaceNormalised,
        "a\nc\n",
    ),
    (
        "blank lines at the ends of the search are ignored",
        "x = 1\n\ny = 2\n",
        "\n  y = 2\n\n",
        "\n  y = 3\n\n",
        MatchLevel::IndentationAgnostic,
        "x = 1\n\ny = 3\n",
    ),
    (
        "a file without a final newline keeps it that way",
        "first\nlast line",
        "last  line\n",
        "final line\n",
        MatchLevel::WhitespaceNormalised,
        "first\nfinal line",
    ),
    (
        "empty file takes the replacement",
        "",
        "",
        "new content\n",
        MatchLevel::Exact,
        "new content\n",
    ),
];

#[test]
fn match_levels_table() {
    for (name, file, search, replace, level, expected) in CASES {
        match apply(file, search, replace) {
            Ok((out, how)) => {
                assert_eq!(how.level, *level, "{name}: level");
                assert_eq!(out, *expected, "{name}: result");
            }
            Err(e) => panic!("{name}: {e:?}"),
        }
    }
}

#[test]
fn ambiguity_is_an_error_naming_every_place() {
    let text = "fn a() {\n    x += 1;\n}\nfn b() {\n    x += 1;\n}\n";
    match apply(text, "x += 1;", "x += 2;") {
        Err(EditErrorKind::Ambiguous {
            level,
            locations,
            total,
            separable,
        }) => {
            assert_eq!(level, MatchLevel::Exact);
            let lines: Vec<(usize, usize)> = locations
                .iter()
                .map(|l| (l.start_line, l.end_line))
                .collect();
            assert_eq!(lines, vec![(2, 2), (5, 5)]);
            assert_eq!(total, 2);
            assert_eq!(separable, Separable::ByContext);
        }
        other => panic!("{other:?}"),
    }
    // Indentation-agnostic ambiguity.
    let text = "if a:\n    go()\nif b:\n        go()\n";
    assert!(matches!(
        apply(text, "  go()  \n", "stop()"),
        Err(EditErrorKind::Ambiguous {
            level: MatchLevel::IndentationAgnostic,
            ..
        })
    ));
    // Two equally close fuzzy candidates.
    let text =
        "def f():\n    return compute(alpha, beta)\n\ndef g():\n    return compute(alpha, beta)\n";
    let err = apply(text, "return compute(alpha, betta)\n", "return 0\n");
    assert!(
        matches!(
            err,
            Err(EditErrorKind::Ambiguous {
                level: MatchLevel::Fuzzy,
                ref locations,
                ..
            }) if locations == &vec![Location::lines(2, 2), Location::lines(5, 5)]
        ),
        "{err:?}"
    );
    let msg = EditError {
        index: 0,
        kind: err.err().unwrap_or(EditErrorKind::EmptySearch),
    }
    .describe("m.py", 1);
    assert!(msg.contains("lines") || msg.contains("line 2"), "{msg}");
    assert!(msg.contains("line 2, line 5"), "{msg}");
}

#[test]
fn no_match_shows_the_closest_region_and_what_differs() {
    let err = apply(
        PY,
        "    def add(self, title: str, priority: int = 0):\n        self.items.append(Task(title))\n",
        "pass",
    )
    .err();
    let Some(EditErrorKind::NoMatch {
        closest: Some(c), ..
    }) = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(c.start_line, 2);
    let msg = EditError {
        index: 1,
        kind: err.clone().unwrap_or(EditErrorKind::EmptySearch),
    }
    .describe("tasks.py", 2);
    assert!(msg.starts_with("edit 2 of 2: no match"), "{msg}");
    assert!(
        msg.contains("2\t    def add(self, title, priority=0):"),
        "{msg}"
    );
    assert!(msg.contains("- "), "{msg}");
    assert!(msg.contains("+ "), "{msg}");

    let err = apply("alpha\nbeta\n", "completely unrelated text here", "x").err();
    assert!(
        matches!(
            err,
            Some(EditErrorKind::NoMatch {
                closest: None,
                replace_all: false
            })
        ),
        "{err:?}"
    );
    assert!(matches!(
        apply("abc", "", "x"),
        Err(EditErrorKind::EmptySearch)
    ));
}

#[test]
fn edits_apply_in_order_and_all_or_nothing() {
    let editor = SearchReplaceEditor::default();
    let text = "one\ntwo\nthree\n";
    let out = editor
        .apply(
            text,
            &[Edit::new("one", "ONE"), Edit::new("ONE\ntwo", "ONE\n2")],
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out.text, "ONE\n2\nthree\n");
    assert_eq!(out.applied.len(), 2);
    let err = editor
        .apply(text, &[Edit::new("one", "ONE"), Edit::new("four", "4")])
        .err();
    assert_eq!(err.map(|e| e.index), Some(1));
}

#[test]
fn a_fuzzy_match_never_keeps_a_line_the_edit_changes() {
    // The issue's probe: the file has `two three` on one line; the search splits it and
    // changes `three`. Before, the editor wrote `two three` *and* `THREE` and reported success.
    let text = "alpha\none\ntwo three\nfour\nomega\n";
    let err = apply(text, "one\ntwo\nthree\nfour\n", "one\ntwo\nTHREE\nfour\n").err();
    let Some(EditErrorKind::Unmatched { closest, lines }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(lines, &vec!["three".to_string()]);
    assert_eq!((closest.start_line, closest.end_line), (2, 4));
    let msg = EditError {
        index: 0,
        kind: err.clone().unwrap_or(EditErrorKind::EmptySearch),
    }
    .describe("f.txt", 1);
    assert!(
        msg.contains("lacks a line your edit removes or changes: `three`"),
        "{msg}"
    );
    assert!(msg.contains("3\ttwo three"), "{msg}");
    // A fuzzy edit of lines the file does have still applies.
    let (out, how) = apply(text, "one\ntwo\nthree\nfour\n", "ONE\ntwo\nthree\nfour\n")
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(how.level, MatchLevel::Fuzzy);
    assert_eq!(out, "alpha\nONE\ntwo three\nfour\nomega\n");
}

#[test]
fn a_lone_cr_in_the_search_is_a_line_break() {
    let (out, how) =
        apply("one\ntwo\nthree\n", "two\rthree", "two\rTHREE").unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(how.level, MatchLevel::Exact);
    assert_eq!(out, "one\ntwo\nTHREE\n");
}

#[test]
fn replace_all_changes_every_occurrence_and_counts_them() {
    let editor = SearchReplaceEditor::default();
    let one = |text: &str, e: Edit| editor.apply_one(text, &e);
    let (out, how) =
        one("foo bar foo baz foo", Edit::every("foo", "qux")).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out, "qux bar qux baz qux");
    assert_eq!((how.replacements, how.level), (3, MatchLevel::Exact));
    // Not overlapping, left to right, like `str::replace`.
    let (out, how) = one("aaaa", Edit::every("aa", "b")).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!((out.as_str(), how.replacements), ("bb", 2));
    // Whitespace-tolerant blocks, each re-indented to its place.
    let text = "if a:\n    go(a,  b)\nif b:\n        go(a,  b)\n";
    let (out, how) =
        one(text, Edit::every("go(a, b)\n", "stop()\n")).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out, "if a:\n    stop()\nif b:\n        stop()\n");
    assert_eq!(
        (how.replacements, how.level),
        (2, MatchLevel::IndentationAgnostic)
    );
    // Never a fuzzy match.
    let err = one(
        "compute(alpha, beta)\n",
        Edit::every("compute(alpha, betta)", "x"),
    )
    .err();
    assert!(
        matches!(
            err,
            Some(EditErrorKind::NoMatch {
                replace_all: true,
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn ambiguity_on_one_line_names_columns_and_suggests_replace_all() {
    let err = apply("x = f(a) + f(a) + f(a)\n", "f(a)", "g(a)").err();
    let msg = EditError {
        index: 0,
        kind: err.unwrap_or(EditErrorKind::EmptySearch),
    }
    .describe("m.py", 1);
    assert!(
        msg.contains("line 1 column 5, line 1 column 12, line 1 column 19"),
        "{msg}"
    );
    assert!(!msg.contains("Add surrounding lines"), "{msg}");
    assert!(msg.contains("replace_all: true"), "{msg}");
    // Identical blocks: context cannot separate them either.
    let text = "p\nq\nr\nx = 1\ns\nt\nu\np\nq\nr\nx = 1\ns\nt\nu\n";
    let err = apply(text, "x = 1", "x = 2").err();
    assert!(
        matches!(
            err,
            Some(EditErrorKind::Ambiguous {
                separable: Separable::No,
                ..
            })
        ),
        "{err:?}"
    );
}

fn arb_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[ \t]{0,3}[a-z(){};=]{0,12}",
        "[ \t]{0,8}(fn|def|let|return) [a-z]{1,6}[ (){}:]{0,3}",
    ]
}

fn arb_text() -> impl Strategy<Value = String> {
    (prop::collection::vec(arb_line(), 0..40), any::<bool>()).prop_map(|(lines, nl)| {
        let mut t = lines.join("\n");
        if nl && !t.is_empty() {
            t.push('\n');
        }
        t
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Arbitrary texts and edits: never a panic, and a success always reports a sane span.
    #[test]
    fn never_panics(text in arb_text(), search in "[ \t\na-z(){};=]{0,40}", replace in "[ \t\na-z]{0,20}") {
        let editor = SearchReplaceEditor::default();
        if let Ok(out) = editor.apply(&text, &[Edit::new(search, replace)]) {
            let a = &out.applied[0];
            prop_assert!(a.start_line >= 1 && a.end_line >= a.start_line);
        }
    }

    /// Cutting a unique substring out of the text and searching for it exactly always finds
    /// it at the exact level and replaces just that span.
    #[test]
    fn exact_edits_round_trip(text in arb_text(), a in 0usize..2000, len in 1usize..80, replace in "[a-z\n ]{0,20}") {
        prop_assume!(!text.is_empty());
        let start = a % text.len();
        let end = (start + len).min(text.len());
        prop_assume!(text.is_char_boundary(start) && text.is_char_boundary(end) && end > start);
        let search = &text[start..end];
        prop_assume!(occurrences(&text, search).len() == 1);
        let (out, how) = apply(&text, search, &replace).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(how.level, MatchLevel::Exact);
        prop_assert_eq!(&out, &format!("{}{}{}", &text[..start], replace, &text[end..]));
        // And back again.
        if !replace.is_empty() && occurrences(&out, &replace).len() == 1 {
            let (back, _) = apply(&out, &replace, search).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert_eq!(back, text);
        }
    }
}

/// A block of code lines with one unique line to remove, seen by the model through noise:
/// typos, lost indentation, and — the split-line bug — the removed line joined onto the line
/// before it in the file.
fn arb_noisy_block() -> impl Strategy<Value = (Vec<String>, usize, Vec<u8>, bool)> {
    (
        prop::collection::vec("[a-z]{3,8}\\([a-z]{0,4}\\);", 4..9),
        any::<prop::sample::Index>(),
        prop::collection::vec(0u8..6, 4..9),
        any::<bool>(),
    )
        .prop_map(|(lines, gone, noise, joined)| {
            let gone = gone.index(lines.len());
            (lines, gone, noise, joined)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The merge rule: whatever level matches, a successful edit never keeps a line the edit
    /// removes, and never touches text outside the lines it reports.
    #[test]
    fn a_removed_line_never_survives(
        (lines, gone, noise, joined) in arb_noisy_block(),
        before in prop::collection::vec("[a-z]{2,6} = [0-9];", 0..6),
        after in prop::collection::vec("[a-z]{2,6} = [0-9];", 0..6),
    ) {
        const TOKEN: &str = "zz_remove_me_zz();";
        let mut block: Vec<String> = lines.clone();
        block[gone] = TOKEN.to_string();
        // The file: the block indented, the removed line maybe joined onto the one before.
        let mut file_block: Vec<String> = block.iter().map(|l| format!("    {l}")).collect();
        if joined && gone > 0 {
            let removed = file_block.remove(gone);
            file_block[gone - 1].push(' ');
            file_block[gone - 1].push_str(removed.trim());
        }
        let text = before
            .iter()
            .chain(&file_block)
            .chain(&after)
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        // The model's view: no indentation, small typos on other lines.
        let search: Vec<String> = block
            .iter()
            .zip(noise.iter().cycle())
            .enumerate()
            .map(|(i, (l, n))| {
                if i == gone || *n > 1 {
                    l.clone()
                } else {
                    l.replacen('(', "( ", 1).replacen(';', "", 1)
                }
            })
            .collect();
        let replace: Vec<String> = search
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != gone)
            .map(|(_, l)| l.clone())
            .collect();
        let edit = Edit::new(search.join("\n") + "\n", replace.join("\n") + "\n");
        if let Ok((out, how)) = SearchReplaceEditor::default().apply_one(&text, &edit) {
            prop_assert!(!out.contains("zz_remove_me_zz"), "{:?} kept the removed line:\n{}", how.level, out);
            let out_lines: Vec<&str> = out.lines().collect();
            let text_lines: Vec<&str> = text.lines().collect();
            let head = how.start_line - 1;
            let tail = text_lines.len() - how.end_line;
            prop_assert_eq!(&out_lines[..head], &text_lines[..head]);
            prop_assert_eq!(&out_lines[out_lines.len() - tail..], &text_lines[text_lines.len() - tail..]);
        }
    }

    /// `replace_all` with text that occurs exactly is `str::replace`, and counts the places.
    #[test]
    fn replace_all_exact_is_str_replace(text in arb_text(), search in "[a-z(){};=]{1,3}", replace in "[a-z ]{0,5}") {
        prop_assume!(text.contains(search.as_str()));
        let (out, how) = SearchReplaceEditor::default()
            .apply_one(&text, &Edit::every(search.as_str(), replace.as_str()))
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(out, text.replace(search.as_str(), &replace));
        prop_assert_eq!(how.replacements, text.matches(search.as_str()).count());
        prop_assert_eq!(how.level, MatchLevel::Exact);
    }
}

/// opencode's escape normalisation, where it cannot land half-right: arguments escaped twice
/// (`\n` sent as a backslash and an `n`) match once read, and the replacement is read alike.
#[test]
fn arguments_escaped_twice_apply_read_and_only_when_consistent() {
    let file = "def f():\n    return 1\n";
    let (out, how) = apply(file, r"def f():\n    return 1", r"def f():\n    return 2")
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out, "def f():\n    return 2\n");
    assert!(how.unescaped);
    assert_eq!(how.level, MatchLevel::Exact);
    let (out, how) = apply("print(\"hi\")\n", r#"print(\"hi\")"#, r#"print(\"bye\")"#)
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out, "print(\"bye\")\n");
    assert!(how.unescaped);
    // A literal `\n` in the file matches as sent and stays literal.
    let (out, how) =
        apply("s = \"a\\nb\"\n", r#""a\nb""#, r#""a\tb""#).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(out, "s = \"a\\tb\"\n");
    assert!(!how.unescaped);
    // Mixed: the search escaped twice, the replacement not (a real line break, a bare quote).
    for (search, replace) in [
        (r"def f():\n    return 1", "def f():\n    return 2"),
        (r#"print(\"hi\")"#, r#"print("a\nb")"#),
    ] {
        let text = if search.contains("print") {
            "print(\"hi\")\n"
        } else {
            file
        };
        assert!(
            matches!(
                apply(text, search, replace),
                Err(EditErrorKind::NoMatch { .. })
            ),
            "{search} → {replace}"
        );
    }
    // Read, it would match only fuzzily: refused.
    assert!(matches!(
        apply(file, r"def g():\n    return 1", r"def g():\n    return 2"),
        Err(EditErrorKind::NoMatch { .. })
    ));
}

/// Red-team pass 2, R19: a long near-miss search in a big file of alike lines took minutes.
/// Past [`matching::FUZZY_MAX_LINES`] no near match is looked for; below it the look stops at
/// [`matching::FUZZY_BUDGET`]; either way the answer says so and nothing is changed.
#[test]
fn a_long_near_miss_in_a_big_file_answers_quickly_and_changes_nothing() {
    let file: String = (0..6000)
        .map(|i| format!("    let value_{i} = compute_value(input_{i}, {i}) + offset;\n"))
        .collect();
    let near = |from: usize, lines: usize| -> String {
        (from..from + lines)
            .map(|i| format!("    let value_{i} = compute_valeu(input_{i}, {i}) + offset;\n"))
            .collect()
    };
    for (lines, want) in [(400, "400 lines"), (150, "took longer than")] {
        let search = near(2000, lines);
        let started = std::time::Instant::now();
        let got = apply(&file, &search, "    changed();\n");
        let took = started.elapsed();
        println!("{lines}-line near miss in 6,000 lines: {took:?}");
        assert!(
            took < std::time::Duration::from_secs(2),
            "{lines} lines took {took:?}"
        );
        let Err(err @ EditErrorKind::NoNearMatch { .. }) = got else {
            panic!("{lines} lines: {got:?}");
        };
        let msg = EditError {
            index: 0,
            kind: err,
        }
        .describe("big.rs", 1);
        assert!(
            msg.contains(want) && msg.contains("nothing was changed"),
            "{msg}"
        );
    }
    // A legitimate near match (one misremembered line in a short block) still applies, fuzzy.
    let (text, applied) = apply(
        &file,
        "    let value_7 = compute_value(input_7, 7) + offset;\n    let value_8 = compute_valeu(input_8, 8) + offset;\n    let value_9 = compute_value(input_9, 9) + offset;\n    let value_10 = compute_value(input_10, 10) + offset;\n",
        "    changed();\n",
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(applied.level, MatchLevel::Fuzzy);
    assert!(text.contains(
        "    let value_6 = compute_value(input_6, 6) + offset;\n    changed();\n    let value_11"
    ));
}

#[test]
fn a_display_diff_is_bounded_in_time_and_size() {
    // Red-team pass 8, R8-24: overwriting a 200,000-line file with one line kept Keel in
    // Myers' algorithm for minutes.
    let big: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
    let t = std::time::Instant::now();
    let d = unified_diff("big.txt", &big, "x\n");
    assert!(d.contains("200000 lines replaced by 1"), "{d}");
    // Under the line cap, the worst case for the shortest edit (no line in common, reordered)
    // gives up on minimality after the deadline and still answers a correct diff.
    let old: String = (1..=9_000).map(|i| format!("a{i}\n")).collect();
    let new: String = (1..=9_000)
        .rev()
        .map(|i| format!("a{}\n", i * 7 % 9_001))
        .collect();
    let d = unified_diff("f.txt", &old, &new);
    assert!(d.starts_with("--- a/f.txt"), "{}", &d[..d.len().min(200)]);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(20),
        "took {:?}",
        t.elapsed()
    );
}

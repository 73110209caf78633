//! Tests of `markdown.rs`.

use super::*;

#[test]
fn headings_lists_and_code_render_as_text_a_person_reads() {
    let theme = Theme::plain();
    let out = plain(&render(
        "# Plan\n\nFirst **do** this:\n\n1. read `main.rs`\n2. fix it\n\n- a\n- b\n\n```rust\nfn main() {}\n```\n",
        80,
        &theme,
    ));
    assert_eq!(
        out,
        "# Plan\n\nFirst do this:\n\n1. read `main.rs`\n2. fix it\n\n• a\n• b\n\n  ┌ rust\n  │ fn main() {}"
    );
}

#[test]
fn a_stream_prints_each_block_once_when_it_is_complete() {
    let theme = Theme::plain();
    let mut stream = MarkdownStream::default();
    let mut shown = Vec::new();
    for piece in ["# Ti", "tle\n\nSome ", "text\nmore", "\n\n- a\n", "- b"] {
        shown.extend(stream.push(piece, 80, &theme));
        if piece == "# Ti" {
            assert!(shown.is_empty(), "nothing is complete yet");
        }
    }
    assert_eq!(plain(&shown), "# Title\n\nSome text more");
    shown.extend(stream.finish(None, 80, &theme));
    assert_eq!(plain(&shown), "# Title\n\nSome text more\n\n• a\n• b");
    assert!(!stream.is_open());
    let colored = to_ansi(&render("**hi**", 80, &Theme::colored()), true);
    assert_eq!(colored, "\x1b[1mhi\x1b[0m\n");
    assert_eq!(
        to_ansi(&render("**hi**", 80, &Theme::colored()), false),
        "hi\n"
    );
}

#[test]
fn terminal_text_never_carries_the_cells_escape_bytes() {
    // Red-team pass 3, R3-7: chat's transcript printed on quit wrote a command's OSC 52
    // (clipboard), CSI 2J and OSC 0 to the terminal raw.
    let raw = "a\x1b]52;c;cHduZWQ=\x07b\x1b[2Jc \x1b]0;TITLE\x07";
    let lines = vec![Line::from(vec![
        Span::raw(raw),
        Span::styled(raw, Style::default().add_modifier(Modifier::BOLD)),
    ])];
    for color in [true, false] {
        let out = to_ansi(&lines, color);
        let foreign = out.replace("\x1b[1m", "").replace("\x1b[0m", "");
        assert!(
            !foreign.contains('\x1b') && !foreign.contains('\x07'),
            "{out:?}"
        );
        assert!(out.contains("a^[]52;c;cHduZWQ=^Gb^[[2Jc"), "{out:?}");
    }
}

#[test]
fn a_table_renders_as_aligned_columns_under_a_rule() {
    let md = "Changes:\n\n| file | change | lines |\n|---|---|---:|\n| src/lib.rs | adds `mul` | 12 |\n| tests/arith.rs | new tests | 140 |\n\nDone.";
    let out = plain(&render(md, 80, &Theme::plain()));
    assert_eq!(
        out,
        "Changes:\n\n file           │ change     │ lines\n────────────────┼────────────┼──────\n src/lib.rs     │ adds `mul` │    12\n tests/arith.rs │ new tests  │   140\n\nDone."
    );
    // Too wide for the screen: the widest column narrows and its cells wrap inside it;
    // no line is wider than the screen.
    let md = "| name | what it does |\n|---|---|\n| wrap | breaks a long line of styled text into lines that fit the screen |\n";
    let lines = render(md, 40, &Theme::plain());
    let out = plain(&lines);
    assert!(out.lines().all(|l| l.chars().count() <= 40), "{out}");
    assert_eq!(
        out,
        " name │ what it does\n──────┼─────────────────────────────────\n wrap │ breaks a long line of styled\n      │ text into lines that fit the\n      │ screen"
    );
    // The header is bold, like a heading.
    let colored = render("| a | b |\n|---|---|\n| 1 | 2 |\n", 80, &Theme::colored());
    assert!(
        colored[0]
            .spans
            .iter()
            .any(|s| s.content == "a" && s.style.add_modifier.contains(Modifier::BOLD))
    );
}

#[test]
fn an_unfinished_fence_still_shows_its_code() {
    let out = plain(&render("Here:\n```py\nx = 1\n", 80, &Theme::plain()));
    assert!(out.ends_with("  ┌ py\n  │ x = 1"), "{out}");
}

#[test]
fn keywords_strings_and_comments_get_their_own_colours() {
    let theme = Theme::colored();
    let spans = highlight("let s = \"fn\"; // note", "rust", &theme);
    let kinds: Vec<(String, Style)> = spans
        .into_iter()
        .map(|s| (s.content.to_string(), s.style))
        .collect();
    assert_eq!(kinds[0], ("let".into(), theme.keyword));
    assert!(kinds.contains(&("\"fn\"".into(), theme.string)));
    assert_eq!(kinds.last().map(|k| k.1), Some(theme.comment));
}

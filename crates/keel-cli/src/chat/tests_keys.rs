//! The keys a person presses every day: how to quit (and how not to quit by accident), what
//! Esc and Ctrl-C do to a turn and to a message being typed, and the hints that say so.

use crossterm::event::KeyCode;
use keel_protocol::{EventKind, Op};

use super::app::{Action, DOUBLE_PRESS_MS};
use super::tests::{T0, app, ctrl, ev, key, screen, type_text};

#[test]
fn esc_twice_while_idle_never_quits_and_says_how_to_quit() {
    let mut app = app();
    type_text(&mut app, "half a thought");
    assert_eq!(app.on_key(key(KeyCode::Esc), T0), None);
    assert_eq!(app.on_key(key(KeyCode::Esc), T0 + 300), None);
    assert!(!app.quit, "Esc twice does not quit");
    assert_eq!(
        app.composer.text(),
        "half a thought",
        "nor throw the text away"
    );
    let s = screen(&app, 80, 12, T0 + 400);
    assert!(
        s.contains("to quit: /quit, Ctrl-D, or Ctrl-C twice"),
        "the hint says how to quit:\n{s}"
    );
    assert!(
        !screen(&app, 80, 12, T0 + 10_000).contains("to quit:"),
        "the hint goes away by itself"
    );
}

#[test]
fn esc_interrupts_a_running_turn_without_arming_a_quit() {
    let mut app = app();
    app.turn_started(T0);
    assert_eq!(
        app.on_key(key(KeyCode::Esc), T0),
        Some(Action::Op(Op::Interrupt))
    );
    app.on_key(key(KeyCode::Esc), T0 + 200);
    assert!(!app.quit);
}

#[test]
fn ctrl_c_with_text_clears_it_and_up_brings_it_back() {
    let mut app = app();
    type_text(&mut app, "refactor the parser");
    assert_eq!(app.on_key(ctrl('c'), T0), None);
    assert!(
        app.composer.is_empty(),
        "the first Ctrl-C clears the message"
    );
    assert!(!app.quit);
    let s = screen(&app, 80, 12, T0 + 100);
    assert!(s.contains("message cleared · Up brings it back"), "{s}");
    app.on_key(key(KeyCode::Up), T0 + 200);
    assert_eq!(
        app.composer.text(),
        "refactor the parser",
        "Up brings it back"
    );
    // Clearing is not the first of two presses: the composer is empty now, and one more
    // Ctrl-C only arms the quit.
    app.on_key(ctrl('u'), T0 + 300);
    app.on_key(ctrl('c'), T0 + 400);
    assert!(!app.quit);
}

#[test]
fn ctrl_c_twice_on_an_empty_composer_quits_within_the_window_only() {
    let mut app = app();
    app.on_key(ctrl('c'), T0);
    assert!(!app.quit);
    let s = screen(&app, 80, 12, T0 + DOUBLE_PRESS_MS - 100);
    assert!(
        s.contains("Ctrl-C again quits"),
        "the hint shows during the window:\n{s}"
    );
    assert!(
        !screen(&app, 80, 12, T0 + DOUBLE_PRESS_MS + 1).contains("Ctrl-C again quits"),
        "and not after it"
    );
    // Too late: this press arms again instead of quitting.
    app.on_key(ctrl('c'), T0 + DOUBLE_PRESS_MS + 100);
    assert!(!app.quit);
    app.on_key(ctrl('c'), T0 + 2 * DOUBLE_PRESS_MS);
    assert!(app.quit, "a second press within the window quits");
    assert!(
        (1500..=2000).contains(&DOUBLE_PRESS_MS),
        "a window people can hit"
    );
}

#[test]
fn ctrl_c_interrupts_a_turn_then_quits_and_ctrl_d_quits_on_an_empty_line() {
    let mut app = app();
    app.turn_started(T0);
    assert_eq!(app.on_key(ctrl('c'), T0), Some(Action::Op(Op::Interrupt)));
    assert!(screen(&app, 80, 12, T0 + 100).contains("Ctrl-C again quits"));
    app.on_key(ctrl('c'), T0 + 600);
    assert!(app.quit);

    let mut app = super::tests::app();
    type_text(&mut app, "x");
    app.on_key(ctrl('d'), T0);
    assert!(!app.quit, "Ctrl-D with text deletes, it does not quit");
    app.on_key(ctrl('u'), T0);
    app.on_key(ctrl('d'), T0);
    assert!(app.quit);
}

#[test]
fn a_cancelled_turn_reads_cancelled_not_as_an_error() {
    let mut app = app();
    app.turn_started(T0);
    app.on_key(key(KeyCode::Esc), T0);
    app.on_event(
        &ev(
            5,
            EventKind::Error(keel_protocol::ErrorInfo {
                error_code: keel_protocol::ErrorCode::Cancelled,
                message: "the run was cancelled by the user".into(),
                suggestions: vec![],
                retryable: false,
                original_error: None,
            }),
        ),
        T0,
    );
    app.on_event(
        &ev(
            6,
            EventKind::SessionFinished {
                status: keel_protocol::SessionStatus::Cancelled,
                iterations: 1,
                usage: Default::default(),
                children: vec![],
                unchanged: false,
            },
        ),
        T0,
    );
    let s = screen(&app, 80, 12, T0 + 500);
    assert!(!s.contains("error"), "{s}");
    assert!(
        s.contains("■ cancelled · your next message continues the session"),
        "{s}"
    );
}

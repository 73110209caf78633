//! Styles of the chat screen; every one is the terminal's default under `NO_COLOR`.

use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone)]
pub struct Theme {
    pub color: bool,
    pub dim: Style,
    pub bold: Style,
    pub heading: Style,
    pub code: Style,
    pub code_text: Style,
    pub keyword: Style,
    pub string: Style,
    pub comment: Style,
    pub number: Style,
    pub link: Style,
    pub user: Style,
    pub tool: Style,
    pub ok: Style,
    pub error: Style,
    pub warn: Style,
    pub added: Style,
    pub removed: Style,
    pub hunk: Style,
    pub selected: Style,
}

impl Theme {
    /// Colours on a terminal unless `NO_COLOR` is set.
    pub fn from_env() -> Self {
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            Self::plain()
        } else {
            Self::colored()
        }
    }

    pub fn colored() -> Self {
        let fg = |c| Style::default().fg(c);
        Self {
            color: true,
            dim: Style::default().add_modifier(Modifier::DIM),
            bold: Style::default().add_modifier(Modifier::BOLD),
            heading: fg(Color::Cyan).add_modifier(Modifier::BOLD),
            code: fg(Color::Yellow),
            code_text: Style::default(),
            keyword: fg(Color::Magenta),
            string: fg(Color::Green),
            comment: Style::default().add_modifier(Modifier::DIM),
            number: fg(Color::Yellow),
            link: fg(Color::Blue).add_modifier(Modifier::UNDERLINED),
            user: fg(Color::Cyan).add_modifier(Modifier::BOLD),
            tool: fg(Color::Cyan),
            ok: fg(Color::Green),
            error: fg(Color::Red),
            warn: fg(Color::Yellow),
            added: fg(Color::Green),
            removed: fg(Color::Red),
            hunk: fg(Color::Cyan),
            selected: Style::default().add_modifier(Modifier::REVERSED),
        }
    }

    /// No colour and no attributes but reverse video for the selection.
    pub fn plain() -> Self {
        let none = Style::default();
        Self {
            color: false,
            dim: none,
            bold: none,
            heading: none,
            code: none,
            code_text: none,
            keyword: none,
            string: none,
            comment: none,
            number: none,
            link: none,
            user: none,
            tool: none,
            ok: none,
            error: none,
            warn: none,
            added: none,
            removed: none,
            hunk: none,
            selected: Style::default().add_modifier(Modifier::REVERSED),
        }
    }
}

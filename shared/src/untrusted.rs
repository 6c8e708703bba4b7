//! Text from outside (a request, a detector's output) on its way into a log line.

use std::fmt::{self, Write as _};

/// A client-supplied string made safe for a log line: control characters (newlines, ESC
/// of ANSI and OSC sequences, NUL…) are written as escapes, so a caller cannot forge log
/// lines or drive the reader's terminal. Log such strings only through this.
pub struct Untrusted<'a>(pub &'a str);

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                write!(f, "{}", c.escape_unicode())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// A program's output made safe to show as lines (a terminal, a page): newlines and tabs
/// stay, every other control character (ESC of colour and cursor codes, a bare carriage
/// return that would overwrite a line, BEL, NUL…) is written as an escape, so the output
/// cannot drive the reader's terminal or hide what it printed.
pub struct UntrustedLines<'a>(pub &'a str);

impl fmt::Display for UntrustedLines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut chars = self.0.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\n' | '\t' => f.write_char(c)?,
                // Windows line ends are line ends.
                '\r' if chars.peek() == Some(&'\n') => {}
                c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                    write!(f, "{}", c.escape_unicode())?;
                }
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Untrusted, UntrustedLines};

    #[test]
    fn output_keeps_its_lines_and_loses_its_escapes() {
        let printed = "line 1\r\n\tline 2\n\u{1b}[31mred\u{1b}[0m\rover\u{7}\0";
        let shown = UntrustedLines(printed).to_string();
        assert_eq!(
            shown,
            "line 1\n\tline 2\n\\u{1b}[31mred\\u{1b}[0m\\u{d}over\\u{7}\\u{0}"
        );
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
    }

    #[test]
    fn control_characters_are_escaped() {
        let forged = "r1\n2026-01-01T00:00:00Z INFO forged\u{1b}[31m\u{1b}]0;title\u{7}";
        let shown = Untrusted(forged).to_string();
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert!(shown.starts_with("r1\\u{a}2026"), "{shown}");
        assert_eq!(Untrusted("plain name é").to_string(), "plain name é");
    }
}

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

#[cfg(test)]
mod tests {
    use super::Untrusted;

    #[test]
    fn control_characters_are_escaped() {
        let forged = "r1\n2026-01-01T00:00:00Z INFO forged\u{1b}[31m\u{1b}]0;title\u{7}";
        let shown = Untrusted(forged).to_string();
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert!(shown.starts_with("r1\\u{a}2026"), "{shown}");
        assert_eq!(Untrusted("plain name é").to_string(), "plain name é");
    }
}

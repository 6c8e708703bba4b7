//! Logging: human-readable text by default, JSON lines for log shippers (and Lambda).

use std::fmt;
use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber; `RUST_LOG` overrides the default `info` level.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes belong on a terminal, not in log files and journals.
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

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
                f.write_fmt(format_args!("{c}"))?;
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

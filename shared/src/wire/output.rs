//! What a node's program printed: the last bytes of its stdout and stderr, kept by the
//! runner, shipped with the report and stored beside the execution.

use serde::{Deserialize, Serialize};

/// Most bytes of one stream of one node run that are kept (the last ones).
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// Most output entries (a stream of a node run) one report carries; the runner keeps the
/// latest ones.
pub const MAX_REPORT_OUTPUTS: usize = 64;
/// Most output text one report carries, all entries together; the runner keeps the latest.
pub const MAX_REPORT_OUTPUT_BYTES: usize = 512 * 1024;

wire_enum! {
    /// One of a program's output streams.
    pub enum OutputStream ("output stream") {
        Stdout = "stdout",
        Stderr = "stderr",
    }
}

/// The tail of one stream of one node run. Untrusted text: escape it on pages, neutralise
/// its control characters in terminals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NodeOutput {
    pub node_id: String,
    /// Which run of the node within the execution (from 1).
    pub visit: u32,
    pub stream: OutputStream,
    /// The last bytes printed (at most 65,536), as UTF-8 (invalid sequences
    /// and NUL shown as U+FFFD).
    pub text: String,
    /// How many bytes were printed before `text` and dropped (0: `text` is all of it).
    #[serde(default)]
    pub cut_bytes: u64,
}

impl NodeOutput {
    /// How many bytes the stream printed in all.
    pub fn total_bytes(&self) -> u64 {
        self.cut_bytes.saturating_add(self.text.len() as u64)
    }

    /// The line that stands where the output was cut, if it was.
    pub fn cut_marker(&self) -> Option<String> {
        (self.cut_bytes > 0).then(|| {
            format!(
                "[… {} bytes cut; the last {} of {} bytes follow …]",
                thousands(self.cut_bytes),
                thousands(self.text.len() as u64),
                thousands(self.total_bytes())
            )
        })
    }
}

/// `1048576` as `1,048,576`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cut_is_marked_with_what_was_dropped_and_kept() {
        let output = NodeOutput {
            node_id: "detect".into(),
            visit: 1,
            stream: OutputStream::Stderr,
            text: "x".repeat(65_536),
            cut_bytes: 983_040,
        };
        assert_eq!(output.total_bytes(), 1_048_576);
        assert_eq!(
            output.cut_marker().as_deref(),
            Some("[… 983,040 bytes cut; the last 65,536 of 1,048,576 bytes follow …]")
        );
        let whole = NodeOutput {
            cut_bytes: 0,
            ..output
        };
        assert_eq!(whole.cut_marker(), None);
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }

    #[test]
    fn streams_round_trip_through_their_names() {
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            assert_eq!(OutputStream::parse(stream.as_str()), Some(stream));
            let json = serde_json::to_value(stream).expect("a stream serializes");
            assert_eq!(json, stream.as_str());
        }
        assert_eq!(OutputStream::parse("stdin"), None);
    }
}

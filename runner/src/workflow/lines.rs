//! A program's stderr as log lines, masked before anything splits or cuts it: a value with a
//! line break is masked across the lines it spans (a line that may begin one waits for the
//! next), and a line longer than the log keeps is masked, then cut.

use std::borrow::Cow;

use res_shared::secrets::{Edges, Masker};

/// Longest line logged.
pub(crate) const MAX_LOG_LINE: usize = 4096;

/// Splits a stream into masked lines.
#[derive(Debug)]
pub(crate) struct Lines {
    masker: Masker,
    pending: Vec<u8>,
    /// The line being read ran past what is held: the rest of it is dropped.
    skipping: bool,
    /// What is pending begins where earlier text was cut off.
    cut_start: bool,
    /// The most bytes held back: a line the log keeps, and a value that may continue it.
    hold_max: usize,
}

impl Lines {
    pub(crate) fn new(masker: Masker) -> Lines {
        let hold_max = MAX_LOG_LINE + masker.longest_span();
        Lines {
            masker,
            pending: Vec::new(),
            skipping: false,
            cut_start: false,
            hold_max,
        }
    }

    /// The lines `bytes` completes: masked, non-empty, each at most [`MAX_LOG_LINE`] bytes.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for &byte in bytes {
            if self.skipping {
                self.skipping = byte != b'\n';
                continue;
            }
            self.pending.push(byte);
            if byte == b'\n' {
                let held = self
                    .masker
                    .held_from(&String::from_utf8_lossy(&self.pending));
                if held.is_none() {
                    self.flush(false, &mut out);
                } else if self.pending.len() > self.hold_max {
                    self.flush(true, &mut out);
                }
            } else if self.pending.len() > self.hold_max {
                self.flush(true, &mut out);
                self.skipping = true;
            }
        }
        out
    }

    /// The lines still held when the stream ended.
    pub(crate) fn finish(mut self) -> Vec<String> {
        let mut out = Vec::new();
        self.flush(false, &mut out);
        out
    }

    fn flush(&mut self, cut_end: bool, out: &mut Vec<String>) {
        if self.pending.is_empty() {
            return;
        }
        let text = String::from_utf8_lossy(&self.pending);
        let edges = Edges {
            start: self.cut_start,
            end: cut_end,
        };
        let masked: Cow<'_, str> = self.masker.mask_piece(&text, edges);
        for line in masked.split('\n') {
            let line = line.trim_end();
            if !line.is_empty() {
                out.push(self.masker.keep_start(line, MAX_LOG_LINE));
            }
        }
        self.pending.clear();
        self.cut_start = cut_end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(masker: Masker, chunks: &[&[u8]]) -> Vec<String> {
        let mut lines = Lines::new(masker);
        let mut out: Vec<String> = chunks.iter().flat_map(|c| lines.push(c)).collect();
        out.extend(lines.finish());
        out
    }

    #[test]
    fn lines_come_whole_across_chunks_and_blank_ones_are_dropped() {
        let out = lines_of(Masker::default(), &[b"one\ntw", b"o\n\n  \nthree"]);
        assert_eq!(out, ["one", "two", "three"]);
    }

    #[test]
    fn a_value_with_a_line_break_is_masked_across_lines() {
        let masker = Masker::new(["first-half\nsecond-half"]);
        let out = lines_of(
            masker,
            &[b"token: first-half\n", b"second-half and after\nnext\n"],
        );
        assert_eq!(out, ["token: *** and after", "next"]);
    }

    #[test]
    fn a_line_that_only_looks_like_the_start_of_a_value_is_logged_after_the_next() {
        let masker = Masker::new(["first-half\nsecond-half"]);
        let mut lines = Lines::new(masker);
        assert!(lines.push(b"said first-half\n").is_empty(), "held");
        assert_eq!(
            lines.push(b"then other\n"),
            ["said first-half", "then other"]
        );
    }

    #[test]
    fn a_long_line_is_masked_before_it_is_cut() {
        let token: String = (0..5000)
            .map(|i| char::from(b'a' + (i * 7 % 26) as u8))
            .collect();
        let masker = Masker::new([token.as_str()]);
        let line = format!("login failed: token={token} end\nnext\n");
        let out = lines_of(masker, &[line.as_bytes()]);
        assert_eq!(out, ["login failed: token=*** end", "next"]);
    }

    #[test]
    fn an_endless_line_is_cut_and_leaves_no_piece_of_a_value() {
        let token = "0123456789abcdefghij";
        let masker = Masker::new([token]);
        let mut text = "x".repeat(MAX_LOG_LINE + 110);
        text.push_str(token);
        text.push_str(&"y".repeat(10_000));
        text.push_str("\nnext\n");
        let out = lines_of(masker, &[text.as_bytes()]);
        assert_eq!(
            out.len(),
            2,
            "{:?}",
            out.iter().map(String::len).collect::<Vec<_>>()
        );
        assert!(out[0].len() <= MAX_LOG_LINE);
        assert!(!out[0].contains("0123"), "no piece of the value");
        assert_eq!(out[1], "next");
    }
}

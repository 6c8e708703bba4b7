//! What a node's program printed: the last bytes of each stream, with how many came before
//! them, kept within one report's budget. The bytes are kept as printed and masked when they
//! are taken, the window's cut edge included: a window may begin inside a value.

use std::collections::VecDeque;
use std::sync::Mutex;

use res_shared::secrets::{Edges, Masker};
use res_shared::wire::{
    MAX_OUTPUT_BYTES, MAX_REPORT_OUTPUT_BYTES, MAX_REPORT_OUTPUTS, NodeOutput, OutputStream,
};

/// The last [`MAX_OUTPUT_BYTES`] bytes of a stream.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    kept: VecDeque<u8>,
    cut: u64,
}

impl Tail {
    /// Adds what the stream printed next, dropping the oldest bytes past the limit.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let bytes = if bytes.len() > MAX_OUTPUT_BYTES {
            let skipped = bytes.len() - MAX_OUTPUT_BYTES;
            self.cut += skipped as u64;
            &bytes[skipped..]
        } else {
            bytes
        };
        let over = (self.kept.len() + bytes.len()).saturating_sub(MAX_OUTPUT_BYTES);
        self.kept.drain(..over);
        self.cut += over as u64;
        self.kept.extend(bytes);
    }

    /// The kept bytes as text, and how many bytes before them were dropped. A cut that
    /// split a character drops the rest of it; invalid UTF-8 and NUL (which PostgreSQL's
    /// text cannot hold) become U+FFFD, within the same limit.
    pub(crate) fn finish(self) -> (String, u64) {
        let mut cut = self.cut;
        let mut bytes = Vec::from(self.kept);
        if cut > 0 {
            let partial = bytes
                .iter()
                .take(3)
                .take_while(|b| (0x80..0xC0).contains(*b))
                .count();
            bytes.drain(..partial);
            cut += partial as u64;
        }
        let mut text = String::from_utf8_lossy(&bytes).replace('\0', "\u{FFFD}");
        if text.len() > MAX_OUTPUT_BYTES {
            let mut start = text.len() - MAX_OUTPUT_BYTES;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            text.drain(..start);
            cut += start as u64;
        }
        (text, cut)
    }
}

/// What the actions of one node run printed, handed from the executor to the engine, and the
/// masker of the secrets they were given.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    kept: Mutex<Vec<(OutputStream, Tail)>>,
    masker: Masker,
}

impl Captured {
    /// Output masked with `masker` when taken.
    pub(crate) fn new(masker: Masker) -> Captured {
        Captured {
            kept: Mutex::default(),
            masker,
        }
    }

    /// Keeps a stream's tail (an empty stream is not kept).
    pub(crate) fn keep(&self, stream: OutputStream, tail: Tail) {
        if tail.kept.is_empty() && tail.cut == 0 {
            return;
        }
        if let Ok(mut kept) = self.kept.lock() {
            kept.push((stream, tail));
        }
    }

    /// The kept streams as the node run's output entries, stdout first, masked.
    pub(crate) fn take(&self, node_id: &str, visit: u32) -> Vec<NodeOutput> {
        let mut streams = self
            .kept
            .lock()
            .map(|mut kept| std::mem::take(&mut *kept))
            .unwrap_or_default();
        streams.sort_by_key(|(stream, _)| *stream);
        streams
            .into_iter()
            .map(|(stream, tail)| {
                let (text, cut_bytes) = tail.finish();
                let edges = Edges {
                    start: cut_bytes > 0,
                    end: false,
                };
                let text = self.masker.mask_piece(&text, edges).into_owned();
                NodeOutput {
                    node_id: node_id.to_owned(),
                    visit,
                    stream,
                    text,
                    cut_bytes,
                }
            })
            .collect()
    }
}

/// Drops the oldest entries until the report's output fits its budget
/// ([`MAX_REPORT_OUTPUTS`] entries, [`MAX_REPORT_OUTPUT_BYTES`] of text), so a workflow
/// that loops many times reports its latest output rather than an oversized body.
pub(crate) fn keep_latest(outputs: &mut Vec<NodeOutput>) {
    let mut total = 0;
    let mut keep = 0;
    for output in outputs.iter().rev() {
        if keep == MAX_REPORT_OUTPUTS || total + output.text.len() > MAX_REPORT_OUTPUT_BYTES {
            break;
        }
        total += output.text.len();
        keep += 1;
    }
    let dropped = outputs.len() - keep;
    if dropped > 0 {
        tracing::warn!(
            dropped,
            "the run printed more than a report carries: its earliest node outputs are left out"
        );
        outputs.drain(..dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail_of(chunks: &[&[u8]]) -> (String, u64) {
        let mut tail = Tail::default();
        for chunk in chunks {
            tail.push(chunk);
        }
        tail.finish()
    }

    #[test]
    fn short_output_is_kept_whole() {
        assert_eq!(tail_of(&[b"one\n", b"two\n"]), ("one\ntwo\n".into(), 0));
    }

    #[test]
    fn long_output_keeps_its_last_bytes_and_counts_the_rest() {
        let line = b"0123456789abcdef";
        let chunks: Vec<&[u8]> = std::iter::repeat_n(&line[..], 65_536).collect();
        let (text, cut) = tail_of(&chunks);
        assert_eq!(text.len(), MAX_OUTPUT_BYTES);
        assert_eq!(cut, 1_048_576 - MAX_OUTPUT_BYTES as u64);
        assert!(text.ends_with("0123456789abcdef"));
        // One chunk larger than the limit at once.
        let big = vec![b'y'; 200_000];
        let (text, cut) = tail_of(&[b"start", &big, b"end"]);
        assert!(text.ends_with("yend"));
        assert_eq!(cut + text.len() as u64, 200_008);
    }

    #[test]
    fn a_cut_inside_a_character_drops_the_rest_of_it() {
        let mut bytes = vec![b'a'; MAX_OUTPUT_BYTES - 1];
        bytes.extend("é".as_bytes()); // 2 bytes: the first falls off the front.
        let mut all = "é".as_bytes().to_vec();
        all.extend(&bytes);
        let (text, cut) = tail_of(&[&all]);
        assert!(
            !text.contains('\u{FFFD}'),
            "no broken character at the start"
        );
        assert!(text.ends_with('é'));
        assert_eq!(cut + text.len() as u64, all.len() as u64);
    }

    #[test]
    fn nul_and_invalid_bytes_become_replacement_characters_within_the_limit() {
        let (text, cut) = tail_of(&[b"a\0b\xffc"]);
        assert_eq!(text, "a\u{FFFD}b\u{FFFD}c");
        assert_eq!(cut, 0);
        let (text, cut) = tail_of(&[&vec![0xffu8; MAX_OUTPUT_BYTES]]);
        assert!(text.len() <= MAX_OUTPUT_BYTES);
        assert!(cut > 0);
    }

    #[test]
    fn captured_streams_come_stdout_first_and_empty_ones_are_left_out() {
        let captured = Captured::default();
        let mut err = Tail::default();
        err.push(b"warning\n");
        captured.keep(OutputStream::Stderr, err);
        let mut out = Tail::default();
        out.push(b"{}");
        captured.keep(OutputStream::Stdout, out);
        captured.keep(OutputStream::Stdout, Tail::default());
        let outputs = captured.take("detect", 2);
        let streams: Vec<_> = outputs.iter().map(|o| (o.stream, o.visit)).collect();
        assert_eq!(
            streams,
            [(OutputStream::Stdout, 2), (OutputStream::Stderr, 2)]
        );
        assert!(captured.take("detect", 2).is_empty(), "taken once");
    }

    #[test]
    fn a_value_the_window_cuts_into_is_masked_as_a_piece() {
        let token = "t0k3n-".repeat(20);
        let captured = Captured::new(Masker::new([token.as_str()]));
        let mut printed = format!("token={token}\n").into_bytes();
        printed.extend(vec![b'.'; MAX_OUTPUT_BYTES - 50]);
        let mut tail = Tail::default();
        tail.push(&printed);
        captured.keep(OutputStream::Stdout, tail);
        let outputs = captured.take("detect", 1);
        assert!(outputs[0].cut_bytes > 0);
        assert!(
            outputs[0].text.starts_with("***\n."),
            "{}",
            &outputs[0].text[..40]
        );
        assert!(!outputs[0].text.contains("t0k3"));
    }

    #[test]
    fn a_report_keeps_its_latest_outputs_within_the_budget() {
        let entry = |visit, len| NodeOutput {
            node_id: "loop".into(),
            visit,
            stream: OutputStream::Stderr,
            text: "z".repeat(len),
            cut_bytes: 0,
        };
        let mut many: Vec<_> = (1..=100).map(|v| entry(v, 10)).collect();
        keep_latest(&mut many);
        assert_eq!(many.len(), MAX_REPORT_OUTPUTS);
        assert_eq!(many.last().map(|o| o.visit), Some(100));
        let mut big: Vec<_> = (1..=10).map(|v| entry(v, MAX_OUTPUT_BYTES)).collect();
        keep_latest(&mut big);
        assert_eq!(big.len(), MAX_REPORT_OUTPUT_BYTES / MAX_OUTPUT_BYTES);
        assert_eq!(big.first().map(|o| o.visit), Some(3));
    }
}

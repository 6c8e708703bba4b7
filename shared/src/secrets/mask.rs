//! Masking: every secret value in a text replaced by [`MASK`], in every spelling the text may
//! hold it in, and before anything cuts the text.
//!
//! A value is found
//! - as it is, HTML-escaped, or base64-encoded at any alignment (inside a Basic credential);
//! - inside JSON string escapes, whichever characters the encoder escaped and in which case
//!   (`json.dumps`'s `\u00e4`, .NET's `\u00E4`, PHP's `\/`, a line break as `\n`);
//! - inside percent-encoding, whichever characters the encoder left alone and in either case
//!   of hex (WHATWG userinfo as the `url` crate prints a password, Go's `QueryEscape`,
//!   Python's `quote` and `quote_plus`, JavaScript's `encodeURIComponent`, form encoding),
//!   a space as `+` or `%20`.
//!
//! Cutting comes after masking ([`Masker::keep_start`], [`Masker::keep_end`]), so a cut never
//! splits a value that masking would have found whole. A text that was cut before it reached
//! the masker (a stream's last 64 KiB, a line longer than a log keeps) may begin or end inside
//! a value: [`Masker::mask_piece`] masks such a piece too when it holds [`MIN_PIECE_BYTES`] or
//! more bytes of a value, or takes that many bytes of text (an escape spells one byte in up
//! to six) — so a cut leaves at most three bytes of any secret at its edge.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::Value;

use super::reading::{Kind, Reading};
use super::{MASK, MIN_VALUE_BYTES, piece, spelling};

/// The shortest piece of a value at a cut's edge that is masked.
pub const MIN_PIECE_BYTES: usize = 4;

/// Bytes of text one byte of a value can take at most: `\u001f` for a control character.
const MOST_TEXT_PER_BYTE: usize = 6;

/// Which edges of a text were cut, so that a piece of a value may stand there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Edges {
    /// The text's start was cut off.
    pub start: bool,
    /// The text's end was cut off.
    pub end: bool,
}

/// What one reading of a text is searched for.
#[derive(Debug, Clone)]
struct Search {
    kind: Kind,
    patterns: Vec<Vec<u8>>,
    matcher: aho_corasick::AhoCorasick,
}

/// Replaces secret values by [`MASK`] in text, in every spelling the module documents.
#[derive(Debug, Clone, Default)]
pub struct Masker {
    searches: Vec<Search>,
    /// Plain spellings that hold a line break: a log written line by line must hold back a
    /// line that may be the start of one.
    multiline: Vec<Vec<u8>>,
    /// The most bytes of text one value can span.
    longest_span: usize,
}

impl Masker {
    /// A masker of `values` (values shorter than [`MIN_VALUE_BYTES`] are left alone: they
    /// cannot have been stored).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Masker {
        let values: Vec<&str> = values
            .into_iter()
            .filter(|value| value.len() >= MIN_VALUE_BYTES)
            .collect();
        let searches = [Kind::Plain, Kind::Json, Kind::Percent]
            .into_iter()
            .filter_map(|kind| {
                let mut patterns: Vec<Vec<u8>> = values
                    .iter()
                    .flat_map(|value| spelling::spellings(kind, value))
                    .collect();
                patterns.sort();
                patterns.dedup();
                let matcher = aho_corasick::AhoCorasick::builder()
                    .match_kind(aho_corasick::MatchKind::LeftmostLongest)
                    .build(&patterns)
                    .ok()?;
                (!patterns.is_empty()).then_some(Search {
                    kind,
                    patterns,
                    matcher,
                })
            })
            .collect::<Vec<_>>();
        let multiline = searches
            .iter()
            .filter(|search| search.kind == Kind::Plain)
            .flat_map(|search| &search.patterns)
            .filter(|pattern| pattern.contains(&b'\n'))
            .cloned()
            .collect();
        let longest_span = values.iter().map(|v| v.len()).max().unwrap_or(0) * MOST_TEXT_PER_BYTE;
        Masker {
            searches,
            multiline,
            longest_span,
        }
    }

    /// True when there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.searches.is_empty()
    }

    /// The most bytes of text one value can span, in any spelling.
    pub fn longest_span(&self) -> usize {
        self.longest_span
    }

    /// `text` with every value masked.
    pub fn mask<'t>(&self, text: &'t str) -> Cow<'t, str> {
        self.mask_piece(text, Edges::default())
    }

    /// `text`, which was cut at `edges` before it got here, with every value masked and
    /// every piece of one at those edges too.
    pub fn mask_piece<'t>(&self, text: &'t str, edges: Edges) -> Cow<'t, str> {
        let mut ranges = self.matches(text.as_bytes());
        if edges.start || edges.end {
            self.pieces(text.as_bytes(), edges, &mut ranges);
        }
        replace(text, ranges)
    }

    /// At most `max_bytes` of the start of `text`, masked before it is cut.
    pub fn keep_start(&self, text: &str, max_bytes: usize) -> String {
        if text.len() <= max_bytes {
            return self.mask(text).into_owned();
        }
        // Only what a value kept in part could span is read: a reply may be megabytes.
        let mut end = text.len().min(max_bytes + self.longest_span);
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let read = Edges {
            start: false,
            end: end < text.len(),
        };
        let masked = self.mask_piece(&text[..end], read);
        if masked.len() <= max_bytes {
            return masked.into_owned();
        }
        let mut end = max_bytes;
        while !masked.is_char_boundary(end) {
            end -= 1;
        }
        let cut = Edges {
            start: false,
            end: true,
        };
        self.mask_piece(&masked[..end], cut).into_owned()
    }

    /// At most `max_bytes` of the end of `text`, masked before it is cut.
    pub fn keep_end(&self, text: &str, max_bytes: usize) -> String {
        if text.len() <= max_bytes {
            return self.mask(text).into_owned();
        }
        let mut start = text.len().saturating_sub(max_bytes + self.longest_span);
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let read = Edges {
            start: start > 0,
            end: false,
        };
        let masked = self.mask_piece(&text[start..], read);
        if masked.len() <= max_bytes {
            return masked.into_owned();
        }
        let mut start = masked.len() - max_bytes;
        while !masked.is_char_boundary(start) {
            start += 1;
        }
        let cut = Edges {
            start: true,
            end: false,
        };
        self.mask_piece(&masked[start..], cut).into_owned()
    }

    /// Where the longest end of `text` starts that a value with a line break begins with:
    /// what a line-by-line writer must hold back until the next line says whether the value
    /// follows. `None` when nothing need be held.
    pub fn held_from(&self, text: &str) -> Option<usize> {
        self.multiline
            .iter()
            .map(|pattern| piece::start_at_end(text.as_bytes(), pattern))
            .max()
            .filter(|&len| len > 0)
            .map(|len| {
                let mut start = text.len() - len;
                while !text.is_char_boundary(start) {
                    start -= 1;
                }
                start
            })
    }

    /// Masks every string (and object key) in `value`.
    pub fn mask_json(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(text) => {
                if let Cow::Owned(masked) = self.mask(text) {
                    *text = masked;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.mask_json(item)),
            Value::Object(fields) => {
                let masked: serde_json::Map<String, Value> = std::mem::take(fields)
                    .into_iter()
                    .map(|(key, mut item)| {
                        self.mask_json(&mut item);
                        (self.mask(&key).into_owned(), item)
                    })
                    .collect();
                *fields = masked;
            }
            _ => {}
        }
    }

    /// Where whole values stand in `text`, in every reading.
    fn matches(&self, text: &[u8]) -> Vec<Range<usize>> {
        let mut ranges = Vec::new();
        for search in &self.searches {
            if !search.kind.applies(text) {
                continue;
            }
            let reading = Reading::of(search.kind, text);
            ranges.extend(
                search
                    .matcher
                    .find_iter(reading.bytes.as_ref())
                    .map(|found| reading.source(found.range())),
            );
        }
        ranges
    }

    /// Where pieces of values stand at the cut edges of `text`.
    fn pieces(&self, text: &[u8], edges: Edges, ranges: &mut Vec<Range<usize>>) {
        // A piece at an edge is at most one value's span long.
        let span = self.longest_span + 12;
        for search in &self.searches {
            let longest_in = |bytes: &[u8], find: fn(&[u8], &[u8]) -> usize| {
                search
                    .patterns
                    .iter()
                    .map(|pattern| find(bytes, pattern))
                    .max()
                    .unwrap_or(0)
            };
            if edges.end {
                let from = text.len().saturating_sub(span);
                let window = &text[from..];
                let split = search.kind.split_escape_start(window);
                let reading = Reading::of(search.kind, &window[..split]);
                let len = longest_in(&reading.bytes, piece::start_at_end);
                let n = reading.bytes.len();
                let source = reading.source(n - len..n);
                if len > 0
                    && (len >= MIN_PIECE_BYTES || window.len() - source.start >= MIN_PIECE_BYTES)
                {
                    ranges.push(from + source.start..text.len());
                }
            }
            if edges.start {
                let window = &text[..text.len().min(span)];
                for skip in 0..=search.kind.split_escape_rest(window) {
                    let reading = Reading::of(search.kind, &window[skip..]);
                    let len = longest_in(&reading.bytes, piece::end_at_start);
                    let end = skip + reading.source(0..len).end;
                    if len > 0 && (len >= MIN_PIECE_BYTES || end >= MIN_PIECE_BYTES) {
                        ranges.push(0..end);
                    }
                }
            }
            // All of a short text may stand inside one value.
            let start = if edges.start {
                search.kind.split_escape_rest(text)
            } else {
                0
            };
            let end = if edges.end {
                search.kind.split_escape_start(text)
            } else {
                text.len()
            };
            if start < end {
                let reading = Reading::of(search.kind, &text[start..end]);
                if (reading.bytes.len() >= MIN_PIECE_BYTES || text.len() >= MIN_PIECE_BYTES)
                    && !reading.bytes.is_empty()
                    && search
                        .patterns
                        .iter()
                        .any(|pattern| piece::inside(&reading.bytes, pattern))
                {
                    ranges.push(0..text.len());
                }
            }
        }
    }
}

/// `text` with each of `ranges` (widened to whole characters, overlapping ones joined)
/// replaced by one [`MASK`].
fn replace(text: &str, mut ranges: Vec<Range<usize>>) -> Cow<'_, str> {
    if ranges.is_empty() {
        return Cow::Borrowed(text);
    }
    for range in &mut ranges {
        while !text.is_char_boundary(range.start) {
            range.start -= 1;
        }
        while !text.is_char_boundary(range.end) {
            range.end += 1;
        }
    }
    ranges.retain(|range| !range.is_empty());
    if ranges.is_empty() {
        return Cow::Borrowed(text);
    }
    ranges.sort_by_key(|range| range.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for range in ranges {
        if range.end <= at {
            continue;
        }
        if range.start >= at {
            out.push_str(&text[at..range.start]);
            out.push_str(MASK);
        }
        at = range.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests;

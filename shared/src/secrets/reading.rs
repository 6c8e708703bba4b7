//! Readings of a text in which a secret may stand encoded: the text as it is, its JSON string
//! escapes undone (`\u00e4`, `\u00E4`, surrogate pairs, `\n`, `\/` — whatever a JSON encoder
//! chose), and its percent-encoding undone (`%40`, `%4a` or `%4A`, `+` or `%20` for a space —
//! whichever set of characters an encoder left alone). Each byte of a reading remembers the
//! part of the text it was read from, so a value found in a reading is masked where it stands.
//!
//! Decoding whatever escapes are there, rather than re-encoding each value the way each known
//! library would, is what makes every encoder's choice of "safe" characters irrelevant.

use std::borrow::Cow;
use std::ops::Range;

/// How a text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// As it is.
    Plain,
    /// JSON string escapes undone.
    Json,
    /// Percent-encoding undone, `+` and space read alike.
    Percent,
}

impl Kind {
    /// Whether a reading of `text` can differ from the plain one.
    pub(super) fn applies(self, text: &[u8]) -> bool {
        match self {
            Kind::Plain => true,
            Kind::Json => text.contains(&b'\\'),
            Kind::Percent => text.iter().any(|b| matches!(b, b'%' | b'+')),
        }
    }

    /// The forms a value takes in this reading. A `%` of a value that an encoder left as
    /// it is (WHATWG userinfo does) is read as the start of an escape, so a value with `%`
    /// is also looked for read that way.
    pub(super) fn canonical(self, value: &[u8]) -> Vec<Vec<u8>> {
        match self {
            Kind::Percent => {
                let escaped = value.iter().map(|&b| plus_as_space(b)).collect();
                let left = Reading::of(Kind::Percent, value).bytes.into_owned();
                if left == escaped {
                    vec![escaped]
                } else {
                    vec![escaped, left]
                }
            }
            Kind::Plain | Kind::Json => vec![value.to_vec()],
        }
    }

    /// How many bytes at the start of a text that was cut there may be the rest of an
    /// escape the cut split (they are tried as part of a piece).
    pub(super) fn split_escape_rest(self, text: &[u8]) -> usize {
        match self {
            Kind::Plain => 0,
            Kind::Percent => text
                .iter()
                .take(2)
                .take_while(|b| b.is_ascii_hexdigit())
                .count(),
            // `n` of `\n`, `u00e4` of `\u00e4`, or the rest of a surrogate pair: `de00`,
            // `\ude00`.
            Kind::Json => text
                .iter()
                .take(11)
                .take_while(|b| {
                    b.is_ascii_hexdigit()
                        || matches!(b, b'u' | b'U' | b'\\' | b'n' | b'r' | b't' | b'"' | b'/')
                })
                .count(),
        }
    }

    /// Where, at the end of a text that was cut there, an escape the cut split begins (the
    /// text's length when none was split).
    pub(super) fn split_escape_start(self, text: &[u8]) -> usize {
        match self {
            Kind::Plain => text.len(),
            Kind::Percent => {
                let n = text.len();
                if text.last() == Some(&b'%') {
                    n - 1
                } else if n >= 2 && text[n - 2] == b'%' && text[n - 1].is_ascii_hexdigit() {
                    n - 2
                } else {
                    n
                }
            }
            Kind::Json => {
                let mut end = strip_partial_json_escape(text, text.len());
                // A high surrogate whose low half was cut off.
                if end >= 6
                    && text[end - 6] == b'\\'
                    && hex4(text, end - 4).is_some_and(|u| (0xD800..0xDC00).contains(&u))
                {
                    end -= 6;
                }
                end
            }
        }
    }
}

/// `\`, `\u`, `\uX`, `\uXX` or `\uXXX` ending `text[..end]`: where it starts.
fn strip_partial_json_escape(text: &[u8], end: usize) -> usize {
    for len in 1..=5.min(end) {
        let start = end - len;
        let piece = &text[start..end];
        if piece[0] == b'\\'
            && (len == 1 || piece[1] == b'u')
            && piece[2.min(len)..].iter().all(u8::is_ascii_hexdigit)
            && !escaped(text, start)
        {
            return start;
        }
    }
    end
}

/// Whether the backslash at `at` is itself escaped by an odd run of backslashes before it.
fn escaped(text: &[u8], at: usize) -> bool {
    text[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
}

fn plus_as_space(byte: u8) -> u8 {
    if byte == b'+' { b' ' } else { byte }
}

/// A text read one way: its bytes, and for each the part of the text it came from.
#[derive(Debug)]
pub(super) struct Reading<'t> {
    pub(super) bytes: Cow<'t, [u8]>,
    /// For each byte, the range of the text it was read from; `None` for the plain
    /// reading, where byte `i` is text byte `i`.
    from: Option<Vec<Range<usize>>>,
}

impl Reading<'_> {
    /// `text` read as `kind`.
    pub(super) fn of(kind: Kind, text: &[u8]) -> Reading<'_> {
        match kind {
            Kind::Plain => Reading {
                bytes: Cow::Borrowed(text),
                from: None,
            },
            Kind::Json => decode(text, json_unit),
            Kind::Percent => decode(text, percent_unit),
        }
    }

    /// The part of the text bytes `range` of this reading came from.
    pub(super) fn source(&self, range: Range<usize>) -> Range<usize> {
        match &self.from {
            None => range,
            Some(_) if range.is_empty() => range.start..range.start,
            Some(from) => from[range.start].start..from[range.end - 1].end,
        }
    }
}

/// Reads `text` unit by unit: `unit` decodes the unit at an offset into bytes and says how
/// long it was, or `None` for a byte taken as it is.
fn decode(
    text: &[u8],
    unit: impl Fn(&[u8], usize, &mut Vec<u8>) -> Option<usize>,
) -> Reading<'static> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut from = Vec::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        let before = bytes.len();
        let len = unit(text, at, &mut bytes).unwrap_or_else(|| {
            bytes.push(text[at]);
            1
        });
        for _ in before..bytes.len() {
            from.push(at..at + len);
        }
        at += len;
    }
    Reading {
        bytes: Cow::Owned(bytes),
        from: Some(from),
    }
}

fn json_unit(text: &[u8], at: usize, out: &mut Vec<u8>) -> Option<usize> {
    if text[at] != b'\\' {
        return None;
    }
    let simple = match text.get(at + 1)? {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' | b'U' => return unicode_escape(text, at, out),
        _ => return None,
    };
    out.push(simple);
    Some(2)
}

/// `\uXXXX`, or a surrogate pair `\uD83D\uDE00`, in either case of hex.
fn unicode_escape(text: &[u8], at: usize, out: &mut Vec<u8>) -> Option<usize> {
    let unit = hex4(text, at + 2)?;
    let (scalar, len) = if (0xD800..0xDC00).contains(&unit) {
        let low = text
            .get(at + 6..at + 8)
            .filter(|s| s[0] == b'\\' && matches!(s[1], b'u' | b'U'))
            .and_then(|_| hex4(text, at + 8))
            .filter(|low| (0xDC00..0xE000).contains(low))?;
        (0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00), 12)
    } else {
        (unit, 6)
    };
    let c = char::from_u32(scalar)?;
    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    Some(len)
}

fn hex4(text: &[u8], at: usize) -> Option<u32> {
    let digits = text.get(at..at + 4)?;
    digits.iter().try_fold(0u32, |acc, &b| {
        char::from(b).to_digit(16).map(|digit| acc * 16 + digit)
    })
}

fn percent_unit(text: &[u8], at: usize, out: &mut Vec<u8>) -> Option<usize> {
    match text[at] {
        b'%' => {
            let digits = text.get(at + 1..at + 3)?;
            let high = char::from(digits[0]).to_digit(16)?;
            let low = char::from(digits[1]).to_digit(16)?;
            out.push(plus_as_space((high * 16 + low) as u8));
            Some(3)
        }
        b'+' => {
            out.push(b' ');
            Some(1)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(kind: Kind, text: &str) -> String {
        String::from_utf8_lossy(&Reading::of(kind, text.as_bytes()).bytes).into_owned()
    }

    #[test]
    fn json_escapes_of_every_encoder_read_as_the_characters() {
        assert_eq!(
            read(
                Kind::Json,
                r#"p\u00e4ss\u00C4 \u20ac\ud83d\ude00 a\/b \"q\" \\ x\ny"#
            ),
            "päss\u{c4} €\u{1F600} a/b \"q\" \\ x\ny"
        );
        // A lone surrogate and a bad escape stay as written.
        assert_eq!(read(Kind::Json, r"\ud83d x \q"), r"\ud83d x \q");
    }

    #[test]
    fn percent_escapes_in_either_case_and_plus_read_as_bytes() {
        assert_eq!(
            read(Kind::Percent, "p%40ss%2dw0rd%2B+%20%0A%zz"),
            "p@ss-w0rd   \n%zz"
        );
        assert_eq!(read(Kind::Percent, "%C3%A4"), "ä");
    }

    #[test]
    fn a_byte_of_a_reading_maps_back_to_its_escape() {
        let reading = Reading::of(Kind::Json, br"ab\u00e4c");
        // "ab" + 2 bytes of ä + "c"
        assert_eq!(reading.bytes.len(), 5);
        assert_eq!(reading.source(2..4), 2..8);
        assert_eq!(reading.source(2..3), 2..8);
        assert_eq!(reading.source(4..5), 8..9);
        let reading = Reading::of(Kind::Percent, b"x%41y");
        assert_eq!(reading.source(1..2), 1..4);
    }

    #[test]
    fn escapes_split_by_a_cut_are_found_at_either_edge() {
        assert_eq!(Kind::Percent.split_escape_start(b"ab%4"), 2);
        assert_eq!(Kind::Percent.split_escape_start(b"ab%"), 2);
        assert_eq!(Kind::Percent.split_escape_start(b"ab%41"), 5);
        assert_eq!(Kind::Json.split_escape_start(br"ab\u00"), 2);
        assert_eq!(Kind::Json.split_escape_start(br"ab\"), 2);
        assert_eq!(Kind::Json.split_escape_start(br"ab\\"), 4);
        assert_eq!(Kind::Json.split_escape_start(br"ab\ud83d"), 2);
        assert_eq!(Kind::Json.split_escape_start(br"ab\ud83d\u"), 2);
        assert_eq!(Kind::Percent.split_escape_rest(b"0ss"), 1);
        assert_eq!(Kind::Json.split_escape_rest(b"00e4ss"), 4);
        assert_eq!(Kind::Plain.split_escape_rest(b"00e4ss"), 0);
    }
}

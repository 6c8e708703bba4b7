//! The masker against the encoders that print values: each encoder here is written apart from
//! the masker (from the libraries' documented character sets), so a test does not feed the
//! masker its own encoding.

use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, utf8_percent_encode};
use proptest::prelude::*;
use serde_json::json;

use super::*;

/// One encoded unit of a value (a character or a byte) and how many bytes of the value it
/// holds.
type Units = Vec<(String, usize)>;

/// An encoder: a value as units.
type Encoder = fn(&str) -> Units;

fn per_char(value: &str, encode: impl Fn(char) -> String) -> Units {
    value.chars().map(|c| (encode(c), c.len_utf8())).collect()
}

/// Whether `set` leaves the ASCII byte `b` as it is.
fn kept(b: u8, set: &'static AsciiSet) -> bool {
    let c = char::from(b).to_string();
    utf8_percent_encode(&c, set).to_string() == c
}

fn per_byte(value: &str, set: &'static AsciiSet, space: Option<&str>, lower: bool) -> Units {
    value
        .bytes()
        .map(|b| {
            let unit = if b == b' ' && space.is_some() {
                space.unwrap_or_default().to_owned()
            } else if b.is_ascii() && kept(b, set) {
                char::from(b).to_string()
            } else if lower {
                format!("%{b:02x}")
            } else {
                format!("%{b:02X}")
            };
            (unit, 1)
        })
        .collect()
}

/// `\uXXXX` escapes for everything outside printable ASCII, as Python's `json.dumps`
/// (`ensure_ascii`, the default) prints, or .NET's encoder with upper-case hex and the
/// HTML-sensitive characters escaped, or PHP's with `/` escaped.
fn ascii_json(c: char, upper: bool, extra: &str, slash: bool) -> String {
    let hex = |unit: u16| {
        if upper {
            format!("\\u{unit:04X}")
        } else {
            format!("\\u{unit:04x}")
        }
    };
    match c {
        '"' => "\\\"".into(),
        '\\' => "\\\\".into(),
        '\n' => "\\n".into(),
        '\t' => "\\t".into(),
        '/' if slash => "\\/".into(),
        c if extra.contains(c) => hex(c as u16),
        ' '..='~' => c.to_string(),
        c => c
            .encode_utf16(&mut [0; 2])
            .iter()
            .map(|&u| hex(u))
            .collect(),
    }
}

/// What the WHATWG URL standard (and so the `url` crate) escapes in a password.
const USERINFO: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'/')
    .add(b':')
    .add(b';')
    .add(b'=')
    .add(b'@')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'|');
/// RFC 3986 unreserved kept: Go's `QueryEscape`, Python's `quote_plus`.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');
/// Python's `quote` keeps `/` by default.
const PY_QUOTE: &AsciiSet = &UNRESERVED.remove(b'/');
/// JavaScript's `encodeURIComponent`.
const JS_COMPONENT: &AsciiSet = &UNRESERVED
    .remove(b'!')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');
/// `application/x-www-form-urlencoded` (WHATWG, serde_urlencoded, reqwest's `form`).
const FORM: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'*')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_');

fn encoders() -> Vec<(&'static str, Encoder)> {
    vec![
        ("as written", |v| per_char(v, |c| c.to_string())),
        ("serde_json", |v| {
            per_char(v, |c| {
                let quoted = serde_json::to_string(&c.to_string()).unwrap_or_default();
                quoted[1..quoted.len() - 1].to_owned()
            })
        }),
        ("json.dumps", |v| {
            per_char(v, |c| ascii_json(c, false, "", false))
        }),
        (".NET JSON", |v| {
            per_char(v, |c| ascii_json(c, true, "+<>&'`", false))
        }),
        ("PHP json_encode", |v| {
            per_char(v, |c| ascii_json(c, false, "", true))
        }),
        ("percent, upper", |v| {
            per_byte(v, NON_ALPHANUMERIC, None, false)
        }),
        ("percent, lower", |v| {
            per_byte(v, NON_ALPHANUMERIC, None, true)
        }),
        ("WHATWG userinfo", |v| per_byte(v, USERINFO, None, false)),
        ("Go QueryEscape", |v| {
            per_byte(v, UNRESERVED, Some("+"), false)
        }),
        ("Python quote", |v| per_byte(v, PY_QUOTE, None, false)),
        ("Python quote_plus", |v| {
            per_byte(v, UNRESERVED, Some("+"), false)
        }),
        ("encodeURIComponent", |v| {
            per_byte(v, JS_COMPONENT, None, false)
        }),
        ("form", |v| per_byte(v, FORM, Some("+"), false)),
    ]
}

/// Every shortest run of units holding [`MIN_PIECE_BYTES`] or more of the value: a text
/// holding any run of that many bytes holds one of these.
fn shortest_runs(units: &Units) -> Vec<String> {
    let mut runs = Vec::new();
    for start in 0..units.len() {
        let mut bytes = 0;
        for end in start..units.len() {
            bytes += units[end].1;
            if bytes >= MIN_PIECE_BYTES {
                runs.push(units[start..=end].iter().map(|(u, _)| u.as_str()).collect());
                break;
            }
        }
    }
    runs
}

fn leaks(text: &str, runs: &[String]) -> Option<String> {
    runs.iter().find(|run| text.contains(run.as_str())).cloned()
}

/// Char boundaries of `text`.
fn cuts(text: &str) -> impl Iterator<Item = usize> + '_ {
    (0..=text.len()).filter(|&at| text.is_char_boundary(at))
}

/// Checks `text` (with `value` encoded inside it) masked whole, masked then cut at every
/// length from either end, and cut at every length before masking.
fn check_every_cut(masker: &Masker, text: &str, runs: &[String], what: &str) {
    let whole = masker.mask(text);
    assert_eq!(leaks(&whole, runs), None, "{what}: masked whole: {whole}");
    for at in cuts(text) {
        for (how, masked) in [
            ("keep_start", masker.keep_start(text, at)),
            ("keep_end", masker.keep_end(text, at)),
            (
                "cut end, then masked",
                masker
                    .mask_piece(
                        &text[..at],
                        Edges {
                            start: false,
                            end: true,
                        },
                    )
                    .into_owned(),
            ),
            (
                "cut start, then masked",
                masker
                    .mask_piece(
                        &text[at..],
                        Edges {
                            start: true,
                            end: false,
                        },
                    )
                    .into_owned(),
            ),
        ] {
            if let Some(run) = leaks(&masked, runs) {
                panic!("{what}: {how} at {at} leaves {run:?} in {masked:?} (from {text:?})");
            }
            if how.starts_with("keep") {
                assert!(masked.len() <= at, "{what}: {how} at {at} is too long");
            }
        }
    }
}

/// Values with what makes masking hard: regex and URL metacharacters, quotes, backslashes,
/// non-ASCII (two-, three- and four-byte characters), spaces, plus signs and line breaks.
/// No `*` (masks are made of it) and none of the context's characters.
fn value() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            8 => proptest::char::range('a', 'z'),
            2 => proptest::char::range('0', '9'),
            1 => Just('A'),
            6 => proptest::sample::select(vec![
                ' ', '!', '"', '#', '$', '%', '&', '\'', '(', ')', '+', ',', '-', '.', '/', ':',
                ';', '<', '=', '>', '?', '@', '[', '\\', ']', '^', '_', '`', '{', '|', '}', '~',
                '\n', 'é', 'ä', '€', '😀',
            ]),
        ],
        4..24,
    )
    .prop_map(|chars| chars.into_iter().collect::<String>())
    .prop_filter("long enough to be a secret", |v| v.len() >= MIN_VALUE_BYTES)
}

fn context() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(vec!['§', '¶', '·']), 0..6)
        .prop_map(|chars| chars.into_iter().collect::<String>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn no_encoding_of_a_value_survives_masking_and_any_cut(
        value in value(),
        before in context(),
        after in context(),
    ) {
        let masker = Masker::new([value.as_str()]);
        for (name, encode) in encoders() {
            let units = encode(&value);
            let encoded: String = units.iter().map(|(u, _)| u.as_str()).collect();
            let text = format!("{before}{encoded}{after}");
            check_every_cut(&masker, &text, &shortest_runs(&units), name);
        }
    }

    #[test]
    fn a_value_inside_another_is_masked_with_it(
        inner in value(),
        before in "[a-z]{1,5}",
        after in "[a-z]{1,5}",
    ) {
        let outer = format!("{before}{inner}{after}");
        let masker = Masker::new([inner.as_str(), outer.as_str()]);
        for value in [&inner, &outer] {
            let units = per_char(value, |c| c.to_string());
            let text = format!("§{value}¶{outer}·{inner}");
            check_every_cut(&masker, &text, &shortest_runs(&units), "nested");
        }
    }
}

#[test]
fn the_issues_spellings_are_masked() {
    let masker = Masker::new(["pässwört€", "a.b*c+(d)|", "p@ss-w0rd", "line one\nline two"]);
    for (text, masked) in [
        (
            r#"{"password": "p\u00e4ssw\u00f6rt\u20ac"}"#,
            r#"{"password": "***"}"#,
        ),
        (
            r#"{"password": "p\u00E4ssw\u00F6rt\u20AC"}"#,
            r#"{"password": "***"}"#,
        ),
        ("rtsp://u:a.b*c+(d)%7C@h/", "rtsp://u:***@h/"),
        ("rtsp://u:p%40ss-w0rd@10.0.0.7/s", "rtsp://u:***@10.0.0.7/s"),
        ("q=p%40ss-w0rd&x", "q=***&x"),
        ("q=p%40ss%2dw0rd&x", "q=***&x"),
        ("body=line+one%0Aline+two", "body=***"),
        ("body=line%20one%0aline%20two", "body=***"),
        (r#"{"v":"line one\nline two"}"#, r#"{"v":"***"}"#),
        ("said: line one\nline two.", "said: ***."),
        ("&lt;p@ss-w0rd&gt;", "&lt;***&gt;"),
    ] {
        assert_eq!(masker.mask(text), masked, "{text}");
    }
}

#[test]
fn a_password_in_a_basic_credential_is_masked() {
    use base64::Engine as _;
    let masker = Masker::new(["hunter22-and-more"]);
    for user in ["a", "ab", "abc", "admin"] {
        let header = format!(
            "Authorization: Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:hunter22-and-more"))
        );
        let masked = masker.mask(&header);
        assert!(masked.contains(MASK), "{header} → {masked}");
        assert!(!masked.contains("aHVudGVy"), "{masked}");
    }
}

#[test]
fn a_long_token_cut_in_a_line_leaves_no_run_of_it() {
    let token: String = (0..4096)
        .map(|i| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[i * 7 % 36]))
        .collect();
    let masker = Masker::new([token.as_str()]);
    let line = format!("login failed: token={token}");
    assert_eq!(masker.keep_start(&line, 4096), "login failed: token=***");
    // Cut before masking, as a stream's window is.
    let cut = masker.mask_piece(
        &line[..4096],
        Edges {
            start: false,
            end: true,
        },
    );
    assert_eq!(cut, "login failed: token=***");
    let tail = masker.mask_piece(
        &line[100..],
        Edges {
            start: true,
            end: false,
        },
    );
    assert_eq!(tail, "***");
}

#[test]
fn short_ordinary_text_at_a_cut_is_left_alone() {
    let masker = Masker::new(["correct horse battery"]);
    let edges = Edges {
        start: true,
        end: true,
    };
    assert_eq!(
        masker.mask_piece("the camera answered", edges),
        "the camera answered"
    );
    assert_eq!(
        masker.mask_piece("cor", edges),
        "cor",
        "three bytes are not a piece"
    );
    assert_eq!(masker.mask_piece("see: corr", edges), "see: ***");
    assert_eq!(masker.mask_piece("ttery. ok", edges), "***. ok");
}

#[test]
fn a_line_that_may_start_a_multiline_value_is_held() {
    let masker = Masker::new(["-----BEGIN KEY-----\nabcdef\n-----END KEY-----"]);
    assert_eq!(masker.held_from("log\n-----BEGIN KEY-----\n"), Some(4));
    assert_eq!(
        masker.held_from("log\n-----BEGIN KEY-----\nabcdef\n"),
        Some(4)
    );
    assert_eq!(masker.held_from("log\nother\n"), None);
    assert_eq!(Masker::new(["single line"]).held_from("single "), None);
}

#[test]
fn json_values_are_masked_in_strings_and_keys() {
    let masker = Masker::new(["s3cr3t/p@ss"]);
    let mut output = json!({"error": "auth s3cr3t%2Fp%40ss refused", "s3cr3t/p@ss": [1]});
    masker.mask_json(&mut output);
    assert_eq!(output, json!({"error": "auth *** refused", "***": [1]}));
}

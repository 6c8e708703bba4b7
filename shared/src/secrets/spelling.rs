//! The spellings of a value looked for in each reading of a text. Escapes a reading undoes
//! (JSON, percent) need no spelling of their own; what is left are the encodings that no
//! reading undoes: HTML/XML escaping, and base64 (an `Authorization: Basic` header holds
//! `base64(user:password)`, so the password stands at any of three alignments inside it).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

use super::reading::Kind;

/// The shortest base64 piece worth masking: shorter ones match ordinary base64 by chance.
const MIN_BASE64_CHARS: usize = 6;

/// What to look for in the `kind` reading of a text for `value`.
pub(super) fn spellings(kind: Kind, value: &str) -> Vec<Vec<u8>> {
    let mut found = kind.canonical(value.as_bytes());
    if kind == Kind::Plain {
        let escaped = html_escaped(value);
        if escaped != value {
            found.push(escaped.into_bytes());
        }
        found.extend(base64_inside(value.as_bytes()));
    }
    found.sort();
    found.dedup();
    found
}

/// `value` as HTML and XML templates print it.
fn html_escaped(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// The base64 characters that depend on `value` alone when it stands at each of the three
/// byte alignments inside a longer encoded text, in the standard and the URL-safe alphabet.
fn base64_inside(value: &[u8]) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    for shift in 0..3 {
        let mut bytes = vec![0u8; shift];
        bytes.extend_from_slice(value);
        let total_bits = bytes.len() * 8;
        // Characters holding a bit of the padding in front, and one holding bits of
        // whatever follows the value.
        let first = (shift * 8).div_ceil(6);
        let last = total_bits / 6;
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&bytes);
            if let Some(inner) = encoded.as_bytes().get(first..last)
                && inner.len() >= MIN_BASE64_CHARS
            {
                found.push(inner.to_vec());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_inside_a_basic_credential_is_spelled_at_its_alignment() {
        let spelled = spellings(Kind::Plain, "hunter22");
        for user in ["a", "ab", "abc"] {
            let header = STANDARD_NO_PAD.encode(format!("{user}:hunter22"));
            assert!(
                spelled
                    .iter()
                    .any(|s| header.contains(std::str::from_utf8(s).expect("ascii"))),
                "{header}"
            );
        }
        assert!(spelled.contains(&b"hunter22".to_vec()));
    }

    #[test]
    fn html_escaping_and_the_percent_readings_form() {
        assert!(spellings(Kind::Plain, "a<b&c'd").contains(&b"a&lt;b&amp;c&#39;d".to_vec()));
        assert_eq!(spellings(Kind::Percent, "a+b c"), vec![b"a b c".to_vec()]);
        assert_eq!(
            spellings(Kind::Json, "pässwört€"),
            vec!["pässwört€".as_bytes().to_vec()]
        );
    }
}

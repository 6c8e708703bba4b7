//! Content negotiation that cannot refuse. A function acts before its answer is encoded, so
//! an `Accept-Encoding` that excludes everything (`identity;q=0`) must not turn a claim
//! that was made into a 406: exclusions are dropped and such a client gets the plain
//! answer, which RFC 9110 §12.5.3 allows ("disregard the header field").

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::http::header::ACCEPT_ENCODING;

/// Removes every `q=0` entry from `Accept-Encoding` (the whole header when nothing is
/// left), so the compression layer picks gzip or identity and never answers 406.
pub(crate) async fn drop_exclusions(mut request: Request) -> Request {
    let Some(header) = request.headers().get(ACCEPT_ENCODING) else {
        return request;
    };
    let Ok(text) = header.to_str() else {
        request.headers_mut().remove(ACCEPT_ENCODING);
        return request;
    };
    let kept = kept_encodings(text);
    if kept.len() == text.len() {
        return request;
    }
    match HeaderValue::from_str(&kept) {
        Ok(value) if !kept.is_empty() => {
            request.headers_mut().insert(ACCEPT_ENCODING, value);
        }
        _ => {
            request.headers_mut().remove(ACCEPT_ENCODING);
        }
    }
    request
}

fn kept_encodings(header: &str) -> String {
    header
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty() && !excluded(entry))
        .collect::<Vec<_>>()
        .join(", ")
}

fn excluded(entry: &str) -> bool {
    entry.split(';').skip(1).any(|param| {
        let param = param.trim();
        let Some(value) = param
            .strip_prefix("q=")
            .or_else(|| param.strip_prefix("Q="))
        else {
            return false;
        };
        value.trim().parse::<f32>().is_ok_and(|q| q <= 0.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusions_are_dropped_and_the_rest_kept() {
        assert_eq!(kept_encodings("identity;q=0"), "");
        assert_eq!(kept_encodings("gzip, identity;q=0"), "gzip");
        assert_eq!(kept_encodings("br;q=1.0, *;q=0"), "br;q=1.0");
        assert_eq!(kept_encodings("gzip;q=0.000, deflate"), "deflate");
        assert_eq!(kept_encodings("gzip;q=0.5"), "gzip;q=0.5");
    }
}

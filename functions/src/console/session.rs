//! Signing in and out, the session cookie and the CSRF token.
//!
//! A session is a random token in an HttpOnly, SameSite=Strict cookie; the database keeps
//! its SHA-256 and the key it stands for, so a revoked key ends its sessions at once. The
//! CSRF token is derived from the session token, so it is secret, tied to one session and
//! refused after sign-out. The key itself is read once from the sign-in form and never
//! stored, shown, logged or put in a URL.

use askama::Template;
use axum::extract::rejection::FormRejection;
use std::net::SocketAddr;

use axum::Extension;
use axum::extract::{ConnectInfo, Form, FromRequestParts, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::error::ConsoleError;
use super::view::Chrome;
use crate::access::{Caller, Role};
use crate::auth::{Reader, generate_token, hash_token};
use crate::db;
use crate::error::ApiError;
use crate::serve::in_lambda;
use crate::state::AppState;

/// How long a sign-in lasts.
const SESSION_HOURS: i64 = 12;
const COOKIE: &str = "res_console";
/// Over HTTPS: the `__Host-` prefix pins the cookie to this host and path `/`.
const SECURE_COOKIE: &str = "__Host-res_console";

/// A signed-in caller of the console.
#[derive(Debug, Clone)]
pub(crate) struct Signed {
    pub(crate) caller: Caller,
    /// The token every form of this session carries.
    pub(crate) csrf: String,
    token_hash: String,
}

impl Signed {
    /// The caller as the read functions take it.
    pub(crate) fn reader(&self) -> Reader {
        Reader(self.caller.clone())
    }

    /// Refuses a form whose token is not this session's (forged, or from an earlier
    /// session): before anything is done.
    pub(crate) fn check_csrf(&self, token: &str) -> Result<(), ConsoleError> {
        if constant_time_eq(token.as_bytes(), self.csrf.as_bytes()) {
            Ok(())
        } else {
            Err(ConsoleError::Forbidden(
                "this form is stale or was not made by this console session; reload the page \
                 and try again"
                    .into(),
            ))
        }
    }

    /// The page frame for this session.
    pub(crate) fn chrome(&self, section: &'static str) -> Chrome {
        Chrome {
            key_name: self.caller.key_name.clone(),
            role: self.caller.role.as_str(),
            may_act: self.caller.may_act().is_ok(),
            csrf: self.csrf.clone(),
            section,
        }
    }
}

impl FromRequestParts<AppState> for Signed {
    type Rejection = ConsoleError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ConsoleError> {
        let sign_in = || ConsoleError::SignIn {
            next: parts
                .uri
                .path_and_query()
                .map(|p| p.as_str().to_owned())
                .filter(|_| parts.method == Method::GET),
        };
        let token = session_token(&parts.headers).ok_or_else(sign_in)?;
        let token_hash = hash_token(token);
        let caller = db::api_keys::find_by_session(&state.pool, &token_hash)
            .await
            .map_err(ApiError::from)?
            .filter(|caller| console_role(caller.role))
            .ok_or_else(sign_in)?;
        Ok(Signed {
            caller,
            csrf: csrf_of(token),
            token_hash,
        })
    }
}

/// Operator and viewer keys are for people; runner and service keys are for machines.
fn console_role(role: Role) -> bool {
    matches!(role, Role::Operator | Role::Viewer | Role::Admin)
}

/// The session token from the request's cookies.
fn session_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE || *name == SECURE_COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|value| !value.is_empty())
}

fn csrf_of(session_token: &str) -> String {
    hash_token(&format!("csrf:{session_token}"))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Served over HTTPS: behind API Gateway (always), or a proxy that says so.
fn over_https(headers: &HeaderMap) -> bool {
    in_lambda()
        || headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}

fn cookie(headers: &HeaderMap, value: &str, max_age: i64) -> Result<HeaderValue, ConsoleError> {
    let text = if over_https(headers) {
        format!(
            "{SECURE_COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict; Secure"
        )
    } else {
        format!("{COOKIE}={value}; Path=/console; Max-Age={max_age}; HttpOnly; SameSite=Strict")
    };
    HeaderValue::from_str(&text)
        .map_err(|_| ApiError::Internal("the session cookie is not a header value".into()).into())
}

/// Refuses a POST another site's page sent: browsers name the page's origin, and it must
/// be this host. (SameSite=Strict already keeps the session cookie off such requests; this
/// also covers signing in.)
pub(super) async fn same_origin(request: Request, next: Next) -> Response {
    let authority = request.uri().authority().map(|a| a.as_str().to_owned());
    if request.method() == Method::POST && !from_this_site(request.headers(), authority.as_deref())
    {
        return ConsoleError::Forbidden("this form was sent from another site's page".into())
            .into_response();
    }
    next.run(request).await
}

/// Whether a POST comes from this site's own pages, by what the browser says: `Origin`;
/// without it `Sec-Fetch-Site`; without that `Referer`. A client that sends none of them
/// (curl) still needs the session's CSRF token.
fn from_this_site(headers: &HeaderMap, authority: Option<&str>) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    // HTTP/2 names the host in the URI's authority, not a Host header.
    let host = text(header::HOST).or(authority);
    let same_host = |url: &str| {
        let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        host.is_some_and(|host| authority == host)
    };
    if let Some(origin) = text(header::ORIGIN) {
        return same_host(origin);
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return matches!(site, "same-origin" | "none");
    }
    text(header::REFERER).is_none_or(same_host)
}

/// Refused sign-ins one client address may make in `SIGN_IN_WINDOW_SECONDS` before it is
/// answered 429 (docs/console.md).
const MAX_SIGN_IN_FAILURES: i64 = 10;
const SIGN_IN_WINDOW_SECONDS: i64 = 15 * 60;

/// Who is signing in, as far as rate limits go: on Lambda the right-most
/// `X-Forwarded-For` entry (the one API Gateway appends; earlier ones are the client's to
/// write), else the connection's peer.
fn client_address(headers: &HeaderMap, peer: Option<SocketAddr>) -> String {
    let forwarded = in_lambda()
        .then(|| headers.get("x-forwarded-for"))
        .flatten()
        .and_then(|v| v.to_str().ok())
        .and_then(|list| list.rsplit(',').next())
        .map(str::trim)
        .filter(|address| !address.is_empty());
    match (forwarded, peer) {
        (Some(address), _) => address.to_owned(),
        (None, Some(peer)) => peer.ip().to_string(),
        (None, None) => "unknown".to_owned(),
    }
}

/// Where to go after signing in: a console page, never elsewhere.
fn landing(next: Option<&str>) -> &str {
    // A control character (CR/LF, NUL) cannot go into a Location header.
    next.filter(|n| {
        n.starts_with("/console/")
            && !n.starts_with("/console//")
            && !n.chars().any(char::is_control)
            && HeaderValue::from_str(n).is_ok()
    })
    .unwrap_or("/console/")
}

#[derive(Template)]
#[template(path = "console/sign_in.html")]
struct SignInPage<'a> {
    next: &'a str,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct NextQuery {
    next: Option<String>,
}

pub(super) async fn sign_in_page(Query(query): Query<NextQuery>) -> Result<Response, ConsoleError> {
    super::html(&SignInPage {
        next: landing(query.next.as_deref()),
        error: None,
    })
}

#[derive(Deserialize)]
pub(super) struct SignInForm {
    #[serde(default)]
    key: String,
    #[serde(default)]
    next: Option<String>,
}

pub(super) async fn sign_in(
    State(state): State<AppState>,
    headers: HeaderMap,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    form: Result<Form<SignInForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    let next = landing(form.next.as_deref());
    let address = client_address(&headers, peer.map(|Extension(ConnectInfo(peer))| peer));
    let page = |status: StatusCode, error: &str| -> Result<Response, ConsoleError> {
        let page = SignInPage {
            next,
            error: Some(error.to_owned()),
        };
        Ok((status, super::html(&page)?).into_response())
    };
    // Bounded before any key is looked up: guessing keys from one address stops here.
    let (failures, oldest) =
        db::api_keys::sign_in_failures(&state.pool, &address, SIGN_IN_WINDOW_SECONDS)
            .await
            .map_err(ApiError::from)?;
    if failures >= MAX_SIGN_IN_FAILURES {
        let wait = (SIGN_IN_WINDOW_SECONDS as f64 - oldest.unwrap_or(0.0))
            .ceil()
            .max(1.0) as i64;
        let mut refused = page(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "too many refused sign-ins from your address ({MAX_SIGN_IN_FAILURES} in 15 \
                 minutes); try again in {} min",
                (wait + 59) / 60
            ),
        )?;
        refused
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(wait));
        return Ok(refused);
    }
    let refuse = |status: StatusCode, error: String| {
        let pool = state.pool.clone();
        let address = address.clone();
        async move {
            db::api_keys::record_sign_in_failure(&pool, &address)
                .await
                .map_err(ApiError::from)?;
            page(status, &error)
        }
    };
    let key = form.key.trim();
    if key.is_empty() {
        return refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "key: paste an operator or viewer key".to_owned(),
        )
        .await;
    }
    let Some(caller) = db::api_keys::find_live(&state.pool, &hash_token(key))
        .await
        .map_err(ApiError::from)?
    else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "key: unknown or revoked key".to_owned(),
        )
        .await;
    };
    if !console_role(caller.role) {
        return refuse(
            StatusCode::FORBIDDEN,
            format!(
                "key: {} keys are for machines; sign in with an operator or viewer key",
                caller.role.as_str()
            ),
        )
        .await;
    }
    let token = generate_token();
    // Everything the answer needs is made before the session exists, so no failure after
    // this point can leave a session behind an error page.
    let set = cookie(&headers, &token, SESSION_HOURS * 3_600)?;
    db::api_keys::insert_session(
        &state.pool,
        &hash_token(&token),
        caller.key_id,
        chrono::TimeDelta::hours(SESSION_HOURS),
    )
    .await
    .map_err(ApiError::from)?;
    tracing::info!(key = %caller.key_name, "console sign-in");
    Ok(([(header::SET_COOKIE, set)], Redirect::to(next)).into_response())
}

#[derive(Deserialize)]
pub(super) struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

pub(super) async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
    signed: Signed,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    signed.check_csrf(&form.csrf)?;
    db::api_keys::delete_session(&state.pool, &signed.token_hash)
        .await
        .map_err(ApiError::from)?;
    let clear = cookie(&headers, "", 0)?;
    Ok((
        [(header::SET_COOKIE, clear)],
        Redirect::to("/console/sign-in"),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("theme=dark; res_console=abc ; other=1"),
        );
        assert_eq!(session_token(&headers), Some("abc"));
        headers.insert(header::COOKIE, HeaderValue::from_static("res_console="));
        assert_eq!(session_token(&headers), None);
    }

    #[test]
    fn csrf_tokens_belong_to_one_session() {
        assert_eq!(csrf_of("a"), csrf_of("a"));
        assert_ne!(csrf_of("a"), csrf_of("b"));
        assert_ne!(csrf_of("a"), hash_token("a"), "not the stored session hash");
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn posts_are_judged_by_origin_then_sec_fetch_site_then_referer() {
        let host = ("host", "res.example:8080");
        for (pairs, allowed) in [
            (vec![host, ("origin", "https://res.example:8080")], true),
            (vec![host, ("origin", "https://evil.example")], false),
            (vec![host, ("origin", "null")], false),
            (vec![host, ("sec-fetch-site", "same-origin")], true),
            (vec![host, ("sec-fetch-site", "none")], true),
            (vec![host, ("sec-fetch-site", "cross-site")], false),
            (vec![host, ("sec-fetch-site", "same-site")], false),
            (
                vec![host, ("referer", "http://res.example:8080/console/rules")],
                true,
            ),
            (
                vec![host, ("referer", "http://evil.example/res.example:8080")],
                false,
            ),
            (vec![host], true),
        ] {
            assert_eq!(from_this_site(&headers(&pairs), None), allowed, "{pairs:?}");
        }
        let h2 = headers(&[("origin", "https://res.example")]);
        assert!(from_this_site(&h2, Some("res.example")));
    }

    #[test]
    fn a_client_is_its_peer_unless_a_lambda_proxy_names_it() {
        let peer = "192.0.2.7:50000".parse().ok();
        let forged = headers(&[("x-forwarded-for", "203.0.113.9")]);
        // Not on Lambda: a header anyone can send does not move the limit.
        assert_eq!(client_address(&forged, peer), "192.0.2.7");
        assert_eq!(client_address(&HeaderMap::new(), None), "unknown");
    }

    #[test]
    fn sign_in_lands_only_on_console_pages() {
        assert_eq!(landing(Some("/console/rules/1")), "/console/rules/1");
        for elsewhere in [
            "https://evil.example/",
            "//evil.example",
            "/console//evil",
            "/functions/v1/x",
            "/console/\r\nSet-Cookie: a=b",
            "/console/rules\0",
            "/console/\u{7f}",
        ] {
            assert_eq!(landing(Some(elsewhere)), "/console/", "{elsewhere}");
        }
        assert_eq!(landing(None), "/console/");
    }
}

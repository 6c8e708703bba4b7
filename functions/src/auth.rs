//! Bearer tokens: from the `Authorization` header to the [`Caller`] it belongs to.
//!
//! Tokens are 256 random bits, so a plain SHA-256 is a safe thing to store and look up by;
//! a slow password hash would only cost latency on every call.

use std::fmt::Write as _;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

pub use crate::access::{Caller, Denied, Role, Scope};
use crate::db;
use crate::error::ApiError;
use crate::state::AppState;

/// Prefix of every token, so leaked tokens are easy to recognise and scan for.
const TOKEN_PREFIX: &str = "res_";

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts.headers.get(AUTHORIZATION).ok_or_else(|| {
            ApiError::Unauthorized("missing Authorization: Bearer <token>".into())
        })?;
        let token = header
            .to_str()
            .ok()
            .and_then(bearer_token)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                ApiError::Unauthorized("the Authorization header must be 'Bearer <token>'".into())
            })?;
        let key_hash = hash_token(token);
        if let Some(caller) = state.keys.get(&key_hash) {
            return Ok(caller);
        }
        let generation = state.keys.generation();
        let caller = db::api_keys::find_live(&state.pool, &key_hash)
            .await?
            .ok_or_else(|| ApiError::Unauthorized("unknown or revoked token".into()))?;
        state.keys.insert(key_hash, caller.clone(), generation);
        Ok(caller)
    }
}

/// A caller of the site functions (plan, claim, heartbeat, reports): runner and service keys.
#[derive(Debug, Clone)]
pub struct SiteCaller(pub Caller);

/// A caller of the operator functions that read: service, operator and viewer keys.
#[derive(Debug, Clone)]
pub struct Reader(pub Caller);

/// A caller of the operator functions that act: service and operator keys.
#[derive(Debug, Clone)]
pub struct Actor(pub Caller);

impl FromRequestParts<AppState> for SiteCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        match caller.role {
            Role::Runner | Role::Service => Ok(SiteCaller(caller)),
            Role::Operator | Role::Viewer | Role::Admin => Err(ApiError::Forbidden(format!(
                "{} keys cannot call the site functions; they are for runners",
                caller.role.as_str()
            ))),
        }
    }
}

/// A caller of the functions that manage keys: admin and service keys.
#[derive(Debug, Clone)]
pub struct Administrator(pub Caller);

impl FromRequestParts<AppState> for Administrator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = Caller::from_request_parts(parts, state).await?;
        caller.may_administer()?;
        Ok(Administrator(caller))
    }
}

impl Reader {
    /// The caller as a reader, if its role may read (the console signs in through this).
    pub fn check(caller: Caller) -> Result<Reader, ApiError> {
        caller.may_read()?;
        Ok(Reader(caller))
    }
}

impl Actor {
    /// The caller as an actor, if its role may act.
    pub fn check(caller: Caller) -> Result<Actor, ApiError> {
        caller.may_act()?;
        Ok(Actor(caller))
    }
}

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Reader::check(Caller::from_request_parts(parts, state).await?)
    }
}

impl FromRequestParts<AppState> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Actor::check(Caller::from_request_parts(parts, state).await?)
    }
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is case-insensitive
/// (RFC 9110 §11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once([' ', '\t'])?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The stored form of a token.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Bytes as lowercase hex (a digest as it is stored and sent).
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// A new random token: `res_` and 256 bits, base64url.
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_prefixed() {
        let (a, b) = (generate_token(), generate_token());
        assert!(a.starts_with("res_"));
        assert_eq!(a.len(), 4 + 43);
        assert_ne!(a, b);
    }

    #[test]
    fn hashes_are_sha256_hex() {
        assert_eq!(
            hash_token("hello world"),
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer abc", "bearer abc", "BEARER  abc ", "bEaReR\tabc"] {
            assert_eq!(bearer_token(value), Some("abc"), "{value}");
        }
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }
}

//! `secrets.sealed`: the site's secrets on disk, so a restart during an outage still runs
//! actions that need them. The file is sealed (AES-256-GCM) under a key derived from the
//! runner's token (HKDF-SHA256) and written with permissions 0600. A copy of the state
//! directory — a backup, a support bundle, a `plan.json` attached to a ticket — reveals
//! nothing without the runner's configuration; whoever holds both could fetch the plan
//! with that token anyway. A new token (a rotated key) cannot open the old file: it is
//! ignored and the next plan answer, a full one, brings the secrets again.

use std::io;
use std::path::Path;

use res_shared::wire::PlanSecret;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf::{HKDF_SHA256, Salt};
use ring::rand::{SecureRandom, SystemRandom};

use super::file::write_private;

/// What the file's bytes start with (and its format version).
const MAGIC: &[u8] = b"res-secrets-1\n";

/// The file's sealing key.
pub(crate) struct SealKey(LessSafeKey);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(***)")
    }
}

impl SealKey {
    /// The key derived from the runner's token (`None` only if HKDF refused the length,
    /// which it does not for 32 bytes).
    pub(crate) fn from_token(token: &str) -> Option<SealKey> {
        let prk = Salt::new(HKDF_SHA256, b"res-runner secrets.sealed").extract(token.as_bytes());
        let okm = prk.expand(&[b"aes-256-gcm v1"], &AES_256_GCM).ok()?;
        Some(SealKey(LessSafeKey::new(UnboundKey::from(okm))))
    }
}

/// Why the file was not read (it is then ignored).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SealedFileError {
    #[error("cannot read {0}: {1}")]
    Io(String, io::Error),
    #[error(
        "{0} does not open with this runner's token (a new token, or a damaged file); it is ignored"
    )]
    Unopened(String),
}

/// Seals and writes `secrets` (0600, atomically); an empty list removes the file.
pub(crate) fn write(path: &Path, key: &SealKey, secrets: &[PlanSecret]) -> io::Result<()> {
    if secrets.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let mut body = serde_json::to_vec(secrets).map_err(io::Error::other)?;
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| io::Error::other("no random bytes from the operating system"))?;
    key.0
        .seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(MAGIC),
            &mut body,
        )
        .map_err(|_| io::Error::other("cannot seal the secrets"))?;
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&nonce);
    bytes.append(&mut body);
    write_private(path, &bytes)
}

/// Reads the file; `Ok(None)` when there is none.
pub(crate) fn read(path: &Path, key: &SealKey) -> Result<Option<Vec<PlanSecret>>, SealedFileError> {
    let shown = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SealedFileError::Io(shown, e)),
    };
    let unopened = || SealedFileError::Unopened(shown.clone());
    let rest = bytes.strip_prefix(MAGIC).ok_or_else(unopened)?;
    if rest.len() < NONCE_LEN {
        return Err(unopened());
    }
    let (nonce, sealed) = rest.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| unopened())?;
    let mut sealed = sealed.to_vec();
    let plain = key
        .0
        .open_in_place(nonce, Aad::from(MAGIC), &mut sealed)
        .map_err(|_| unopened())?;
    serde_json::from_slice(plain)
        .map(Some)
        .map_err(|_| unopened())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use res_shared::wire::SecretValue;
    use uuid::Uuid;

    use super::*;

    #[test]
    fn the_file_is_private_sealed_and_opens_only_with_the_same_token() {
        let dir = std::env::temp_dir().join(format!("res-sealed-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("secrets.sealed");
        let secrets = vec![PlanSecret {
            brand_id: Uuid::new_v4(),
            name: "cam".into(),
            version: 2,
            value: SecretValue("p@ss-w0rd-7".into()),
            branch_ids: None,
        }];
        let key = SealKey::from_token("res_runner_token_one").expect("a key");
        write(&path, &key, &secrets).expect("written");
        let bytes = std::fs::read(&path).expect("bytes");
        assert!(!bytes.windows(11).any(|w| w == b"p@ss-w0rd-7"));
        assert!(!bytes.windows(3).any(|w| w == b"cam"));
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(read(&path, &key).expect("opens"), Some(secrets));
        let other = SealKey::from_token("res_runner_token_two").expect("a key");
        assert!(matches!(
            read(&path, &other),
            Err(SealedFileError::Unopened(_))
        ));
        write(&path, &key, &[]).expect("removed");
        assert_eq!(read(&path, &key).expect("none"), None);
        std::fs::remove_dir_all(&dir).ok();
    }
}

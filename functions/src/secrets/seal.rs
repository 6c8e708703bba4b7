//! Envelope encryption of secret values. Each value is sealed (AES-256-GCM) under its own
//! random data key; the data key is sealed under the functions' sealing key, named by an id
//! stored beside it. A database dump or backup holds only sealed bytes, and rotating the
//! sealing key rewraps the small data keys without touching a value.
//!
//! Each ciphertext is bound (as associated data) to the brand and name it belongs to, so a
//! sealed row copied to another brand's name does not open.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use uuid::Uuid;

/// Bytes of a sealing or data key.
const KEY_BYTES: usize = 32;

/// Why sealing or opening failed; no variant carries key or value bytes.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the sealing keys are malformed: {0}")]
    BadKeyring(String),
    #[error("sealed with key '{0}', which these functions do not hold")]
    UnknownKey(String),
    #[error("the sealed value does not open (damaged, or not this brand's and name's)")]
    Damaged,
    /// The wrapped data key does not open under the key of its id: most often a key whose
    /// bytes changed while its id stayed.
    #[error(
        "the sealed value does not open with key '{0}': that key's bytes are not the ones it was sealed with (check the key given under that id in RES_SECRETS_KEYS or the key file), or the value is damaged or not this brand's and name's"
    )]
    KeyDoesNotOpen(String),
    #[error("no random bytes from the operating system")]
    Random,
}

/// A value as stored: the data key sealed under `key_id`, and the value under the data key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub key_id: String,
    pub wrapped_key: Vec<u8>,
    pub sealed_value: Vec<u8>,
}

/// The functions' sealing keys: the first seals, every one opens (so a key can be added
/// everywhere before it seals anything, and dropped once nothing is sealed under it).
pub struct Keyring {
    active: String,
    keys: HashMap<String, LessSafeKey>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<&String> = self.keys.keys().collect();
        ids.sort();
        f.debug_struct("Keyring")
            .field("active", &self.active)
            .field("ids", &ids)
            .finish()
    }
}

impl Keyring {
    /// Reads `ID:BASE64` entries (32 bytes each), separated by commas or lines; `#` starts a
    /// comment line. The first entry seals.
    pub fn parse(text: &str) -> Result<Keyring, SealError> {
        let mut active = None;
        let mut keys = HashMap::new();
        let entries = text
            .lines()
            .filter(|line| !line.trim_start().starts_with('#'))
            .flat_map(|line| line.split(','))
            .map(str::trim)
            .filter(|entry| !entry.is_empty());
        for (index, entry) in entries.enumerate() {
            let (id, encoded) = entry.split_once(':').ok_or_else(|| {
                SealError::BadKeyring(format!("entry {} is not ID:BASE64", index + 1))
            })?;
            let id = id.trim();
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(SealError::BadKeyring(format!(
                    "entry {}: a key id is letters, digits, '-', '_' and '.'",
                    index + 1
                )));
            }
            let bytes = STANDARD
                .decode(encoded.trim())
                .ok()
                .filter(|bytes| bytes.len() == KEY_BYTES)
                .ok_or_else(|| {
                    SealError::BadKeyring(format!(
                        "key '{id}' is not {KEY_BYTES} bytes in base64 (make one with `res-functions secrets new-key`)"
                    ))
                })?;
            let key = UnboundKey::new(&AES_256_GCM, &bytes)
                .map(LessSafeKey::new)
                .map_err(|_| SealError::BadKeyring(format!("key '{id}' is unusable")))?;
            if keys.insert(id.to_owned(), key).is_some() {
                return Err(SealError::BadKeyring(format!(
                    "key id '{id}' appears twice"
                )));
            }
            active.get_or_insert_with(|| id.to_owned());
        }
        let active = active.ok_or_else(|| SealError::BadKeyring("no key given".into()))?;
        Ok(Keyring { active, keys })
    }

    /// The id new values are sealed under.
    pub fn active_id(&self) -> &str {
        &self.active
    }

    /// A new random key, as `ID:BASE64` for a keyring.
    pub fn new_key(id: &str) -> Result<String, SealError> {
        let mut bytes = [0u8; KEY_BYTES];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| SealError::Random)?;
        Ok(format!("{id}:{}", STANDARD.encode(bytes)))
    }

    /// Seals `value` of secret `name` of `brand` under a fresh data key.
    pub fn seal(&self, brand: Uuid, name: &str, value: &str) -> Result<Sealed, SealError> {
        let random = SystemRandom::new();
        let mut data_key = [0u8; KEY_BYTES];
        random.fill(&mut data_key).map_err(|_| SealError::Random)?;
        let value_key = UnboundKey::new(&AES_256_GCM, &data_key)
            .map(LessSafeKey::new)
            .map_err(|_| SealError::Random)?;
        let sealed_value = seal_with(&value_key, &value_aad(brand, name), value.as_bytes())?;
        let sealing = self
            .keys
            .get(&self.active)
            .ok_or_else(|| SealError::UnknownKey(self.active.clone()))?;
        let wrapped_key = seal_with(sealing, &key_aad(brand, name), &data_key)?;
        Ok(Sealed {
            key_id: self.active.clone(),
            wrapped_key,
            sealed_value,
        })
    }

    /// The value sealed in `sealed` for `name` of `brand`.
    pub fn open(&self, brand: Uuid, name: &str, sealed: &Sealed) -> Result<String, SealError> {
        let data_key = self.unwrap_key(brand, name, sealed)?;
        let value_key = UnboundKey::new(&AES_256_GCM, &data_key)
            .map(LessSafeKey::new)
            .map_err(|_| SealError::Damaged)?;
        let bytes = open_with(&value_key, &value_aad(brand, name), &sealed.sealed_value)?;
        String::from_utf8(bytes).map_err(|_| SealError::Damaged)
    }

    /// `sealed` with its data key wrapped under the active key; the value is untouched.
    pub fn rewrap(&self, brand: Uuid, name: &str, sealed: &Sealed) -> Result<Sealed, SealError> {
        let data_key = self.unwrap_key(brand, name, sealed)?;
        let sealing = self
            .keys
            .get(&self.active)
            .ok_or_else(|| SealError::UnknownKey(self.active.clone()))?;
        Ok(Sealed {
            key_id: self.active.clone(),
            wrapped_key: seal_with(sealing, &key_aad(brand, name), &data_key)?,
            sealed_value: sealed.sealed_value.clone(),
        })
    }

    fn unwrap_key(&self, brand: Uuid, name: &str, sealed: &Sealed) -> Result<Vec<u8>, SealError> {
        let key = self
            .keys
            .get(&sealed.key_id)
            .ok_or_else(|| SealError::UnknownKey(sealed.key_id.clone()))?;
        open_with(key, &key_aad(brand, name), &sealed.wrapped_key)
            .map_err(|_| SealError::KeyDoesNotOpen(sealed.key_id.clone()))
    }
}

fn value_aad(brand: Uuid, name: &str) -> Vec<u8> {
    format!("res secret value\0{brand}\0{name}").into_bytes()
}

fn key_aad(brand: Uuid, name: &str) -> Vec<u8> {
    format!("res secret data key\0{brand}\0{name}").into_bytes()
}

/// A random nonce, then the ciphertext and its tag.
fn seal_with(key: &LessSafeKey, aad: &[u8], plain: &[u8]) -> Result<Vec<u8>, SealError> {
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| SealError::Random)?;
    let mut sealed = plain.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(aad),
        &mut sealed,
    )
    .map_err(|_| SealError::Random)?;
    let mut out = nonce.to_vec();
    out.append(&mut sealed);
    Ok(out)
}

fn open_with(key: &LessSafeKey, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, SealError> {
    if sealed.len() < NONCE_LEN {
        return Err(SealError::Damaged);
    }
    let (nonce, body) = sealed.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Damaged)?;
    let mut body = body.to_vec();
    let plain = key
        .open_in_place(nonce, Aad::from(aad), &mut body)
        .map_err(|_| SealError::Damaged)?;
    Ok(plain.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyring(text: &str) -> Keyring {
        Keyring::parse(text).expect("a keyring")
    }

    #[test]
    fn a_value_opens_only_for_its_brand_and_name_and_rotation_keeps_it() {
        let first = Keyring::new_key("k1").expect("key");
        let second = Keyring::new_key("k2").expect("key");
        let old = keyring(&first);
        let brand = Uuid::new_v4();
        let sealed = old.seal(brand, "cam", "s3cr3t-pass").expect("sealed");
        assert_eq!(sealed.key_id, "k1");
        assert!(!sealed.sealed_value.windows(11).any(|w| w == b"s3cr3t-pass"));
        assert_eq!(
            old.open(brand, "cam", &sealed).expect("opens"),
            "s3cr3t-pass"
        );
        assert!(matches!(
            old.open(Uuid::new_v4(), "cam", &sealed),
            Err(SealError::KeyDoesNotOpen(id)) if id == "k1"
        ));
        assert!(matches!(
            old.open(brand, "other", &sealed),
            Err(SealError::KeyDoesNotOpen(_))
        ));
        // The same id with other bytes names the key to check.
        let impostor = keyring(&Keyring::new_key("k1").expect("key"));
        let error = impostor
            .open(brand, "cam", &sealed)
            .expect_err("other bytes");
        assert!(error.to_string().contains("with key 'k1'"), "{error}");
        // Rotation: the new key seals, both open; rewrapped, the old key may go.
        let both = keyring(&format!("{second}\n# the previous key\n{first}"));
        assert_eq!(both.active_id(), "k2");
        let rewrapped = both.rewrap(brand, "cam", &sealed).expect("rewrapped");
        assert_eq!(rewrapped.key_id, "k2");
        assert_eq!(rewrapped.sealed_value, sealed.sealed_value);
        let new = keyring(&second);
        assert_eq!(
            new.open(brand, "cam", &rewrapped).expect("opens"),
            "s3cr3t-pass"
        );
        assert!(matches!(
            new.open(brand, "cam", &sealed),
            Err(SealError::UnknownKey(id)) if id == "k1"
        ));
    }

    #[test]
    fn a_bad_keyring_names_what_is_wrong_and_shows_no_key() {
        for (text, expected) in [
            ("", "no key given"),
            ("k1", "not ID:BASE64"),
            ("k1:c2hvcnQ=", "not 32 bytes"),
            ("bad id:AAAA", "a key id is"),
        ] {
            let error = Keyring::parse(text).expect_err(text).to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
        let key = Keyring::new_key("k1").expect("key");
        let twice = Keyring::parse(&format!("{key},{key}")).expect_err("twice");
        assert!(twice.to_string().contains("appears twice"));
        let shown = format!("{:?}", keyring(&key));
        assert!(
            !shown.contains(key.split_once(':').map(|(_, k)| k).unwrap_or("-")),
            "{shown}"
        );
    }
}

//! The optional config file: `url` and `token`, read when neither a flag nor the
//! environment gives them.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The file's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    pub(crate) url: Option<String>,
    pub(crate) token: Option<String>,
}

/// `$XDG_CONFIG_HOME/resctl/config.toml`, else `~/.config/resctl/config.toml`.
fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(base.join("resctl").join("config.toml"))
}

/// The named file (which must exist), else the default one if it exists; errors name the
/// file and what is wrong in it.
pub(crate) fn load(named: Option<&Path>) -> Result<FileConfig, String> {
    let path = match named {
        Some(path) => path.to_path_buf(),
        None => match default_path().filter(|p| p.exists()) {
            Some(path) => path,
            None => return Ok(FileConfig::default()),
        },
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("config file {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_gives_url_and_token_and_refuses_unknown_keys() {
        let good: FileConfig =
            toml::from_str("url = \"http://h:1\"\ntoken = \"res_x\"\n").expect("parses");
        assert_eq!(good.url.as_deref(), Some("http://h:1"));
        assert_eq!(good.token.as_deref(), Some("res_x"));
        let bad = toml::from_str::<FileConfig>("tokn = \"x\"\n");
        assert!(bad.is_err_and(|e| e.to_string().contains("tokn")));
    }
}

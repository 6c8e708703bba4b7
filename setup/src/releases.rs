//! Earlier releases' `res-runner` and `res-functions`, built from their commits, for the
//! compatibility tests (tests/tests/e2e/compat.rs) that run them beside today's.
//!
//! `releases.txt` at the workspace's root lists the releases the tests run. A release is
//! built once per commit and machine into a cache outside the checkout ([`cache_root`]:
//! `$RES_RELEASES_CACHE`, else `$XDG_CACHE_HOME/res/releases`, else
//! `~/.cache/res/releases`), in `<version>-<commit>/` (the commit beside the binaries says
//! which): a clean clone's CI finds them built, where building them again cost it about
//! three and a half minutes. `.ci/run` builds any missing before the tests with
//! `cargo xtask releases`, in the workspace's own target directory, so the dependencies the
//! releases share with today's build compile once (about a minute a release). A test that
//! finds one missing builds it itself into a target directory of its own — slower
//! (minutes), but it never replaces a binary other tests are running.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::say;

/// The binaries a release is built for.
pub const BINARIES: [&str; 2] = ["res-runner", "res-functions"];

/// One earlier release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// `0.2.0`.
    pub version: String,
    /// The commit it was cut from.
    pub commit: String,
}

/// Where built releases are kept, outside any checkout: `$RES_RELEASES_CACHE`, else
/// `$XDG_CACHE_HOME/res/releases`, else `$HOME/.cache/res/releases`; a workspace's
/// `target/releases` only where none of those is set.
pub fn cache_root(workspace: &Path) -> PathBuf {
    let set = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    set("RES_RELEASES_CACHE")
        .or_else(|| set("XDG_CACHE_HOME").map(|dir| dir.join("res/releases")))
        .or_else(|| set("HOME").map(|dir| dir.join(".cache/res/releases")))
        .unwrap_or_else(|| workspace.join("target/releases"))
}

impl Release {
    /// Where its binaries are kept: one directory per version and commit in the cache.
    pub fn dir(&self, workspace: &Path) -> PathBuf {
        let commit: String = self.commit.chars().take(12).collect();
        cache_root(workspace).join(format!("{}-{commit}", self.version))
    }

    /// Its binary `name` (one of [`BINARIES`]) once built.
    pub fn binary(&self, workspace: &Path, name: &str) -> PathBuf {
        self.dir(workspace).join(name)
    }

    fn is_built(&self, workspace: &Path) -> bool {
        let dir = self.dir(workspace);
        std::fs::read_to_string(dir.join("commit")).is_ok_and(|c| c.trim() == self.commit)
            && BINARIES.iter().all(|b| dir.join(b).is_file())
    }
}

/// The releases `releases.txt` lists, oldest first: `version commit` a line, `#` comments.
pub fn listed(workspace: &Path) -> Result<Vec<Release>, String> {
    let path = workspace.join("releases.txt");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn parse(text: &str) -> Result<Vec<Release>, String> {
    let mut releases = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [version, commit] = fields[..] else {
            return Err(format!(
                "line {}: expected `version commit`, got `{line}`",
                number + 1
            ));
        };
        let semver =
            version.split('.').count() == 3 && version.split('.').all(|p| p.parse::<u32>().is_ok());
        if !semver || commit.len() != 40 || !commit.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "line {}: `{version}` must be a version like 0.2.0 and `{commit}` a \
                 commit's 40 hex digits",
                number + 1
            ));
        }
        releases.push(Release {
            version: version.to_owned(),
            commit: commit.to_owned(),
        });
    }
    Ok(releases)
}

/// Builds `release` unless it is built, with `target_dir` as cargo's target directory; the
/// directory of its binaries.
pub fn build(workspace: &Path, release: &Release, target_dir: &Path) -> Result<PathBuf, String> {
    let dir = release.dir(workspace);
    if release.is_built(workspace) {
        return Ok(dir);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // Test binaries, and the tests in them, may ask at once: one builds, the others wait
    // and find it built.
    let mut lock_name = dir.file_name().unwrap_or_default().to_owned();
    lock_name.push(".lock");
    let lock_path = dir.with_file_name(lock_name);
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot open {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    if release.is_built(workspace) {
        return Ok(dir);
    }
    say(&format!(
        "res-setup: building release {} (commit {}) for the compatibility tests …",
        release.version, release.commit
    ));
    let source = dir.join("source");
    let _ = std::fs::remove_dir_all(&source);
    std::fs::create_dir_all(&source)
        .map_err(|e| format!("cannot create {}: {e}", source.display()))?;
    extract(workspace, &release.commit, &source)?;
    stamp_version(&source, &release.version)?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&source)
        .arg("build")
        .env("CARGO_TARGET_DIR", target_dir)
        .env_remove("CARGO");
    // The release's pinned toolchain, named for every rustc cargo starts: without it rustup
    // would take a dependency's own toolchain file where cargo compiles that dependency.
    if let Some(channel) = pinned_toolchain(&source) {
        command.env("RUSTUP_TOOLCHAIN", channel);
    }
    for binary in BINARIES {
        command.args(["--bin", binary]);
    }
    let status = command
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building release {} failed ({status}); its source is in {}",
            release.version,
            source.display()
        ));
    }
    for binary in BINARIES {
        let built = target_dir.join("debug").join(binary);
        std::fs::copy(&built, dir.join(binary))
            .map_err(|e| format!("cannot copy {}: {e}", built.display()))?;
    }
    std::fs::write(dir.join("commit"), &release.commit)
        .map_err(|e| format!("cannot write {}: {e}", dir.display()))?;
    let _ = std::fs::remove_dir_all(&source);
    say(&format!("res-setup: built release {}", release.version));
    Ok(dir)
}

/// The `channel` of the release's `rust-toolchain.toml`, if it pins one.
fn pinned_toolchain(source: &Path) -> Option<String> {
    let text = std::fs::read_to_string(source.join("rust-toolchain.toml")).ok()?;
    text.lines().find_map(|line| {
        let value = line
            .trim()
            .strip_prefix("channel")?
            .trim()
            .strip_prefix('=')?;
        Some(value.trim().trim_matches('"').to_owned())
    })
}

/// The tree of `commit` into `into`, from this checkout's history.
fn extract(workspace: &Path, commit: &str, into: &Path) -> Result<(), String> {
    let mut archive = Command::new("git")
        .current_dir(workspace)
        .args(["archive", "--format=tar", commit])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    let tar_input = archive
        .stdout
        .take()
        .ok_or_else(|| "git archive gave no output".to_owned())?;
    let unpacked = Command::new("tar")
        .current_dir(into)
        .arg("-x")
        .stdin(tar_input)
        .status()
        .map_err(|e| format!("cannot run tar: {e}"))?;
    let archived = archive
        .wait()
        .map_err(|e| format!("git archive failed: {e}"))?;
    if !archived.success() || !unpacked.success() {
        return Err(format!(
            "cannot extract commit {commit} (git archive {archived}, tar {unpacked}): is \
             this a full clone with that commit in its history?"
        ));
    }
    Ok(())
}

/// Sets the workspace's version to `version`: the commits before 0.3.0 were cut as
/// releases after the fact, and still said 0.1.0 — a runner built from them reports its
/// release's version, as one built at release time would have.
fn stamp_version(source: &Path, version: &str) -> Result<(), String> {
    let manifest = source.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let mut in_package = false;
    let mut stamped = false;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            if line.starts_with('[') {
                in_package = line.trim() == "[workspace.package]";
            } else if in_package && !stamped && line.trim_start().starts_with("version") {
                stamped = true;
                return format!("version = \"{version}\"");
            }
            line.to_owned()
        })
        .collect();
    if !stamped {
        return Err(format!(
            "{} has no [workspace.package] version",
            manifest.display()
        ));
    }
    std::fs::write(&manifest, lines.join("\n") + "\n")
        .map_err(|e| format!("cannot write {}: {e}", manifest.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_reads_versions_and_commits_and_names_a_bad_line() {
        let text = format!(
            "# releases\n0.1.0 {}  # first\n\n0.2.0 {}\n",
            "a".repeat(40),
            "b".repeat(40)
        );
        let releases = parse(&text).expect("parsed");
        assert_eq!(releases.len(), 2);
        assert_eq!(releases[1].version, "0.2.0");
        assert!(
            parse("0.1 fd6d644")
                .expect_err("refused")
                .starts_with("line 1:")
        );
        assert!(parse("0.1.0").expect_err("refused").contains("expected"));
    }

    fn workspace() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("the workspace")
    }

    #[test]
    fn the_pinned_toolchain_is_read_from_the_release() {
        let pinned = pinned_toolchain(workspace()).expect("this workspace pins one");
        assert!(pinned.starts_with("1."), "{pinned}");
        assert_eq!(pinned_toolchain(Path::new("/nonexistent")), None);
    }

    #[test]
    fn the_workspace_list_is_well_formed() {
        let releases = listed(workspace()).expect("releases.txt");
        assert!(releases.len() >= 2, "two earlier releases at least");
    }
}

//! A small tmpfs mounted for a test, to fill or to make read-only: a runner's state
//! directory on a disk that refuses writes. Needs root, as CI has; unmounted on drop.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs.
#[derive(Debug)]
pub struct Tmpfs {
    path: PathBuf,
}

fn mount(args: &[&str]) -> Result<(), String> {
    crate::processes::run(
        Command::new("mount").args(args),
        &format!("mount {}", args.join(" ")),
    )
}

impl Tmpfs {
    /// Mounts a tmpfs of `kib` KiB at `path` (created); panics naming why it cannot.
    pub fn mount(path: &Path, kib: u32) -> Tmpfs {
        std::fs::create_dir_all(path).expect("mount point");
        let target = path.display().to_string();
        mount(&[
            "-t",
            "tmpfs",
            "-o",
            &format!("size={kib}k"),
            "tmpfs",
            &target,
        ])
        .unwrap_or_else(|e| panic!("cannot mount a tmpfs (root is needed): {e}"));
        Tmpfs {
            path: path.to_owned(),
        }
    }

    /// Fills it: a file `fill` written until the filesystem refuses more.
    pub fn fill(&self) {
        use std::io::Write;
        let mut file = std::fs::File::create(self.path.join("fill")).expect("fill file");
        let chunk = vec![0u8; 4096];
        // Bounded: the tmpfs is small, a write fails well before this many.
        for _ in 0..1_000_000 {
            if file.write_all(&chunk).and_then(|()| file.flush()).is_err() {
                return;
            }
        }
        panic!("{} never filled up", self.path.display());
    }

    /// Frees what [`Tmpfs::fill`] took.
    pub fn free(&self) {
        std::fs::remove_file(self.path.join("fill")).expect("fill removed");
    }

    /// Makes it read-only, or writable again. The kernel refuses to make a filesystem
    /// read-only while a file on it is open for writing ("busy"), and a runner opens its
    /// state files only for the moment it writes one, so a busy remount is tried again,
    /// for at most five seconds.
    pub fn read_only(&self, read_only: bool) {
        let target = self.path.display().to_string();
        let options = if read_only {
            "remount,ro"
        } else {
            "remount,rw"
        };
        let mut tries = 0;
        loop {
            match mount(&["-o", options, &target]) {
                Ok(()) => return,
                Err(e) if e.contains("busy") && tries < 100 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).output();
    }
}

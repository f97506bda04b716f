//! Client programs built once per change of their inputs: one cache shared by the Go and Java
//! builders ([`crate::go_client`], [`crate::java_client`]).
//!
//! A build lives in `<target>/<profile>/<kind>/<name>-<hash>`, where the hash covers what the
//! caller names (toolchain version, release, program) and the bytes of every input file. A
//! build is written under a `.partial-<pid>` name and renamed when complete, so a killed build
//! never passes for a finished one; once it is in place, older builds of the same name are
//! removed. Builds run one at a time in a test process (tests run in parallel and may want the
//! same build).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{Context, Result};

/// One build at a time in this process.
static BUILDING: Mutex<()> = Mutex::new(());

/// Every file under `dir` whose name `keep` accepts, sorted by path.
///
/// # Errors
/// A directory that cannot be read.
pub fn files(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, found: &mut Vec<PathBuf>) -> Result<()> {
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                walk(&path, keep, found)?;
            } else if keep(&path) {
                found.push(path);
            }
        }
        Ok(())
    }
    let mut found = Vec::new();
    walk(dir, keep, &mut found)?;
    found.sort();
    Ok(found)
}

/// What to build: `kind` is the cache's directory (`"go-clients"`), `name` the build's name
/// without its hash (`"consumer-v1.43.2"`), `key` whatever besides the input files decides the
/// output (program, release, toolchain version), `inputs` the files whose bytes do.
#[derive(Debug)]
pub struct Build<'a, K: Hash> {
    /// The cache's directory under `<target>/<profile>`.
    pub kind: &'a str,
    /// The build's name, without its hash.
    pub name: &'a str,
    /// What besides the inputs' bytes decides the output.
    pub key: K,
    /// The files whose bytes decide the output.
    pub inputs: &'a [PathBuf],
}

impl<K: Hash> Build<'_, K> {
    /// The path of the finished build (a file or a directory, as `build` writes it), built now
    /// by `build(partial_path)` unless a build of the same name and hash is there.
    ///
    /// # Errors
    /// An unreadable input, or `build`'s error.
    pub fn get_or_build(self, build: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
        let mut hasher = DefaultHasher::new();
        self.key.hash(&mut hasher);
        for path in self.inputs {
            path.hash(&mut hasher);
            std::fs::read(path)
                .with_context(|| format!("reading {}", path.display()))?
                .hash(&mut hasher);
        }
        // The test binary is `<target>/<profile>/deps/<name>`.
        let exe = std::env::current_exe()?;
        let profile_dir = exe
            .ancestors()
            .nth(2)
            .context("the test binary is not under <target>/<profile>/deps")?;
        let dir = profile_dir.join(self.kind);
        let name = format!("{}-{:016x}", self.name, hasher.finish());
        let done = dir.join(&name);

        let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
        if done.exists() {
            return Ok(done);
        }
        std::fs::create_dir_all(&dir)?;
        let partial = dir.join(format!("{name}.partial-{}", std::process::id()));
        let started = Instant::now();
        build(&partial)?;
        std::fs::rename(&partial, &done)?;
        // Older builds of the same name are stale now.
        let prefix = format!("{}-", self.name);
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let entry_name = entry.file_name();
            let entry_name = entry_name.to_string_lossy();
            let stale = entry_name.starts_with(&prefix)
                && entry.path() != done
                && !entry_name.contains(".partial-")
                // `consumer-v1` must not remove `consumer-v1.2-…`: only a hash follows.
                && entry_name[prefix.len()..].bytes().all(|b| b.is_ascii_hexdigit());
            if stale {
                let path = entry.path();
                let _ = if path.is_dir() {
                    std::fs::remove_dir_all(path)
                } else {
                    std::fs::remove_file(path)
                };
            }
        }
        eprintln!(
            "built {} in {:.1?}: {}",
            self.name,
            started.elapsed(),
            done.display()
        );
        Ok(done)
    }
}

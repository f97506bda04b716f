//! The Java client programs of `fixtures/clients/java` (a Maven project), built against a
//! chosen kafka-clients release and run as child processes that print what they did as JSON
//! lines ([`crate::client_program`]).
//!
//! A release is built with `mvn -o -Dkafka.version=<release> compile
//! dependency:build-classpath`: offline, from the local Maven repository that `.ci/run` fills
//! (it runs the same build online once per release); when the local repository lacks something
//! the build is tried once more online, from Maven Central. Builds are cached in
//! `<target>/<profile>/java-clients/`, named by release and a hash of the pom and the Java
//! sources: a test run builds only what changed (a Maven build took 20–35 s on 2 loaded cores).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use tokio::process::Command;

pub use crate::client_program::Output;

/// One build at a time in this process (tests run in parallel and may want the same build).
static BUILDING: Mutex<()> = Mutex::new(());

/// `fixtures/clients/java`.
fn java_dir() -> PathBuf {
    crate::fixture("clients/java")
}

/// Every file under `dir`, sorted.
fn files(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files(&path, found)?;
        } else {
            found.push(path);
        }
    }
    found.sort();
    Ok(())
}

/// The Java programs built against one kafka-clients release.
#[derive(Debug, Clone)]
pub struct JavaClients {
    /// The kafka-clients release, e.g. `"2.7.0"`.
    pub kafka_version: String,
    /// The runtime classpath: the compiled programs, kafka-clients and its dependencies.
    pub classpath: String,
}

impl JavaClients {
    /// A command running the program `class` (e.g. `"IdempotentProducer"`, in package
    /// `kmock.clients`) with `args`; the client's logger (slf4j-simple) writes warnings and
    /// errors to stderr.
    pub fn command(&self, class: &str, args: &[&str]) -> Command {
        let mut command = Command::new("java");
        command
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-cp")
            .arg(&self.classpath)
            .arg(format!("kmock.clients.{class}"))
            .args(args);
        command
    }

    /// Runs the program `class` with `args`; kills it if it runs longer than `limit`.
    ///
    /// # Errors
    /// It could not start, outlived `limit`, or printed a line that is not a JSON object.
    pub async fn run(&self, class: &str, args: &[&str], limit: Duration) -> Result<Output> {
        crate::client_program::run(self.command(class, args), limit).await
    }
}

/// Runs Maven's build of `fixtures/clients/java` against kafka-clients `kafka_version` into
/// `dir`, offline or not.
fn maven(kafka_version: &str, dir: &Path, offline: bool) -> Result<()> {
    let mut command = std::process::Command::new("mvn");
    command.args(["-B", "-q"]);
    if offline {
        command.arg("-o");
    }
    let out = command
        .arg(format!("-Dkafka.version={kafka_version}"))
        .arg(format!("-Dkmock.build.dir={}", dir.display()))
        .args(["compile", "dependency:build-classpath"])
        .current_dir(java_dir())
        .output()
        .context(
            "running Maven (`mvn`): Maven 3.8+ and a JDK 17+ must be installed and on PATH to \
             build the Java client programs",
        )?;
    ensure!(
        out.status.success(),
        "mvn{} -Dkafka.version={kafka_version} compile dependency:build-classpath failed \
         ({}):\n{}{}",
        if offline { " -o" } else { "" },
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// The programs of `fixtures/clients/java` built against kafka-clients `kafka_version` (e.g.
/// `"2.7.0"`), built now unless cached.
///
/// # Errors
/// No Maven or JDK, a release Maven cannot resolve, or a failed build (with Maven's output).
pub fn build(kafka_version: &str) -> Result<JavaClients> {
    let mut hasher = DefaultHasher::new();
    kafka_version.hash(&mut hasher);
    let mut inputs = vec![java_dir().join("pom.xml")];
    files(&java_dir().join("src"), &mut inputs)?;
    for path in &inputs {
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
    let parent = profile_dir.join("java-clients");
    let name = format!("{kafka_version}-{:016x}", hasher.finish());
    let dir = parent.join(&name);

    let _one_at_a_time = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    if !dir.exists() {
        std::fs::create_dir_all(&parent)?;
        let partial = parent.join(format!("{name}.partial-{}", std::process::id()));
        let started = Instant::now();
        if let Err(offline) = maven(kafka_version, &partial, true) {
            eprintln!("offline Maven build failed, trying online: {offline:#}");
            maven(kafka_version, &partial, false)?;
        }
        std::fs::rename(&partial, &dir)?;
        // Older builds of this release are stale now.
        let prefix = format!("{kafka_version}-");
        for entry in std::fs::read_dir(&parent)?.flatten() {
            let entry_name = entry.file_name();
            let entry_name = entry_name.to_string_lossy();
            if entry_name.starts_with(&prefix)
                && entry.path() != dir
                && !entry_name.contains(".partial-")
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        eprintln!(
            "built the Java clients against kafka-clients {kafka_version} in {:.1?}: {}",
            started.elapsed(),
            dir.display()
        );
    }
    let dependencies = std::fs::read_to_string(dir.join("classpath.txt"))
        .with_context(|| format!("reading {}/classpath.txt", dir.display()))?;
    let classes = dir.join("classes");
    Ok(JavaClients {
        kafka_version: kafka_version.to_owned(),
        classpath: format!("{}:{}", classes.display(), dependencies.trim()),
    })
}

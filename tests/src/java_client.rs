//! The Java client programs of `fixtures/clients/java` (a Maven project), built against a
//! chosen kafka-clients release and run as child processes that print what they did as JSON
//! lines ([`crate::client_program`]).
//!
//! A release is built with `mvn -o -Dkafka.version=<release> compile
//! dependency:build-classpath`: offline, from the local Maven repository that `.ci/run` fills
//! (it runs the same build online once per release); when the local repository lacks something
//! the build is tried once more online, from Maven Central. Builds are cached
//! ([`crate::build_cache`]) in `<target>/<profile>/java-clients/`, named by release and a hash
//! of the pom and the Java sources: a test run builds only what changed (a Maven build took 20–35 s on 2 loaded cores).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use tokio::process::Command;

use crate::build_cache::{self, Build};
pub use crate::client_program::Output;

/// `fixtures/clients/java`.
fn java_dir() -> PathBuf {
    crate::fixture("clients/java")
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
    let mut inputs = vec![java_dir().join("pom.xml")];
    inputs.extend(build_cache::files(&java_dir().join("src"), &|_| true)?);
    let build = Build {
        kind: "java-clients",
        name: kafka_version,
        key: kafka_version,
        inputs: &inputs,
    };
    let dir = build.get_or_build(|partial| {
        maven(kafka_version, partial, true).or_else(|offline| {
            eprintln!("offline Maven build failed, trying online: {offline:#}");
            maven(kafka_version, partial, false)
        })
    })?;
    let dependencies = std::fs::read_to_string(dir.join("classpath.txt"))
        .with_context(|| format!("reading {}/classpath.txt", dir.display()))?;
    let classes = dir.join("classes");
    Ok(JavaClients {
        kafka_version: kafka_version.to_owned(),
        classpath: format!("{}:{}", classes.display(), dependencies.trim()),
    })
}

//! The Go client programs of `fixtures/clients/go` (Sarama's consumer group and idempotent
//! async producer): built for a chosen Sarama version and run as child processes that print
//! what they did as JSON lines; and programs that are Go modules of their own in a
//! subdirectory (franz-go's exactly-once member, `franz-eos`), built by [`build_module`].
//!
//! A version is built with the module file that pins it: `go.<version>.mod` with its
//! `go.<version>.sum`, or `go.mod` for the version it requires (the newest). Modules come from
//! the Go module proxy and are checked against the committed sums, so no checksum database is
//! needed. Binaries are cached ([`crate::build_cache`]) in `<target>/<profile>/go-clients/`,
//! named by program, version and a hash of the Go sources, the module and sum files and `go
//! version`: a test run builds only what changed, and Go's own build cache makes a rebuild take
//! seconds.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use tokio::process::Command;

use crate::build_cache::{self, Build};
pub use crate::client_program::Output;

/// `fixtures/clients/go`.
fn go_dir() -> PathBuf {
    crate::fixture("clients/go")
}

/// The module file pinning `sarama` (e.g. `"v1.43.2"`), relative to [`go_dir`].
fn module_file(sarama: &str) -> Result<String> {
    let pinned = format!("go.{sarama}.mod");
    if go_dir().join(&pinned).exists() {
        return Ok(pinned);
    }
    let default = std::fs::read_to_string(go_dir().join("go.mod"))?;
    ensure!(
        default.contains(&format!("github.com/IBM/sarama {sarama}\n")),
        "no module file pins Sarama {sarama}: add fixtures/clients/go/{pinned} (and its sums: \
         GOFLAGS=-mod=mod go mod tidy -modfile={pinned})"
    );
    Ok("go.mod".into())
}

/// Runs `go` with `args` in [`go_dir`]; its stdout, or an error with its stderr.
fn go(args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("go")
        .args(args)
        .current_dir(go_dir())
        .output()
        .context(
            "running the Go toolchain (`go`): Go 1.26 or later must be installed and on PATH \
             to build the Sarama client programs",
        )?;
    ensure!(
        out.status.success(),
        "go {} failed ({}):\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The program `fixtures/clients/go/<program>` (`"consumer"`, `"producer"`, or
/// `"shopify-producer"` for releases before v1.41) built against Sarama `sarama` (e.g.
/// `"v1.43.2"`): its path, built now unless cached.
///
/// # Errors
/// No module file for that version, no Go toolchain, or a failed build (with Go's output).
pub fn build(program: &str, sarama: &str) -> Result<PathBuf> {
    let modfile = module_file(sarama)?;
    let sumfile = modfile.replace(".mod", ".sum");
    let mut inputs = build_cache::files(&go_dir(), &|p| p.extension().is_some_and(|e| e == "go"))?;
    inputs.extend([go_dir().join(&modfile), go_dir().join(&sumfile)]);
    let build = Build {
        kind: "go-clients",
        name: &format!("{program}-{sarama}"),
        key: (program, sarama, go(&["version"])?),
        inputs: &inputs,
    };
    build.get_or_build(|partial| {
        go(&[
            "build",
            "-buildvcs=false",
            // Lets `shopify-producer` (Sarama before v1.41, as github.com/Shopify/sarama)
            // build; the other programs have no build constraint.
            "-tags=sarama_shopify",
            &format!("-modfile={modfile}"),
            "-o",
            partial.to_str().context("a non-UTF-8 target path")?,
            &format!("./{program}"),
        ])
        .map(drop)
    })
}

/// The program of `fixtures/clients/go/<module>`, a Go module of its own (its `go.mod` and
/// `go.sum` beside its sources, e.g. `"franz-eos"` on franz-go), built now unless cached.
///
/// # Errors
/// No Go toolchain, or a failed build (with Go's output).
pub fn build_module(module: &str) -> Result<PathBuf> {
    let dir = go_dir().join(module);
    let mut inputs = build_cache::files(&dir, &|p| p.extension().is_some_and(|e| e == "go"))?;
    inputs.extend([dir.join("go.mod"), dir.join("go.sum")]);
    let build = Build {
        kind: "go-clients",
        name: module,
        key: (module, go(&["version"])?),
        inputs: &inputs,
    };
    build.get_or_build(|partial| {
        let out = std::process::Command::new("go")
            .args(["build", "-buildvcs=false", "-o"])
            .arg(partial)
            .arg(".")
            .current_dir(&dir)
            .output()
            .context("running the Go toolchain (`go`): Go 1.26 or later must be installed")?;
        ensure!(
            out.status.success(),
            "go build in {} failed ({}):\n{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    })
}

/// Runs `binary` with `args`; kills it if it runs longer than `limit`.
///
/// # Errors
/// It could not start, outlived `limit`, or printed a line that is not a JSON object.
pub async fn run(binary: &Path, args: &[&str], limit: Duration) -> Result<Output> {
    let mut command = Command::new(binary);
    command.args(args);
    crate::client_program::run(command, limit).await
}

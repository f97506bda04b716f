//! kmock as a dependency (issue 24). A throwaway crate, laid out beside a link to this repository
//! so that README's relative paths hold, depends on kmock and kmock-client through README's
//! dev-dependency lines, copied from README.md here so that they cannot drift. In it, with real
//! cargo, README's Rust example runs, and `fixtures/downstream/hardened.rs` checks that the codec
//! the crate got is kmock's hardened one (a hostile record count refused without aborting, a
//! multi-member gzip batch read whole; see that file). Its Cargo.lock must name
//! kmock-kafka-protocol and no kafka-protocol from a registry.
//!
//! The crate's target dir is kept under this test's target dir (`CARGO_TARGET_TMPDIR`), so only
//! the first run builds its dependencies. It builds `--offline` from a copy of the workspace's
//! Cargo.lock (everything it names is in the registry cache once the workspace has built), and
//! falls back to the registry if cargo still finds something missing.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use anyhow::{bail, ensure, Context as _, Result};
use bytes::Bytes;
use flate2::write::GzEncoder;
use kmock_client::kafka_protocol::records::Compression;
use kmock_client::{encode_batch, record};
use std::io::Write as _;

/// Only catches a hang: building kmock's dependencies from nothing takes minutes on a loaded
/// 2-core machine.
const BUILD_HANG_GUARD: Duration = Duration::from_secs(3600);
/// Only catches a hang of an example (each runs in well under a second).
const RUN_HANG_GUARD: Duration = Duration::from_secs(300);

/// The repository: the parent of this crate.
fn repository() -> Result<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .context("the repository's path")
}

/// README's "In process, from Rust" section: its first TOML block and the Rust block after it.
fn readme_blocks(readme: &str) -> Result<(String, String)> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("In process, from Rust"))
        .context("README has no section \"In process, from Rust\"")?;
    let block = |after: &str, fence: &str| -> Result<(String, usize)> {
        let start = after
            .find(fence)
            .with_context(|| format!("no {fence} block"))?
            + fence.len();
        let len = after[start..].find("\n```").context("an unclosed block")?;
        Ok((
            after[start..start + len]
                .trim_start_matches('\n')
                .to_owned()
                + "\n",
            start + len,
        ))
    };
    let (toml, end) = block(section, "```toml")?;
    let (rust, _) = block(&section[end..], "```rust")?;
    ensure!(
        toml.starts_with("[dev-dependencies]\n"),
        "README's TOML block should be the [dev-dependencies] table: {toml}"
    );
    Ok((toml, rust))
}

/// Fits the length and CRC fields of a v2 record batch after its other bytes changed.
fn fit(mut batch: Vec<u8>) -> Bytes {
    let length = i32::try_from(batch.len() - 12).expect("a small batch");
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

/// Length in bytes of the record at the start of `records`: its zigzag varint length and body.
fn record_len(records: &[u8]) -> usize {
    let (mut raw, mut shift, mut read) = (0u64, 0, 0);
    loop {
        let byte = records[read];
        raw |= u64::from(byte & 0x7f) << shift;
        read += 1;
        shift += 7;
        if byte & 0x80 == 0 {
            break;
        }
    }
    let body = (raw >> 1) as i64 ^ -((raw & 1) as i64);
    read + usize::try_from(body).expect("a record's length")
}

fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data)?;
    Ok(encoder.finish()?)
}

/// A batch of one record whose header declares 2^31−1.
fn hostile_batch() -> Result<Bytes> {
    let mut batch = encode_batch(&[record(b"k", b"v")], Compression::None)?.to_vec();
    batch[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    Ok(fit(batch))
}

/// Six records `r0`..`r5` in one gzip batch whose data is two gzip members of three records each.
fn multi_member_gzip_batch() -> Result<Bytes> {
    let records: Vec<_> = (0..6)
        .map(|i| record(b"k", format!("r{i}").as_bytes()))
        .collect();
    let plain = encode_batch(&records, Compression::None)?;
    let section = &plain[61..];
    let split = (0..3).fold(0, |at, _| at + record_len(&section[at..]));
    let mut batch = plain[..61].to_vec();
    batch[21..23].copy_from_slice(&(Compression::Gzip as i16).to_be_bytes());
    batch.extend(gzip(&section[..split])?);
    batch.extend(gzip(&section[split..])?);
    Ok(fit(batch))
}

/// Runs `cargo <args>` in `dir` with `target` as its target dir, within `guard`.
async fn cargo(dir: &Path, target: &Path, args: &[&str], guard: Duration) -> Result<Output> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = tokio::process::Command::new(cargo);
    command
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .kill_on_drop(true);
    let output = tokio::time::timeout(guard, command.output())
        .await
        .with_context(|| format!("cargo {args:?} hung for {guard:?}"))??;
    Ok(output)
}

/// Builds the downstream crate's examples, offline first.
async fn build_examples(app: &Path, target: &Path) -> Result<()> {
    let offline = ["build", "--offline", "--examples"];
    let mut output = cargo(app, target, &offline, BUILD_HANG_GUARD).await?;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() && stderr.contains("offline") {
        eprintln!("the offline build failed, trying with the registry:\n{stderr}");
        output = cargo(app, target, &["build", "--examples"], BUILD_HANG_GUARD).await?;
    }
    ensure!(
        output.status.success(),
        "the downstream crate did not build:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// Runs the downstream crate's example `name`; its stdout.
async fn run_example(target: &Path, name: &str) -> Result<String> {
    let mut command = tokio::process::Command::new(target.join("debug/examples").join(name));
    command.kill_on_drop(true);
    let output = tokio::time::timeout(RUN_HANG_GUARD, command.output())
        .await
        .with_context(|| format!("the example {name} hung for {RUN_HANG_GUARD:?}"))??;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "the downstream example {name} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(stdout)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_downstream_crate_gets_the_hardened_codec() -> Result<()> {
    let repository = repository()?;
    let readme = std::fs::read_to_string(repository.join("README.md"))?;
    let (dev_dependencies, example) = readme_blocks(&readme)?;

    // <base>/kmock is this repository, <base>/app the crate: README's `../kmock/…` paths hold.
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("downstream");
    let app = base.join("app");
    let link = base.join("kmock");
    std::fs::create_dir_all(app.join("src"))?;
    std::fs::create_dir_all(app.join("examples"))?;
    if std::fs::read_link(&link).ok().as_deref() != Some(repository.as_path()) {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&repository, &link)?;
    }
    let manifest = format!(
        "[package]\nname = \"kmock-downstream\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         publish = false\n\n[workspace]\n\n{dev_dependencies}\
         # Not from README: what fixtures/downstream/hardened.rs needs beside.\nbytes = \"1\"\n\n\
         # Not from README: no debug info, a quicker first build.\n[profile.dev]\ndebug = false\n"
    );
    std::fs::write(app.join("Cargo.toml"), manifest)?;
    std::fs::write(
        app.join("src/lib.rs"),
        "//! A throwaway crate depending on kmock.\n",
    )?;
    std::fs::write(app.join("examples/readme.rs"), &example)?;
    let hardened = std::fs::read_to_string(kmock_tests::fixture("downstream/hardened.rs"))?;
    std::fs::write(app.join("examples/hardened.rs"), hardened)?;
    std::fs::copy(repository.join("Cargo.lock"), app.join("Cargo.lock"))?;
    std::fs::write(app.join("hostile.batch"), hostile_batch()?)?;
    std::fs::write(
        app.join("multi_member_gzip.batch"),
        multi_member_gzip_batch()?,
    )?;

    let target = base.join("target");
    build_examples(&app, &target).await?;
    let readme_out = run_example(&target, "readme").await?;
    ensure!(
        readme_out.starts_with("bootstrap.servers=127.0.0.1:") && readme_out.lines().count() == 1,
        "README's example printed {readme_out:?}"
    );
    let hardened_out = run_example(&target, "hardened").await?;
    let records = r#"["r0", "r1", "r2", "r3", "r4", "r5"]"#;
    let expected = format!(
        "codec: hostile record count refused\n\
         codec: multi-member gzip read {records}\n\
         broker: hostile record count answered INVALID_RECORD\n\
         broker: multi-member gzip fetched {records}\n\
         broker: hostile topic count closed that connection only\n"
    );
    ensure!(
        hardened_out == expected,
        "hardened printed:\n{hardened_out}\nexpected:\n{expected}"
    );

    // The lock the downstream crate built with: the hardened codec, by path, and no other.
    let lock = std::fs::read_to_string(app.join("Cargo.lock"))?;
    let codec: Vec<&str> = lock
        .split("[[package]]")
        .filter(|p| {
            p.contains("name = \"kmock-kafka-protocol\"") || p.contains("name = \"kafka-protocol\"")
        })
        .map(str::trim)
        .collect();
    println!("the downstream crate's Cargo.lock:\n{}", codec.join("\n"));
    ensure!(
        codec.len() == 1
            && codec[0].starts_with("name = \"kmock-kafka-protocol\"\nversion = \"0.18.0\"\n"),
        "the downstream's Cargo.lock should hold kmock-kafka-protocol 0.18.0 only: {codec:?}"
    );
    ensure!(
        !codec[0].contains("source ="),
        "kmock-kafka-protocol should come by path: {}",
        codec[0]
    );
    Ok(())
}

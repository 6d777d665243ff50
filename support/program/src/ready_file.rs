//! A ready file: a server writes one once it accepts connections, so that
//! whoever started it (a script, the book's observations, an experiment) waits
//! for the file instead of guessing with a sleep or scraping a log line.
//!
//! The file is written under another name and renamed into place, so a ready
//! file that exists is complete. (The seed experiment lost a run to a reader
//! that found its marker file created but still empty.)

use std::{
    net::SocketAddr,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use tokio::sync::oneshot;

/// Writes `contents` (say, the addresses the server listens on, one per line)
/// to `path` atomically.
pub fn publish(path: &Path, contents: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    std::fs::write(&partial, contents)
        .with_context(|| format!("cannot write {}", Path::new(&partial).display()))?;
    std::fs::rename(&partial, path)
        .with_context(|| format!("cannot rename the ready file into {}", path.display()))
}

/// Writes the ready file at `path` (if there is one) once every server of the
/// program has sent the address it listens on, one address per line, in the
/// order given. A server that ends before it listens drops its sender; then
/// nothing is written, and the server's own error says what went wrong.
pub async fn publish_when_listening(
    path: Option<&Path>,
    listening: impl IntoIterator<Item = oneshot::Receiver<SocketAddr>>,
) -> anyhow::Result<()> {
    let Some(path) = path else { return Ok(()) };
    let mut contents = String::new();
    for server in listening {
        match server.await {
            Ok(addr) => contents.push_str(&format!("{addr}\n")),
            Err(_) => return Ok(()),
        }
    }
    publish(path, &contents)
}

/// Waits up to `limit` for `path` to exist and returns its contents. `alive`
/// is asked every poll whether the program that should write it still runs;
/// when it says no, the wait ends at once with an error, rather than at the limit.
pub fn wait(
    path: &Path,
    limit: Duration,
    mut alive: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<String> {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return Ok(text);
        }
        if !alive()? {
            bail!(
                "the program exited before it wrote its ready file {}",
                path.display()
            );
        }
        if started.elapsed() > limit {
            bail!(
                "no ready file {} within {:.0} s",
                path.display(),
                limit.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_file_is_complete_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/ready");
        publish(&path, "127.0.0.1:50051\n").unwrap();
        assert_eq!(
            wait(&path, Duration::from_secs(1), || Ok(true)).unwrap(),
            "127.0.0.1:50051\n"
        );
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["ready"]);
    }

    #[tokio::test]
    async fn published_once_every_server_listens_and_never_for_one_that_ended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ready");
        let (grpc, grpc_listening) = oneshot::channel();
        let (rest, rest_listening) = oneshot::channel();
        grpc.send("127.0.0.1:50051".parse().unwrap()).unwrap();
        rest.send("127.0.0.1:8443".parse().unwrap()).unwrap();
        publish_when_listening(Some(&path), [grpc_listening, rest_listening])
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "127.0.0.1:50051\n127.0.0.1:8443\n"
        );

        let never = dir.path().join("never");
        let (ended, ended_listening) = oneshot::channel::<SocketAddr>();
        drop(ended);
        publish_when_listening(Some(&never), [ended_listening])
            .await
            .unwrap();
        assert!(!never.exists());
    }

    #[test]
    fn waiting_ends_when_the_writer_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let error = wait(&dir.path().join("never"), Duration::from_secs(60), || {
            Ok(false)
        })
        .unwrap_err();
        assert!(error.to_string().contains("exited before"), "{error}");
    }
}

//! A child process that an experiment starts from its own executable, so that
//! every run gets fresh memory, connections and timers, and a server can be
//! pinned to a core of its own.
//!
//! The conversation is JSON lines over the child's stdin and stdout:
//!
//! 1. the experiment writes the child's configuration, one typed value
//!    ([`Role`]), as the first line of its stdin: nothing is rebuilt by hand
//!    as a list of flags;
//! 2. the child answers with one typed ready record (where it listens, what
//!    it really runs on) as the first line of its stdout;
//! 3. the experiment may then ask questions (say, "your CPU time so far"), a
//!    line each, and read one answer line each;
//! 4. when its stdin closes (the experiment is done with it, or died) the
//!    child exits at once, so no child outlives its experiment.
//!
//! A child's logs go to its stderr, which the experiment sends to a file.

use std::{
    io::{BufRead, Write},
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{Context, bail};
use serde::{Serialize, de::DeserializeOwned};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{ChildStdin, ChildStdout},
};

/// A role a program can be started in by its experiment: the configuration
/// type itself, with what the child says when ready and what it can be asked.
pub trait Role: Serialize + DeserializeOwned {
    /// The words after the executable that start it in this role (a hidden
    /// subcommand of the program).
    const COMMAND: &'static [&'static str];
    /// What the child says once it is ready.
    type Ready: Serialize + DeserializeOwned;
    /// A question the experiment may ask while the child runs (`()`: none).
    type Ask: Serialize + DeserializeOwned;
    type Answer: Serialize + DeserializeOwned;
}

// --- the child's side -------------------------------------------------------

/// Reads this process's configuration: the first line of stdin.
pub fn config<R: Role>() -> anyhow::Result<R> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the configuration from stdin")?;
    serde_json::from_str(&line).with_context(|| {
        format!(
            "stdin's first line is not this program's configuration: {:?} \
             (this mode is for the experiment that starts it, not for use by hand)",
            line.trim()
        )
    })
}

/// The child's end of the conversation, once it answers questions.
pub struct Link<R: Role> {
    stdout: Arc<Mutex<std::io::Stdout>>,
    _role: std::marker::PhantomData<R>,
}

/// Starts the thread that answers questions with `answer`, and that ends the
/// process when stdin closes. It is started before the child says it is
/// ready, so a ready record that counts threads counts this one too.
pub fn answer<R: Role>(
    mut answer: impl FnMut(R::Ask) -> R::Answer + Send + 'static,
) -> anyhow::Result<Link<R>> {
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    let out = stdout.clone();
    let (running, started) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("harness-ctl".into())
        .spawn(move || {
            // Named by now (std names a thread before running it): say so.
            let _ = running.send(());
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                let reply = match serde_json::from_str::<R::Ask>(&line) {
                    Ok(ask) => serde_json::to_string(&answer(ask)),
                    Err(e) => serde_json::to_string(&format!("not a question: {e}")),
                };
                let mut out = out.lock().expect("stdout lock");
                let sent = reply
                    .map_err(std::io::Error::other)
                    .and_then(|r| writeln!(out, "{r}"))
                    .and_then(|()| out.flush());
                if sent.is_err() {
                    break;
                }
            }
            // The experiment closed our stdin: it no longer wants us.
            std::process::exit(0);
        })
        .context("cannot start the child's control thread")?;
    started
        .recv()
        .context("the child's control thread did not start")?;
    Ok(Link {
        stdout,
        _role: std::marker::PhantomData,
    })
}

impl<R: Role> Link<R> {
    /// Says the child is ready.
    pub fn ready(&self, ready: &R::Ready) -> anyhow::Result<()> {
        let line = serde_json::to_string(ready)?;
        let mut out = self.stdout.lock().expect("stdout lock");
        writeln!(out, "{line}")?;
        out.flush()?;
        Ok(())
    }
}

/// For a child that is never asked anything: says it is ready.
pub fn ready<R: Role<Ask = (), Answer = ()>>(ready: &R::Ready) -> anyhow::Result<()> {
    answer::<R>(|()| ())?.ready(ready)
}

// --- the experiment's side ----------------------------------------------------

/// How to start a child.
#[derive(Debug, Clone, Default)]
pub struct Spawn {
    /// Pin it to this CPU (`taskset -c N`).
    pub cpu: Option<usize>,
    /// Run it under this program, such as `strace -f -c -o FILE`.
    pub wrapper: Vec<String>,
    /// Where its stderr goes (its logs); `None`: this process's stderr.
    pub log: Option<PathBuf>,
}

/// A running child, and what it said when it was ready. Dropping it kills the
/// process: an experiment that fails half-way leaves nothing behind.
pub struct Child<R: Role> {
    process: tokio::process::Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// The command line, and where its stderr went: what a failure names.
    words: Vec<String>,
    log: Option<PathBuf>,
    pub ready: R::Ready,
}

/// How long a child may take to say it is ready.
pub const READY_WITHIN: Duration = Duration::from_secs(60);

impl<R: Role> Child<R> {
    /// Starts `exe` in role `R` with `config`, and waits for its ready record.
    pub async fn start(exe: &Path, config: &R, how: &Spawn) -> anyhow::Result<Child<R>> {
        let mut words: Vec<String> = Vec::new();
        if let Some(cpu) = how.cpu {
            words.extend(["taskset".into(), "-c".into(), cpu.to_string()]);
        }
        words.extend(how.wrapper.iter().cloned());
        words.push(exe.display().to_string());
        words.extend(R::COMMAND.iter().map(|w| w.to_string()));
        let stderr = match &how.log {
            Some(path) => Stdio::from(
                std::fs::File::create(path)
                    .with_context(|| format!("cannot create {}", path.display()))?,
            ),
            None => Stdio::inherit(),
        };
        let mut process = tokio::process::Command::new(&words[0])
            .args(&words[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start `{}`", words.join(" ")))?;
        let mut stdin = process.stdin.take().context("the child has no stdin")?;
        let stdout = process.stdout.take().context("the child has no stdout")?;
        let mut line = serde_json::to_string(config)?;
        line.push('\n');
        let sent = async {
            stdin.write_all(line.as_bytes()).await?;
            stdin.flush().await
        }
        .await;
        // A child that quits at once may close its stdin before the
        // configuration arrives: its exit status, read below, says more
        // than the broken pipe does.
        if let Err(e) = sent
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            return Err(e).context("cannot send the child its configuration");
        }
        let mut stdout = BufReader::new(stdout).lines();
        let said = tokio::time::timeout(READY_WITHIN, stdout.next_line())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "`{}` was not ready within {READY_WITHIN:?}",
                    words.join(" ")
                )
            })?
            .context("cannot read the child's stdout")?;
        let Some(said) = said else {
            let status = process.wait().await?;
            bail!(
                "`{}` exited ({status}) before it was ready{}",
                words.join(" "),
                why(how.log.as_deref())
            );
        };
        let ready = serde_json::from_str(&said)
            .with_context(|| format!("the child said {said:?} instead of its ready record"))?;
        Ok(Child {
            process,
            stdin: Some(stdin),
            stdout,
            words,
            log: how.log.clone(),
            ready,
        })
    }

    /// The child's process id.
    pub fn id(&self) -> Option<u32> {
        self.process.id()
    }

    /// Asks one question and waits (at most 30 s) for its answer.
    pub async fn ask(&mut self, question: &R::Ask) -> anyhow::Result<R::Answer> {
        let stdin = self.stdin.as_mut().context("the child's stdin is closed")?;
        let mut line = serde_json::to_string(question)?;
        line.push('\n');
        stdin.write_all(line.as_bytes()).await?;
        stdin.flush().await?;
        let answer = tokio::time::timeout(Duration::from_secs(30), self.stdout.next_line())
            .await
            .context("the child did not answer within 30 s")??
            .context("the child exited instead of answering")?;
        serde_json::from_str(&answer)
            .with_context(|| format!("the child answered {answer:?}, not what was asked for"))
    }

    /// Waits, at most `limit`, for the child to finish its work and exit
    /// (its stdin stays open meanwhile); it must exit successfully.
    pub async fn finish(mut self, limit: Duration) -> anyhow::Result<()> {
        let status = tokio::time::timeout(limit, self.process.wait())
            .await
            .map_err(|_| anyhow::anyhow!("the child did not finish within {limit:?}"))??;
        if !status.success() {
            bail!(
                "`{}` exited with {status}{}",
                self.words.join(" "),
                why(self.log.as_deref())
            );
        }
        Ok(())
    }

    /// Tells the child it is no longer wanted (closes its stdin) and waits,
    /// at most 10 s, for it to exit.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        tokio::time::timeout(Duration::from_secs(10), self.process.wait())
            .await
            .context("the child did not exit within 10 s of its stdin closing")??;
        Ok(())
    }
}

/// What a child that failed said last, from its log: its own error line,
/// which names the file or the call that failed (or where to look, when the
/// log cannot be read; with no log its words went to our stderr, above).
fn why(log: Option<&Path>) -> String {
    let Some(log) = log else {
        return "; its own error is above".to_string();
    };
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let last: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    match last.len() {
        0 => format!("; it wrote nothing to {}", log.display()),
        n => format!(
            ": {} (its log: {})",
            last[n.saturating_sub(3)..].join(" / "),
            log.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// A child played by the shell: it reads its configuration, says it is
    /// ready with the number it was given, then answers every question with
    /// the question's length, until its stdin closes.
    #[derive(Serialize, Deserialize)]
    struct Shell {
        number: u32,
    }

    impl Role for Shell {
        const COMMAND: &'static [&'static str] = &[
            "-c",
            r#"read config; n=${config#*:}; echo "{\"said\":${n%\}}}"; while read q; do echo "${#q}"; done"#,
        ];
        type Ready = Said;
        type Ask = String;
        type Answer = usize;
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Said {
        said: u32,
    }

    #[tokio::test]
    async fn configured_ready_asked_and_stopped() {
        let sh = Path::new("/bin/sh");
        let mut child = Child::start(sh, &Shell { number: 7 }, &Spawn::default())
            .await
            .unwrap();
        assert_eq!(child.ready, Said { said: 7 });
        // "abc" is sent as the JSON string "\"abc\"": five characters.
        assert_eq!(child.ask(&"abc".to_string()).await.unwrap(), 5);
        child.stop().await.unwrap();
    }

    /// A child that exits before it is ready is reported at once, with its
    /// status, not after the ready timeout.
    #[derive(Serialize, Deserialize)]
    struct Quitter;

    impl Role for Quitter {
        const COMMAND: &'static [&'static str] = &["-c", "exit 3"];
        type Ready = ();
        type Ask = ();
        type Answer = ();
    }

    #[tokio::test]
    async fn a_child_that_quits_early_is_reported() {
        let started = std::time::Instant::now();
        let error = Child::start(Path::new("/bin/sh"), &Quitter, &Spawn::default())
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("before it was ready"), "{error}");
        assert!(error.contains('3'), "{error}");
        assert!(started.elapsed() < READY_WITHIN);
    }

    /// A child that fails after it was ready: the parent's error carries the
    /// child's own last words from its log, not only its exit status.
    #[derive(Serialize, Deserialize)]
    struct Failing;

    impl Role for Failing {
        const COMMAND: &'static [&'static str] = &[
            "-c",
            r#"read config; echo null; echo "error: cannot write /data/raw.csv: No space left on device" >&2; exit 1"#,
        ];
        type Ready = ();
        type Ask = ();
        type Answer = ();
    }

    #[tokio::test]
    async fn a_failing_childs_reason_reaches_the_parent() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("child.log");
        let how = Spawn {
            log: Some(log.clone()),
            ..Spawn::default()
        };
        let child = Child::start(Path::new("/bin/sh"), &Failing, &how)
            .await
            .unwrap();
        let error = child
            .finish(Duration::from_secs(30))
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("/data/raw.csv: No space left"), "{error}");
        assert!(error.contains("exit status: 1"), "{error}");
        assert!(error.contains(&log.display().to_string()), "{error}");
    }
}

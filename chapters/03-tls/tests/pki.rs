//! End-to-end tests of the development PKI and the TLS listener built on it.
//!
//! Every test makes its own PKI in a temporary folder, so tests never touch the
//! workshop's `certs/` and never depend on each other. Servers bind port 0.

use std::{fs, net::SocketAddr, path::Path, sync::Arc, time::Duration};

use certs::{Pki, TlsArgs, TlsListener, client_config, inspect, pki::Outcome, server_config};
use rustls::pki_types::ServerName;
use tempfile::TempDir;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use tokio_rustls::{TlsConnector, client::TlsStream};

/// Generous bound for anything that talks to a socket: a loaded 2-core machine is
/// slow, but a hang must still fail the test rather than stall the suite.
const WAIT: Duration = Duration::from_secs(10);

const FILES: [&str; 5] = [
    "ca.pem",
    "server.pem",
    "server.key",
    "client.pem",
    "client.key",
];

/// A complete PKI in a fresh temporary folder (kept alive by the returned `TempDir`).
fn fresh_pki() -> (TempDir, Pki) {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = Pki::new(dir.path());
    assert_eq!(pki.generate(false).expect("generate"), Outcome::Created);
    (dir, pki)
}

fn read_all(pki: &Pki) -> Vec<Vec<u8>> {
    FILES
        .iter()
        .map(|f| fs::read(pki.path(f)).expect("read PKI file"))
        .collect()
}

/// A TLS listener on 127.0.0.1:0 presenting `pki`'s server certificate.
async fn listen(pki: &Pki) -> TlsListener {
    let config = server_config(&TlsArgs::in_dir(&pki.dir), false, &[b"h2"]).expect("server config");
    TlsListener::bind("127.0.0.1:0".parse().unwrap(), config)
        .await
        .expect("bind")
}

/// Connects with a rustls client that trusts only `ca` and dials "localhost".
async fn tls_connect(addr: SocketAddr, ca: &Path) -> std::io::Result<TlsStream<TcpStream>> {
    let connector = TlsConnector::from(Arc::new(client_config(ca, None).expect("client config")));
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(WAIT, connector.connect(name, tcp))
        .await
        .expect("client handshake timed out")
}

/// The client address of the first stream the listener hands to the server.
/// Compared with a good client's address, it shows that a bad connection made
/// before that client never reached the server.
async fn first_accepted_peer(
    accepted: &mut tokio::sync::mpsc::Receiver<tokio_rustls::server::TlsStream<TcpStream>>,
) -> SocketAddr {
    let first = tokio::time::timeout(WAIT, accepted.recv())
        .await
        .expect("no stream handed out")
        .expect("listener stopped");
    first.get_ref().0.peer_addr().unwrap()
}

#[test]
fn generate_writes_five_files_and_private_keys_are_owner_only() {
    let (_dir, pki) = fresh_pki();
    for file in FILES {
        let path = pki.path(file);
        assert!(path.is_file(), "{} missing", path.display());
        assert!(
            fs::metadata(&path).unwrap().len() > 0,
            "{} empty",
            path.display()
        );
    }
    assert!(pki.is_complete());

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for key in [pki.server_key(), pki.client_key()] {
            let mode = fs::metadata(&key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{} has mode {mode:o}", key.display());
        }
    }
}

#[test]
fn rerunning_keeps_existing_files_unless_forced() {
    let (_dir, pki) = fresh_pki();
    let original = read_all(&pki);

    assert_eq!(pki.generate(false).unwrap(), Outcome::KeptExisting);
    assert_eq!(
        read_all(&pki),
        original,
        "a plain re-run must not touch the files"
    );

    assert_eq!(pki.generate(true).unwrap(), Outcome::Created);
    let replaced = read_all(&pki);
    for ((file, old), new) in FILES.iter().zip(&original).zip(&replaced) {
        assert_ne!(old, new, "--force must replace {file}");
    }
}

#[test]
fn a_partial_pki_is_an_error_that_names_the_folder_and_force() {
    let (_dir, pki) = fresh_pki();
    fs::remove_file(pki.client_key()).unwrap();

    let message = format!("{:#}", pki.generate(false).unwrap_err());
    assert!(
        message.contains(&pki.dir.display().to_string()),
        "{message}"
    );
    assert!(message.contains("--force"), "{message}");
    // Nothing was patched up: the hole is still there.
    assert!(!pki.client_key().exists());

    // The way out that the message names does work.
    assert_eq!(pki.generate(true).unwrap(), Outcome::Created);
    assert!(pki.is_complete());
}

#[test]
fn a_certs_dir_that_is_a_file_is_named_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("certs");
    fs::write(&file, "not a folder").unwrap();
    let message = format!("{:#}", Pki::new(&file).generate(false).unwrap_err());
    assert!(message.contains(&file.display().to_string()), "{message}");
    assert!(message.contains("is a file"), "{message}");
    assert!(message.contains("--certs-dir"), "{message}");
    assert_eq!(fs::read_to_string(&file).unwrap(), "not a folder");
    // A folder below a file cannot be made either, and the message says which.
    let below = file.join("dev");
    let message = format!("{:#}", Pki::new(&below).generate(false).unwrap_err());
    assert!(message.contains(&below.display().to_string()), "{message}");
}

#[test]
fn inspect_shows_names_usages_and_ca_constraints() {
    let (_dir, pki) = fresh_pki();

    let server = inspect::describe(&pki.server_cert()).unwrap();
    for expected in ["DNS:localhost", "IP:127.0.0.1", "IP:::1", "serverAuth"] {
        assert!(
            server.contains(expected),
            "missing {expected:?} in\n{server}"
        );
    }
    assert!(!server.contains("clientAuth"), "{server}");

    let ca = inspect::describe(&pki.ca_cert()).unwrap();
    assert!(ca.contains("yes, path length 0"), "{ca}");

    let client = inspect::describe(&pki.client_cert()).unwrap();
    assert!(client.contains("clientAuth"), "{client}");
    assert!(!client.contains("serverAuth"), "{client}");
}

#[test]
fn a_missing_certificate_names_the_command_that_creates_it() {
    let empty = tempfile::tempdir().unwrap();
    let err = server_config(&TlsArgs::in_dir(empty.path()), false, &[b"h2"]).unwrap_err();
    let message = format!("{err:#}");
    assert!(message.contains("cargo run -p certs"), "{message}");
    assert!(message.contains("server.pem"), "{message}");
}

#[tokio::test]
async fn binding_a_busy_port_names_the_address() {
    let (_dir, pki) = fresh_pki();
    // Hold a port so the TLS listener cannot have it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();

    let config = server_config(&TlsArgs::in_dir(&pki.dir), false, &[b"h2"]).unwrap();
    let Err(err) = TlsListener::bind(addr, config).await else {
        panic!("binding {addr} twice succeeded");
    };
    let message = format!("{err:#}");
    assert!(message.contains(&addr.to_string()), "{message}");
    assert!(message.contains("choose another address"), "{message}");
    // A program that knows its flag names it instead.
    let message = format!(
        "{:#}",
        certs::ListenError::name_setting(err, "--addr or ADDR")
    );
    assert!(
        message.contains("move this server with --addr or ADDR"),
        "{message}"
    );
    assert_eq!(message.matches("in use").count(), 1, "{message}");
}

#[tokio::test]
async fn a_client_trusting_another_ca_fails_the_handshake_and_says_why() {
    let (_dir, ours) = fresh_pki();
    let (_other_dir, theirs) = fresh_pki();
    let listener = listen(&ours).await;
    let addr = listener.local_addr().unwrap();
    let mut accepted = listener.incoming();

    let err = tls_connect(addr, &theirs.ca_cert())
        .await
        .expect_err("a client trusting another CA must not complete the handshake");
    let message = err.to_string();
    println!("client-side handshake error: {message}");
    // rustls says "invalid peer certificate: UnknownIssuer": the cause, not just "failed".
    assert!(message.contains("invalid peer certificate"), "{message}");
    assert!(message.contains("UnknownIssuer"), "{message}");

    // The listener still serves, and the failed client never reached the server:
    // the first stream it hands out is the good client's.
    let good = tls_connect(addr, &ours.ca_cert())
        .await
        .expect("trusted client");
    assert_eq!(
        first_accepted_peer(&mut accepted).await,
        good.get_ref().0.local_addr().unwrap()
    );
}

#[tokio::test]
async fn plaintext_to_the_tls_port_gets_no_stream_and_the_server_keeps_serving() {
    let (_dir, pki) = fresh_pki();
    let listener = listen(&pki).await;
    let addr = listener.local_addr().unwrap();
    let mut accepted = listener.incoming();

    // What an h2c (HTTP/2 without TLS) client sends first.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    // The server must close the connection, not leave it hanging. A reset while
    // reading counts as closed too.
    let mut reply = Vec::new();
    let read = tokio::time::timeout(WAIT, plain.read_to_end(&mut reply))
        .await
        .expect("the server left a plaintext connection hanging");
    println!(
        "plaintext client read {read:?}, {} bytes: {reply:02x?}",
        reply.len()
    );
    // Whatever came back is TLS (an alert record, content type 0x15), never HTTP.
    assert!(reply.is_empty() || reply[0] == 0x15, "{reply:02x?}");

    let good = tls_connect(addr, &pki.ca_cert())
        .await
        .expect("TLS client after plaintext");
    assert_eq!(
        first_accepted_peer(&mut accepted).await,
        good.get_ref().0.local_addr().unwrap(),
        "the plaintext connection must never be handed to the server"
    );
}

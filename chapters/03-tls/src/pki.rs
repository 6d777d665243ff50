//! The development PKI: one CA and two leaf certificates, made with rcgen.
//!
//! A client trusts a server because the server's certificate chains to a CA the
//! client already has (`ca.pem`) and names the host the client dialled. Nothing else
//! about the certificate matters for trust, which is why one small CA is enough to
//! make TLS real on a laptop: the servers present `server.pem`, every client loads
//! `ca.pem`, and with `--mtls` the servers also demand `client.pem`.

use std::{
    fs,
    io::{self, Write},
    path::{Path, PathBuf},
};

use anyhow::Context;
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose,
    ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth},
    IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

/// Where the five files of the development PKI live.
#[derive(Clone, Debug)]
pub struct Pki {
    pub dir: PathBuf,
}

/// The names of the PKI's files, relative to its directory.
pub const CA_CERT: &str = "ca.pem";
pub const SERVER_CERT: &str = "server.pem";
pub const SERVER_KEY: &str = "server.key";
pub const CLIENT_CERT: &str = "client.pem";
pub const CLIENT_KEY: &str = "client.key";
const ALL_FILES: [&str; 5] = [CA_CERT, SERVER_CERT, SERVER_KEY, CLIENT_CERT, CLIENT_KEY];

/// The names the server certificate is valid for: every way a reader on this
/// machine dials the servers. A client that dials any other name (say, the
/// machine's hostname) fails verification, on purpose.
pub const SERVER_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The command that creates the PKI, quoted in every "file missing" message.
pub const CREATE_COMMAND: &str = "cargo run -p certs";

/// What [`Pki::generate`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    /// All five files were already there and `force` was off: nothing was touched.
    KeptExisting,
}

impl Pki {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Pki { dir: dir.into() }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn ca_cert(&self) -> PathBuf {
        self.path(CA_CERT)
    }
    pub fn server_cert(&self) -> PathBuf {
        self.path(SERVER_CERT)
    }
    pub fn server_key(&self) -> PathBuf {
        self.path(SERVER_KEY)
    }
    pub fn client_cert(&self) -> PathBuf {
        self.path(CLIENT_CERT)
    }
    pub fn client_key(&self) -> PathBuf {
        self.path(CLIENT_KEY)
    }

    /// True when all five files exist.
    pub fn is_complete(&self) -> bool {
        ALL_FILES.iter().all(|f| self.path(f).exists())
    }

    /// Creates the CA and both leaves. Existing files are kept unless `force` is
    /// set; a half-present PKI is an error rather than something to patch up,
    /// because a new leaf signed by a new CA would not verify against the old one.
    pub fn generate(&self, force: bool) -> anyhow::Result<Outcome> {
        let present: Vec<&str> = ALL_FILES
            .iter()
            .copied()
            .filter(|f| self.path(f).exists())
            .collect();
        if !force && present.len() == ALL_FILES.len() {
            return Ok(Outcome::KeptExisting);
        }
        if !force && !present.is_empty() {
            anyhow::bail!(
                "{} holds only part of the PKI ({}); re-run with --force to replace all five files",
                self.dir.display(),
                present.join(", ")
            );
        }
        if self.dir.exists() && !self.dir.is_dir() {
            anyhow::bail!(
                "the certificates' folder {} is a file, not a folder; point --certs-dir \
                 (or CERTS_DIR) at a folder, or move the file away",
                self.dir.display()
            );
        }
        fs::create_dir_all(&self.dir).with_context(|| {
            format!(
                "cannot create the certificates' folder {}",
                self.dir.display()
            )
        })?;
        let files = make_pki()?;
        for (name, contents) in files {
            let path = self.path(name);
            write_file(&path, contents.as_bytes(), name.ends_with(".key"))
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(Outcome::Created)
    }
}

/// Returns the five files' contents, named as in [`ALL_FILES`].
fn make_pki() -> Result<[(&'static str, String); 5], rcgen::Error> {
    // Backdate a little so a clock a few minutes behind still accepts the files.
    let now = OffsetDateTime::now_utc() - Duration::hours(1);

    // ANCHOR: ca
    // Every CA gets a name of its own. A client looks for the CA by the issuer
    // name in the server's certificate; were every run's CA named alike, a client
    // holding an older ca.pem would find it by name and report "BadSignature"
    // instead of the true cause, "UnknownIssuer". The suffix is the start of the
    // CA's public key, so no two runs share a name.
    let ca_key = KeyPair::generate()?; // ECDSA P-256
    let ca_id: String = ca_key.public_key_raw()[1..5]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut ca = CertificateParams::default();
    ca.distinguished_name.push(
        DnType::CommonName,
        format!("grpc-rest-workshop development CA {ca_id}"),
    );
    // The CA: allowed to sign certificates (keyCertSign), but only leaves:
    // path length 0 means nothing it signs may itself act as a CA.
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_before = now;
    ca.not_after = now + Duration::days(3650);
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    // ANCHOR_END: ca

    // ANCHOR: server_leaf
    // The server leaf: valid for the names in SERVER_NAMES, for server auth only.
    let names = SERVER_NAMES.map(String::from).to_vec();
    let (server_cert, server_key) = leaf(names, "localhost", ServerAuth, now, &issuer)?;
    // ANCHOR_END: server_leaf

    // ANCHOR: client_leaf
    // The client leaf: no host names, and usable only to prove who a client is.
    let (client_cert, client_key) = leaf(vec![], "workshop-client", ClientAuth, now, &issuer)?;
    // ANCHOR_END: client_leaf

    Ok([
        (CA_CERT, ca_cert.pem()),
        (SERVER_CERT, server_cert.pem()),
        (SERVER_KEY, server_key.serialize_pem()),
        (CLIENT_CERT, client_cert.pem()),
        (CLIENT_KEY, client_key.serialize_pem()),
    ])
}

// ANCHOR: leaf
/// A leaf signed by `issuer`: the host names and addresses in `names` (as
/// Subject Alternative Names), a common name for people to read, good for the
/// one job `usage` names, and valid for 397 days from `now`.
fn leaf(
    names: Vec<String>,
    common_name: &str,
    usage: ExtendedKeyUsagePurpose,
    now: OffsetDateTime,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<(Certificate, KeyPair), rcgen::Error> {
    let mut params = CertificateParams::new(names)?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.use_authority_key_identifier_extension = true;
    params.not_before = now;
    params.not_after = now + Duration::days(397); // the old public ceiling, less a day
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert, key))
}
// ANCHOR_END: leaf

// ANCHOR: write_file
/// Writes through a temporary file and a rename, so a reader never sees half a
/// file; keys are created readable by their owner only (mode 0600).
fn write_file(path: &Path, contents: &[u8], secret: bool) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp"); // server.pem.tmp, not server.tmp: the .pem and .key must not share one
    let tmp = PathBuf::from(tmp);
    // A leftover from an interrupted run would keep its old mode; start afresh.
    let _ = fs::remove_file(&tmp);
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if secret { 0o600 } else { 0o644 });
    }
    let mut file = options.open(&tmp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    fs::rename(&tmp, path)
}
// ANCHOR_END: write_file

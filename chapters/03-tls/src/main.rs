//! `cargo run -p certs`: create (or inspect) the development PKI.

use std::process::ExitCode;

use certs::{Pki, cli::Args, inspect, pki::Outcome};

fn main() -> ExitCode {
    let args = program::args::<Args>();
    let pki = Pki::new(&args.dir);
    let result = if args.show {
        show(&pki)
    } else {
        create(&pki, args.force)
    };
    program::exit_code(result)
}

fn create(pki: &Pki, force: bool) -> anyhow::Result<()> {
    match pki.generate(force)? {
        Outcome::Created => println!("created the development PKI in {}", pki.dir.display()),
        Outcome::KeptExisting => {
            println!(
                "kept the existing PKI in {} (use --force to replace it)",
                pki.dir.display()
            )
        }
    }
    for (path, what) in [
        (pki.ca_cert(), "CA certificate: what every client trusts"),
        (
            pki.server_cert(),
            "server certificate: localhost, 127.0.0.1, ::1",
        ),
        (pki.server_key(), "server private key (0600)"),
        (pki.client_cert(), "client certificate: for --mtls"),
        (pki.client_key(), "client private key (0600)"),
    ] {
        println!(
            "  {:<12} {what}",
            path.file_name().unwrap_or_default().to_string_lossy()
        );
    }
    println!("inspect them with: cargo run -p certs -- --show");
    Ok(())
}

fn show(pki: &Pki) -> anyhow::Result<()> {
    for path in [pki.ca_cert(), pki.server_cert(), pki.client_cert()] {
        print!("{}", inspect::describe(&path)?);
    }
    Ok(())
}

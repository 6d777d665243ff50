//! The arms of a run, and where the servers they call are: each arm changes
//! one thing from its neighbours (the protocol, the handshake, the pool, or how
//! much is rebuilt per call).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Context;

use super::{Caller, Http, fresh_tls};

/// One measured arm: its label and what calls it.
pub struct Arm {
    pub label: String,
    pub caller: Caller,
}

/// Where the servers are.
pub struct Servers {
    pub grpc_url: String,
    pub rest_url: String,
    pub grpc_addr: SocketAddr,
    pub rest_addr: SocketAddr,
    pub ca: PathBuf,
}

fn addr_of(url: &str) -> anyhow::Result<SocketAddr> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("`{url}` is not a URL"))?;
    let host = uri.host().unwrap_or("localhost");
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let port = uri.port_u16().unwrap_or(443);
    format!("{host}:{port}")
        .parse()
        .with_context(|| format!("`{url}`: this program dials 127.0.0.1 or an IP address"))
}

impl Servers {
    pub fn new(grpc_url: String, rest_url: String, ca: PathBuf) -> anyhow::Result<Servers> {
        Ok(Servers {
            grpc_addr: addr_of(&grpc_url)?,
            rest_addr: addr_of(&rest_url)?,
            grpc_url,
            rest_url,
            ca,
        })
    }

    /// Servers on `stack`'s (probably ephemeral) ports, by the name `localhost`.
    pub fn of_stack(stack: &stack::Stack, ca: PathBuf) -> anyhow::Result<Servers> {
        Servers::new(
            format!("https://localhost:{}", stack.grpc_addr.port()),
            format!("https://localhost:{}", stack.rest_addr.port()),
            ca,
        )
    }

    /// Starts the stack in this process on free ports, with the PKI in
    /// `certs_dir` (`--spawn`); the stack serves as long as it is kept.
    pub async fn spawn_stack(
        certs_dir: &Path,
        ca: PathBuf,
    ) -> anyhow::Result<(stack::Stack, Servers)> {
        let stack = stack::Stack::start(&stack::Args {
            grpc_addr: "127.0.0.1:0".parse()?,
            rest_addr: "127.0.0.1:0".parse()?,
            tls: certs::TlsArgs::in_dir(certs_dir),
            mtls: false,
            ready_file: None,
            metrics_addr: None,
        })
        .await?;
        let servers = Servers::of_stack(&stack, ca)?;
        Ok((stack, servers))
    }

    /// A fresh-connection caller: gRPC or REST, HTTP/2 or HTTP/1.1, resumption on or off.
    pub fn fresh(&self, grpc: bool, http: Http, resume: bool) -> anyhow::Result<Caller> {
        Ok(Caller::Fresh {
            grpc,
            http,
            addr: if grpc { self.grpc_addr } else { self.rest_addr },
            tls: fresh_tls(&self.ca, http, resume)?,
            handshakes: Arc::default(),
        })
    }
}

/// The arms of a run, in the order they are interleaved.
pub async fn arms(servers: &Servers, fresh: bool) -> anyhow::Result<Vec<Arm>> {
    let s = servers;
    let arm = |label: &str, caller| Arm {
        label: label.into(),
        caller,
    };
    Ok(if !fresh {
        vec![
            arm(
                "gRPC SayHello, one channel (h2)",
                Caller::grpc(&s.grpc_url, &s.ca).await?,
            ),
            arm(
                "REST POST, one client (h2)",
                Caller::rest(&s.rest_url, &s.ca, false)?,
            ),
            arm(
                "REST POST, one client (http/1.1)",
                Caller::rest(&s.rest_url, &s.ca, true)?,
            ),
        ]
    } else {
        // The fair arms share one TLS configuration each; `resumed` and `full`
        // differ only in rustls's session store.
        let mut no_pool_tls = certs::client_config(&s.ca, None)?;
        no_pool_tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let no_pool = reqwest::Client::builder()
            .tls_backend_preconfigured(no_pool_tls)
            .no_proxy()
            .pool_max_idle_per_host(0)
            .build()?;
        let fresh_conn = |label: &str, grpc: bool, http: Http, resumed: bool| {
            anyhow::Ok(arm(label, s.fresh(grpc, http, resumed)?))
        };
        // Each protocol's reused arm first, as the default run makes it: the
        // cost of a new connection is read against it, in the same run.
        vec![
            arm(
                "gRPC SayHello, one channel (h2)",
                Caller::grpc(&s.grpc_url, &s.ca).await?,
            ),
            fresh_conn("gRPC fresh conn, resumed TLS", true, Http::H2, true)?,
            fresh_conn("gRPC fresh conn, full TLS", true, Http::H2, false)?,
            arm(
                "gRPC naive (new endpoint+channel)",
                Caller::NaiveGrpc {
                    url: s.grpc_url.clone(),
                    ca: s.ca.clone(),
                },
            ),
            arm(
                "REST POST, one client (h2)",
                Caller::rest(&s.rest_url, &s.ca, false)?,
            ),
            fresh_conn("REST fresh conn, resumed TLS (h2)", false, Http::H2, true)?,
            fresh_conn("REST fresh conn, full TLS (h2)", false, Http::H2, false)?,
            fresh_conn("REST fresh conn, resumed (http/1.1)", false, Http::H1, true)?,
            fresh_conn(
                "REST fresh conn, full TLS (http/1.1)",
                false,
                Http::H1,
                false,
            )?,
            arm(
                "REST one reqwest client, no pool",
                Caller::Rest {
                    client: no_pool,
                    url: format!("{}/v1/greetings", s.rest_url),
                },
            ),
            arm(
                "REST naive (new client per call)",
                Caller::NaiveRest {
                    url: format!("{}/v1/greetings", s.rest_url),
                    ca: s.ca.clone(),
                },
            ),
        ]
    })
}

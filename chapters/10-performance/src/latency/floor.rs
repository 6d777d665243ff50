//! The floor: a raw TCP ping-pong of the request's size on loopback, to an
//! echo listener in this process. No arm can be faster on this machine, so
//! every other arm is also reported as a multiple of it.

use std::{net::SocketAddr, sync::Arc};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{Arm, Caller};

/// A loopback echo listener for the floor arm: reads `len` bytes, writes them back.
pub async fn echo_listener(len: usize) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0; len];
                while stream.read_exact(&mut buf).await.is_ok() {
                    if stream.write_all(&buf).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// The floor's arm: one persistent connection to a new echo listener, `len`
/// bytes each way.
pub async fn floor_arm(len: usize) -> anyhow::Result<Arm> {
    let addr = echo_listener(len).await?;
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(Arm {
        label: format!("TCP ping-pong {len} B (floor)"),
        caller: Caller::Floor {
            stream: Arc::new(tokio::sync::Mutex::new(stream)),
            len,
        },
    })
}

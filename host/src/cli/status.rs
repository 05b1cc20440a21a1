//! `host status`: what a running host is doing, read from its metrics port
//! (`GET /status`, the JSON [`Snapshot`]): a table for a person, or
//! `-o json` for scripts. In a cluster, forward the port first:
//! `kubectl -n operator-host-system port-forward deploy/operator-host 8080`.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use operator_runtime::status::Snapshot;

use super::Failure;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The host's `--metrics-addr` (HOST:PORT).
    #[arg(long, default_value = "127.0.0.1:8080", env = "HOST_METRICS_ADDR")]
    metrics_addr: String,
    /// `table` for a terminal, `json` for scripts (the `/status` document).
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Table)]
    output: Format,
    /// How long to wait for the host's answer.
    #[arg(long, default_value = "5s", value_parser = super::parse_duration)]
    timeout: Duration,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Format {
    Table,
    Json,
}

/// Why the status could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("--metrics-addr {addr}: cannot resolve it")]
    Resolve { addr: String },
    #[error("cannot reach the host at {addr} (is it running with --metrics-addr {addr}?)")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the answer of {addr}")]
    Read {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{addr} answered {status}: {body}")]
    Status { addr: String, status: String, body: String },
    #[error("{addr} answered something that is not a status document")]
    Decode {
        addr: String,
        #[source]
        source: serde_json::Error,
    },
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let snapshot = fetch(&args.metrics_addr, args.timeout).map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
    match args.output {
        Format::Table => print!("{}", snapshot.table()),
        Format::Json => println!("{}", serde_json::to_string_pretty(&snapshot).expect("a snapshot serializes")),
    }
    Ok(())
}

/// `GET /status` over plain HTTP/1.1 (the metrics port speaks nothing else).
pub fn fetch(addr: &str, timeout: Duration) -> Result<Snapshot, Error> {
    let socket = addr.to_socket_addrs().ok().and_then(|mut a| a.next()).ok_or_else(|| Error::Resolve { addr: addr.into() })?;
    let connect = |source| Error::Connect { addr: addr.into(), source };
    let mut stream = TcpStream::connect_timeout(&socket, timeout).map_err(connect)?;
    stream.set_read_timeout(Some(timeout)).map_err(connect)?;
    let request = format!("GET /status HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(connect)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|source| Error::Read { addr: addr.into(), source })?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default().split_once(' ').map_or("", |(_, status)| status).to_string();
    if !status.starts_with("200") {
        return Err(Error::Status { addr: addr.into(), status, body: body.trim().to_string() });
    }
    serde_json::from_str(body).map_err(|source| Error::Decode { addr: addr.into(), source })
}

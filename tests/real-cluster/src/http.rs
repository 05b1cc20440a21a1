//! Plain HTTP/1.1 over loopback, for etcd's JSON gateway and the host's
//! metrics port (both serve plain HTTP on 127.0.0.1; nothing else is needed).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// GET `url` (`http://HOST:PORT/PATH`); the body of a 2xx answer.
pub fn get(url: &str) -> std::io::Result<String> {
    request("GET", url, None)
}

/// POST a JSON body; the body of a 2xx answer.
pub fn post_json(url: &str, body: &str) -> std::io::Result<String> {
    request("POST", url, Some(body))
}

fn request(method: &str, url: &str, body: Option<&str>) -> std::io::Result<String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| std::io::Error::other(format!("not an http:// URL: {url}")))?;
    let (authority, path) = rest.split_once('/').map(|(a, p)| (a, format!("/{p}"))).unwrap_or((rest, "/".to_string()));
    let mut stream = TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, rest) = answer.split_once("\r\n\r\n").ok_or_else(|| std::io::Error::other("no HTTP header"))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if !status.starts_with('2') {
        return Err(std::io::Error::other(format!("{method} {url}: HTTP {status}: {rest}")));
    }
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        return Ok(dechunk(rest));
    }
    Ok(rest.to_string())
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        text = rest[n..].trim_start_matches("\r\n");
    }
    out
}

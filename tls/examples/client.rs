//! Connects to a TLS server, prints what was negotiated, then reconnects once to show
//! session resumption; on failure prints the precise error and exits non-zero.
//!
//! `cargo run -p keel-tls --example client -- HOST:PORT [--servername NAME] [--cafile PEM]
//! [--alpn PROTO] [--cert PEM --key PEM]`

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use keel_tls::{Certificate, ClientConfig, Error, Event, PrivateKey, ServerName, Session};

const TIMEOUT: Duration = Duration::from_secs(10);

struct Args {
    addr: String,
    servername: Option<String>,
    cafile: Option<String>,
    alpn: Vec<Vec<u8>>,
    cert: Option<String>,
    key: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut args = Args {
        addr: String::new(),
        servername: None,
        cafile: None,
        alpn: Vec::new(),
        cert: None,
        key: None,
    };
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--servername" => args.servername = Some(value()?),
            "--cafile" => args.cafile = Some(value()?),
            "--alpn" => args.alpn.push(value()?.into_bytes()),
            "--cert" => args.cert = Some(value()?),
            "--key" => args.key = Some(value()?),
            s if s.starts_with("--") => return Err(format!("unknown option {s}")),
            s => args.addr = s.to_string(),
        }
    }
    if args.addr.is_empty() {
        return Err("usage: client HOST:PORT [--servername NAME] [--cafile PEM] [--alpn PROTO] [--cert PEM --key PEM]".into());
    }
    Ok(args)
}

fn read_file(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))
}

/// Runs the handshake of `session` over `tcp` before `deadline`.
fn handshake(session: &mut Session, tcp: &mut TcpStream, deadline: Instant) -> Result<(), String> {
    let mut buf = vec![0u8; 16384];
    loop {
        let mut out = Vec::new();
        session.poll_transmit(&mut out);
        tcp.write_all(&out)
            .map_err(|e| format!("write failed: {e}"))?;
        while let Some(event) = session.poll_event() {
            if event == Event::HandshakeComplete {
                return Ok(());
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::HandshakeTimeout.to_string());
        }
        tcp.set_read_timeout(Some(left))
            .map_err(|e| e.to_string())?;
        let n = match tcp.read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Error::HandshakeTimeout.to_string())
            }
            Err(e) => return Err(format!("read failed: {e}")),
        };
        let result = if n == 0 {
            session.handle_eof()
        } else {
            session.feed(&buf[..n]).map(|_| ())
        };
        if let Err(e) = result {
            // Send the alert OpenSSL wrote, then report.
            let mut out = Vec::new();
            session.poll_transmit(&mut out);
            let _ = tcp.write_all(&out);
            return Err(e.to_string());
        }
    }
}

fn connect(config: &ClientConfig, args: &Args, name: &ServerName) -> Result<Session, String> {
    let addr = args
        .addr
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", args.addr))?
        .next()
        .ok_or(format!("no address for {}", args.addr))?;
    let deadline = Instant::now() + TIMEOUT;
    let mut tcp =
        TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| format!("connect failed: {e}"))?;
    let mut session = config
        .new_session(name, SystemTime::now())
        .map_err(|e| e.to_string())?;
    handshake(&mut session, &mut tcp, deadline)?;
    // Read briefly so TLS 1.3 session tickets sent after the handshake arrive.
    let _ = tcp.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 4096];
    if let Ok(n) = tcp.read(&mut buf) {
        let _ = session.feed(&buf[..n]);
    }
    let _ = session.close();
    let mut out = Vec::new();
    session.poll_transmit(&mut out);
    let _ = tcp.write_all(&out);
    Ok(session)
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let host = args.servername.clone().unwrap_or_else(|| {
        args.addr
            .rsplit_once(':')
            .map(|(h, _)| h.to_string())
            .unwrap_or_else(|| args.addr.clone())
    });
    let name = ServerName::parse(&host).map_err(|e| e.to_string())?;
    let mut builder = ClientConfig::builder().alpn_protocols(args.alpn.clone());
    builder = match &args.cafile {
        Some(path) => builder.root_certificates(
            Certificate::from_pem_chain(&read_file(path)?).map_err(|e| e.to_string())?,
        ),
        None => builder.system_roots(),
    };
    match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => {
            let chain =
                Certificate::from_pem_chain(&read_file(cert)?).map_err(|e| e.to_string())?;
            let key = PrivateKey::from_pem(&read_file(key)?).map_err(|e| e.to_string())?;
            builder = builder.client_certificate(chain, key);
        }
        (None, None) => {}
        _ => return Err("--cert and --key go together".into()),
    }
    let config = builder.build().map_err(|e| e.to_string())?;
    let session = connect(&config, &args, &name)?;
    println!("server name: {name}");
    println!(
        "version: {}",
        session
            .protocol_version()
            .map(|v| v.to_string())
            .unwrap_or_default()
    );
    println!("cipher: {}", session.cipher_suite().unwrap_or("?"));
    println!(
        "alpn: {}",
        session
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_else(|| "(none)".into())
    );
    for (depth, subject) in session.peer_certificates().iter().enumerate() {
        println!("chain[{depth}]: {subject}");
    }
    println!("resumed: {}", session.is_resumed());
    let again = connect(&config, &args, &name)?;
    println!("resumed on reconnect: {}", again.is_resumed());
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

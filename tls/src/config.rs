//! Client and server configurations: one OpenSSL `SslContext` each, built once and shared
//! by every [`Session`] made from it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use openssl::pkey::{PKey, Private};
use openssl::ssl::{
    AlpnError, Ssl, SslContext, SslContextBuilder, SslMethod, SslOptions, SslRef,
    SslSessionCacheMode, SslVerifyMode, SslVersion,
};
use openssl::x509::{X509StoreContext, X509StoreContextRef, X509VerifyResult};

use crate::error::{config, invalid};
use crate::session::{Role, Session, VerifyState};
use crate::verify::{check_policy, unix_seconds, verify_error, Certificate, Purpose, ServerName};
use crate::{Error, ProtocolVersion};

/// Most sessions a [`ClientConfig`] keeps for resumption (one per server name).
const MAX_CACHED_SESSIONS: usize = 256;

/// A private key in PEM (PKCS#8, or the traditional RSA / EC forms).
#[derive(Clone)]
pub struct PrivateKey(PKey<Private>);

impl PrivateKey {
    /// Parses a PEM private key (unencrypted).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `pem` holds no parsable key.
    pub fn from_pem(pem: &[u8]) -> Result<PrivateKey, Error> {
        PKey::private_key_from_pem(pem)
            .map(PrivateKey)
            .map_err(|e| invalid("private key", &e))
    }
}

impl core::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PrivateKey(..)")
    }
}

/// Encodes ALPN protocol IDs as the wire's `ProtocolNameList` (RFC 7301 §3.1): each
/// name prefixed by its one-byte length.
fn alpn_wire(protocols: &[Vec<u8>]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    for p in protocols {
        let len = u8::try_from(p.len())
            .ok()
            .filter(|l| *l > 0)
            .ok_or_else(|| Error::Config {
                detail: "alpn protocol id must be 1 to 255 bytes".into(),
            })?;
        out.push(len);
        out.extend_from_slice(p);
    }
    Ok(out)
}

fn min_version(builder: &mut SslContextBuilder, min: ProtocolVersion) -> Result<(), Error> {
    let v = match min {
        ProtocolVersion::Tls12 => SslVersion::TLS1_2,
        ProtocolVersion::Tls13 => SslVersion::TLS1_3,
    };
    builder
        .set_min_proto_version(Some(v))
        .map_err(|e| config(&e))?;
    builder.set_options(SslOptions::NO_RENEGOTIATION | SslOptions::NO_COMPRESSION);
    Ok(())
}

fn set_identity(
    builder: &mut SslContextBuilder,
    chain: &[Certificate],
    key: &PrivateKey,
) -> Result<(), Error> {
    let (leaf, rest) = chain.split_first().ok_or_else(|| Error::Config {
        detail: "empty certificate chain".into(),
    })?;
    builder.set_certificate(&leaf.0).map_err(|e| config(&e))?;
    for cert in rest {
        builder
            .add_extra_chain_cert(cert.0.clone())
            .map_err(|e| config(&e))?;
    }
    builder.set_private_key(&key.0).map_err(|e| config(&e))?;
    builder.check_private_key().map_err(|_| Error::Config {
        detail: "private key does not match the certificate".into(),
    })
}

/// The verify callback shared by clients and servers: records OpenSSL's first failure
/// as a keel error, and runs keel's policy on the finished chain at depth 0.
fn install_verify(
    builder: &mut SslContextBuilder,
    mode: SslVerifyMode,
    index: openssl::ex_data::Index<Ssl, Arc<VerifyState>>,
) {
    builder.set_verify_callback(mode, move |ok, ctx: &mut X509StoreContextRef| {
        let state = X509StoreContext::ssl_idx()
            .ok()
            .and_then(|i| ctx.ex_data(i))
            .and_then(|ssl| ssl.ex_data(index))
            .cloned();
        // Fail closed: a session always carries its verify state.
        let Some(state) = state else { return false };
        if !ok {
            state.record(verify_error(
                ctx.error(),
                ctx.error_depth(),
                state.name.as_ref(),
            ));
            return false;
        }
        if ctx.error_depth() == 0 {
            if let Some(chain) = ctx.chain() {
                if let Err(e) = check_policy(chain, state.purpose) {
                    state.record(e);
                    ctx.set_error(X509VerifyResult::APPLICATION_VERIFICATION);
                    return false;
                }
            }
        }
        true
    });
}

/// Where a client finds its trust anchors.
#[derive(Clone, Debug, Default)]
enum Roots {
    #[default]
    None,
    System,
    Given(Vec<Certificate>),
}

/// Builds a [`ClientConfig`]; start with [`ClientConfig::builder`].
#[derive(Clone, Debug)]
pub struct ClientConfigBuilder {
    roots: Roots,
    alpn: Vec<Vec<u8>>,
    identity: Option<(Vec<Certificate>, PrivateKey)>,
    resumption: bool,
    min_version: ProtocolVersion,
}

impl ClientConfigBuilder {
    /// Trusts exactly `roots` (RFC 5280 §6.1.1 (d) trust anchors).
    pub fn root_certificates(mut self, roots: Vec<Certificate>) -> Self {
        self.roots = Roots::Given(roots);
        self
    }

    /// Trusts the system store, located the way `openssl-probe` finds it (the
    /// `SSL_CERT_FILE`/`SSL_CERT_DIR` variables, then the distribution's usual bundle
    /// paths). This is the one place keel-tls reads the environment and the file system,
    /// once, in [`ClientConfigBuilder::build`].
    pub fn system_roots(mut self) -> Self {
        self.roots = Roots::System;
        self
    }

    /// Offers these ALPN protocol IDs (RFC 7301 §3.1), most preferred first, e.g.
    /// `[b"h2".to_vec(), b"http/1.1".to_vec()]`.
    pub fn alpn_protocols(mut self, protocols: Vec<Vec<u8>>) -> Self {
        self.alpn = protocols;
        self
    }

    /// Presents this chain (leaf first) and key when the server asks for a client
    /// certificate (RFC 8446 §4.4.2).
    pub fn client_certificate(mut self, chain: Vec<Certificate>, key: PrivateKey) -> Self {
        self.identity = Some((chain, key));
        self
    }

    /// Keeps sessions (TLS 1.3 tickets, TLS 1.2 tickets) per server name and offers
    /// them on the next connection to that name (RFC 8446 §2.2, RFC 5077). On by default.
    pub fn resumption(mut self, on: bool) -> Self {
        self.resumption = on;
        self
    }

    /// The lowest protocol version accepted; TLS 1.2 by default (never lower).
    pub fn min_protocol_version(mut self, version: ProtocolVersion) -> Self {
        self.min_version = version;
        self
    }

    /// Builds the OpenSSL context.
    ///
    /// # Errors
    /// [`Error::Config`] when no trust anchor is configured or found, an ALPN ID is empty
    /// or longer than 255 bytes, or the client key does not match its certificate.
    pub fn build(self) -> Result<ClientConfig, Error> {
        let mut builder =
            SslContextBuilder::new(SslMethod::tls_client()).map_err(|e| config(&e))?;
        min_version(&mut builder, self.min_version)?;
        match &self.roots {
            Roots::None => {
                return Err(Error::Config {
                    detail: "no trust anchors: call root_certificates or system_roots".into(),
                })
            }
            Roots::Given(roots) => {
                for root in roots {
                    let _ = builder.cert_store_mut().add_cert(root.0.clone());
                }
            }
            Roots::System => {
                let probe = openssl_probe::probe();
                if probe.cert_file.is_none() && probe.cert_dir.is_none() {
                    return Err(Error::Config {
                        detail: "no system certificate store found".into(),
                    });
                }
                builder
                    .load_verify_locations(probe.cert_file.as_deref(), probe.cert_dir.as_deref())
                    .map_err(|e| config(&e))?;
            }
        }
        if !self.alpn.is_empty() {
            builder
                .set_alpn_protos(&alpn_wire(&self.alpn)?)
                .map_err(|e| config(&e))?;
        }
        if let Some((chain, key)) = &self.identity {
            set_identity(&mut builder, chain, key)?;
        }
        let index = Ssl::new_ex_index::<Arc<VerifyState>>().map_err(|e| config(&e))?;
        install_verify(&mut builder, SslVerifyMode::PEER, index);
        let cache: Arc<Mutex<HashMap<String, openssl::ssl::SslSession>>> = Arc::default();
        if self.resumption {
            builder.set_session_cache_mode(SslSessionCacheMode::CLIENT);
            let sink = Arc::clone(&cache);
            builder.set_new_session_callback(move |ssl: &mut SslRef, session| {
                let Some(name) = ssl.ex_data(index).and_then(|s| s.name.clone()) else {
                    return;
                };
                if let Ok(mut cache) = sink.lock() {
                    if cache.len() >= MAX_CACHED_SESSIONS && !cache.contains_key(&name.to_string())
                    {
                        cache.clear();
                    }
                    cache.insert(name.to_string(), session);
                }
            });
        } else {
            builder.set_session_cache_mode(SslSessionCacheMode::OFF);
            builder.set_options(SslOptions::NO_TICKET);
        }
        Ok(ClientConfig {
            ctx: builder.build(),
            index,
            cache,
        })
    }
}

/// A TLS client configuration (trust anchors, ALPN, client certificate, resumption
/// cache). Cheap to share behind an `Arc`; make one [`Session`] per connection with
/// [`ClientConfig::new_session`].
pub struct ClientConfig {
    ctx: SslContext,
    index: openssl::ex_data::Index<Ssl, Arc<VerifyState>>,
    cache: Arc<Mutex<HashMap<String, openssl::ssl::SslSession>>>,
}

impl core::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ClientConfig").finish_non_exhaustive()
    }
}

impl ClientConfig {
    /// A builder with no trust anchors, no ALPN, resumption on, TLS 1.2 minimum.
    pub fn builder() -> ClientConfigBuilder {
        ClientConfigBuilder {
            roots: Roots::None,
            alpn: Vec::new(),
            identity: None,
            resumption: true,
            min_version: ProtocolVersion::Tls12,
        }
    }

    /// Starts a client session for `server_name`, verified at `now` (the wall-clock time
    /// the caller read; keel reads no clock). A DNS name is sent as SNI (RFC 6066 §3) and
    /// must match a dNSName subjectAltName; an IP address must match an iPAddress SAN.
    /// A cached session for the same name is offered for resumption.
    ///
    /// The ClientHello is ready in [`Session::poll_transmit`] at once.
    ///
    /// # Errors
    /// [`Error::TimeOutOfRange`] for a time before 1970; [`Error::Config`] if OpenSSL
    /// refuses the parameters.
    pub fn new_session(&self, server_name: &ServerName, now: SystemTime) -> Result<Session, Error> {
        let mut ssl = Ssl::new(&self.ctx).map_err(|e| config(&e))?;
        if let ServerName::DnsName(host) = server_name {
            ssl.set_hostname(host).map_err(|e| config(&e))?;
        }
        crate::verify::configure_param(
            ssl.param_mut(),
            Purpose::ServerAuth,
            Some(server_name),
            unix_seconds(now)?,
            None,
        )?;
        let cached = self
            .cache
            .lock()
            .ok()
            .and_then(|c| c.get(&server_name.to_string()).cloned());
        if let Some(session) = cached {
            // A stale or refused session only costs a full handshake.
            let _ = crate::ossl::offer_session(&mut ssl, &session);
        }
        let state = Arc::new(VerifyState::new(
            Purpose::ServerAuth,
            Some(server_name.clone()),
        ));
        ssl.set_ex_data(self.index, Arc::clone(&state));
        ssl.set_connect_state();
        Session::new(ssl, Role::Client, state)
    }
}

/// Whether and how a server asks for client certificates (RFC 8446 §4.3.2).
#[derive(Clone, Debug)]
pub enum ClientAuth {
    /// Do not ask (the default).
    None,
    /// Ask; accept a client without a certificate, verify one that is sent.
    Optional(Vec<Certificate>),
    /// Ask and refuse a client without a valid certificate chaining to these roots.
    Required(Vec<Certificate>),
}

/// Builds a [`ServerConfig`]; start with [`ServerConfig::builder`].
#[derive(Clone, Debug)]
pub struct ServerConfigBuilder {
    chain: Vec<Certificate>,
    key: PrivateKey,
    sni: Vec<(String, Vec<Certificate>, PrivateKey)>,
    alpn: Vec<Vec<u8>>,
    client_auth: ClientAuth,
    tickets: bool,
    min_version: ProtocolVersion,
}

impl ServerConfigBuilder {
    /// Serves this chain and key instead of the default one when the client's SNI
    /// (RFC 6066 §3) equals `server_name` (ASCII case-insensitive).
    pub fn sni_certificate(
        mut self,
        server_name: &str,
        chain: Vec<Certificate>,
        key: PrivateKey,
    ) -> Self {
        self.sni
            .push((server_name.to_ascii_lowercase(), chain, key));
        self
    }

    /// The ALPN protocol IDs the server speaks, most preferred first; the server picks
    /// its most preferred one the client offers, and refuses a client whose list shares
    /// none with `no_application_protocol` (RFC 7301 §3.2).
    pub fn alpn_protocols(mut self, protocols: Vec<Vec<u8>>) -> Self {
        self.alpn = protocols;
        self
    }

    /// Client certificate policy (mutual TLS).
    pub fn client_auth(mut self, auth: ClientAuth) -> Self {
        self.client_auth = auth;
        self
    }

    /// Issues session tickets for resumption (RFC 8446 §4.6.1, RFC 5077). On by default;
    /// ticket keys are random per configuration.
    pub fn session_tickets(mut self, on: bool) -> Self {
        self.tickets = on;
        self
    }

    /// The lowest protocol version accepted; TLS 1.2 by default (never lower).
    pub fn min_protocol_version(mut self, version: ProtocolVersion) -> Self {
        self.min_version = version;
        self
    }

    fn context(
        &self,
        chain: &[Certificate],
        key: &PrivateKey,
        index: openssl::ex_data::Index<Ssl, Arc<VerifyState>>,
    ) -> Result<SslContextBuilder, Error> {
        let mut builder =
            SslContextBuilder::new(SslMethod::tls_server()).map_err(|e| config(&e))?;
        min_version(&mut builder, self.min_version)?;
        set_identity(&mut builder, chain, key)?;
        builder
            .set_session_id_context(b"keel-tls")
            .map_err(|e| config(&e))?;
        if !self.tickets {
            builder.set_options(SslOptions::NO_TICKET);
        }
        if !self.alpn.is_empty() {
            let ours = self.alpn.clone();
            builder.set_alpn_select_callback(move |_, client| {
                select_alpn(&ours, client).ok_or(AlpnError::ALERT_FATAL)
            });
        }
        let (mode, roots) = match &self.client_auth {
            ClientAuth::None => (SslVerifyMode::NONE, &[][..]),
            ClientAuth::Optional(r) => (SslVerifyMode::PEER, &r[..]),
            ClientAuth::Required(r) => (
                SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT,
                &r[..],
            ),
        };
        for root in roots {
            let _ = builder.cert_store_mut().add_cert(root.0.clone());
            builder.add_client_ca(&root.0).map_err(|e| config(&e))?;
        }
        install_verify(&mut builder, mode, index);
        Ok(builder)
    }

    /// Builds the OpenSSL contexts (one per certificate).
    ///
    /// # Errors
    /// [`Error::Config`] when a key does not match its certificate, a chain is empty, an
    /// ALPN ID is empty or too long, or client authentication has no roots.
    pub fn build(self) -> Result<ServerConfig, Error> {
        if let ClientAuth::Optional(r) | ClientAuth::Required(r) = &self.client_auth {
            if r.is_empty() {
                return Err(Error::Config {
                    detail: "client authentication needs at least one root".into(),
                });
            }
        }
        alpn_wire(&self.alpn)?;
        let index = Ssl::new_ex_index::<Arc<VerifyState>>().map_err(|e| config(&e))?;
        let mut by_name: HashMap<String, SslContext> = HashMap::new();
        for (name, chain, key) in &self.sni {
            by_name.insert(name.clone(), self.context(chain, key, index)?.build());
        }
        let mut main = self.context(&self.chain, &self.key, index)?;
        if !by_name.is_empty() {
            main.set_servername_callback(move |ssl, _alert| {
                let name = ssl
                    .servername(openssl::ssl::NameType::HOST_NAME)
                    .map(str::to_ascii_lowercase);
                if let Some(ctx) = name.and_then(|n| by_name.get(&n)) {
                    ssl.set_ssl_context(ctx)
                        .map_err(|_| openssl::ssl::SniError::ALERT_FATAL)?;
                }
                Ok(())
            });
        }
        Ok(ServerConfig {
            ctx: main.build(),
            index,
            verifies_clients: !matches!(self.client_auth, ClientAuth::None),
        })
    }
}

/// The server's most preferred protocol that the client's `ProtocolNameList` contains;
/// a slice of the client's list (RFC 7301 §3.2).
fn select_alpn<'a>(ours: &[Vec<u8>], client: &'a [u8]) -> Option<&'a [u8]> {
    let mut offered = Vec::new();
    let mut rest = client;
    while let Some((&len, tail)) = rest.split_first() {
        let (name, after) = tail.split_at_checked(usize::from(len))?;
        offered.push(name);
        rest = after;
    }
    ours.iter()
        .find_map(|p| offered.iter().find(|o| **o == p.as_slice()).copied())
}

/// A TLS server configuration (certificates, SNI choices, ALPN, tickets, client
/// authentication). Make one [`Session`] per accepted connection with
/// [`ServerConfig::new_session`].
pub struct ServerConfig {
    ctx: SslContext,
    index: openssl::ex_data::Index<Ssl, Arc<VerifyState>>,
    verifies_clients: bool,
}

impl core::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ServerConfig").finish_non_exhaustive()
    }
}

impl ServerConfig {
    /// A builder serving `chain` (leaf first, then intermediates) with `key`; no ALPN,
    /// no client authentication, tickets on, TLS 1.2 minimum.
    pub fn builder(chain: Vec<Certificate>, key: PrivateKey) -> ServerConfigBuilder {
        ServerConfigBuilder {
            chain,
            key,
            sni: Vec::new(),
            alpn: Vec::new(),
            client_auth: ClientAuth::None,
            tickets: true,
            min_version: ProtocolVersion::Tls12,
        }
    }

    /// Starts a server session; client certificates, if asked for, are verified at `now`.
    ///
    /// # Errors
    /// [`Error::TimeOutOfRange`] for a time before 1970; [`Error::Config`] if OpenSSL
    /// refuses the parameters.
    pub fn new_session(&self, now: SystemTime) -> Result<Session, Error> {
        let mut ssl = Ssl::new(&self.ctx).map_err(|e| config(&e))?;
        if self.verifies_clients {
            crate::verify::configure_param(
                ssl.param_mut(),
                Purpose::ClientAuth,
                None,
                unix_seconds(now)?,
                None,
            )?;
        }
        let state = Arc::new(VerifyState::new(Purpose::ClientAuth, None));
        ssl.set_ex_data(self.index, Arc::clone(&state));
        ssl.set_accept_state();
        Session::new(ssl, Role::Server, state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_wire_format() {
        assert_eq!(
            alpn_wire(&[b"h2".to_vec(), b"http/1.1".to_vec()]).unwrap(),
            b"\x02h2\x08http/1.1"
        );
        assert!(alpn_wire(&[Vec::new()]).is_err());
        assert!(alpn_wire(&[vec![b'a'; 256]]).is_err());
    }

    #[test]
    fn alpn_selection_prefers_server_order() {
        let ours = [b"h2".to_vec(), b"http/1.1".to_vec()];
        assert_eq!(select_alpn(&ours, b"\x08http/1.1\x02h2"), Some(&b"h2"[..]));
        assert_eq!(select_alpn(&ours, b"\x08http/1.1"), Some(&b"http/1.1"[..]));
        assert_eq!(select_alpn(&ours, b"\x03foo"), None);
        assert_eq!(select_alpn(&ours, b"\x09h2"), None);
    }
}

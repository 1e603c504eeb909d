//! The client side of SCRAM-SHA-256 (RFC 5802 §3, §5, §7; RFC 7677) as PostgreSQL
//! runs it inside its SASL exchange (PostgreSQL documentation §55.3 "SASL
//! Authentication"), without channel binding (GS2 header `n,,`).
//!
//! Not implemented: SASLprep of the password (RFC 4013; PostgreSQL applies it when the
//! password is valid UTF-8). An ASCII password without control characters is its own
//! SASLprep result, so it works; a password SASLprep would change fails to
//! authenticate.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::sign::Signer;

use super::Error;

/// The SASL mechanism name (RFC 7677 §2).
pub const MECHANISM: &str = "SCRAM-SHA-256";

/// The GS2 header without channel binding, and its base64 as `c=` carries it.
const GS2_HEADER: &str = "n,,";
const GS2_HEADER_BASE64: &str = "biws";

#[derive(Debug)]
enum State {
    /// The client-first-message was made; waiting for the server-first-message.
    SentClientFirst {
        client_first_bare: String,
        nonce: String,
        password: Vec<u8>,
    },
    /// The client-final-message was made; waiting for the server-final-message.
    SentClientFinal { server_signature: [u8; 32] },
    /// The server proved it knows the password.
    Done,
}

/// One SCRAM-SHA-256 exchange, client side: [`ScramSha256::new`] makes the
/// client-first-message, [`ScramSha256::update`] answers the server-first-message with
/// the client-final-message, [`ScramSha256::finish`] checks the server-final-message.
#[derive(Debug)]
pub struct ScramSha256 {
    client_first: String,
    state: State,
    max_iterations: u32,
}

/// The crypto failed inside OpenSSL (allocation, an unavailable digest).
fn crypto(_: openssl::error::ErrorStack) -> Error {
    Error::Scram {
        reason: "openssl failed",
    }
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> Result<[u8; 32], Error> {
    let key = PKey::hmac(key).map_err(crypto)?;
    let mut signer = Signer::new(MessageDigest::sha256(), &key).map_err(crypto)?;
    for part in parts {
        signer.update(part).map_err(crypto)?;
    }
    let mut out = [0; 32];
    signer.sign(&mut out).map_err(crypto)?;
    Ok(out)
}

fn scram_error(reason: &'static str) -> Error {
    Error::Scram { reason }
}

impl ScramSha256 {
    /// Starts an exchange for `user` (PostgreSQL ignores it and uses the startup
    /// `user`; its drivers send an empty name) with `password` and the client `nonce`:
    /// printable ASCII without `,` (RFC 5802 §5.1), at least 18 random bytes' worth
    /// (the driver sends 24 bytes from the kernel's random source, base64-encoded).
    /// A server-first-message asking for more than `max_iterations` PBKDF2 iterations
    /// is refused.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when `nonce` is empty or not printable ASCII without `,`.
    pub fn new(
        user: &str,
        password: &[u8],
        nonce: &str,
        max_iterations: u32,
    ) -> Result<Self, Error> {
        if nonce.is_empty()
            || !nonce
                .bytes()
                .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
        {
            return Err(Error::InvalidInput {
                what: "scram nonce must be printable ascii without ','",
            });
        }
        // saslname (RFC 5802 §5.1): `=` and `,` escaped.
        let user = user.replace('=', "=3D").replace(',', "=2C");
        let client_first_bare = format!("n={user},r={nonce}");
        Ok(ScramSha256 {
            client_first: format!("{GS2_HEADER}{client_first_bare}"),
            state: State::SentClientFirst {
                client_first_bare,
                nonce: nonce.to_owned(),
                password: password.to_vec(),
            },
            max_iterations,
        })
    }

    /// The client-first-message (RFC 5802 §7), for the `SASLInitialResponse`.
    #[must_use]
    pub fn client_first_message(&self) -> &[u8] {
        self.client_first.as_bytes()
    }

    /// Takes the server-first-message (`AuthenticationSASLContinue`) and returns the
    /// client-final-message with the proof, for the `SASLResponse`.
    ///
    /// # Errors
    ///
    /// [`Error::Scram`] when the message is malformed, carries a mandatory extension,
    /// its nonce does not extend the client's, its salt is not base64, its iteration
    /// count is 0 or above the cap, or this is not the step the exchange is at.
    pub fn update(&mut self, server_first: &[u8]) -> Result<Vec<u8>, Error> {
        let State::SentClientFirst {
            client_first_bare,
            nonce,
            password,
        } = &self.state
        else {
            return Err(scram_error("server-first-message out of order"));
        };
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| scram_error("server-first-message is not utf-8"))?;
        let mut parts = server_first.split(',');
        let (Some(r), Some(s), Some(i), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(scram_error("server-first-message is not r=,s=,i="));
        };
        if r.starts_with("m=") {
            return Err(scram_error(
                "server-first-message has a mandatory extension",
            ));
        }
        let (Some(server_nonce), Some(salt), Some(iterations)) = (
            r.strip_prefix("r="),
            s.strip_prefix("s="),
            i.strip_prefix("i="),
        ) else {
            return Err(scram_error("server-first-message is not r=,s=,i="));
        };
        if server_nonce.len() <= nonce.len()
            || !server_nonce.starts_with(nonce.as_str())
            || !server_nonce.bytes().all(|b| (0x21..=0x7e).contains(&b))
        {
            return Err(scram_error("server nonce does not extend the client nonce"));
        }
        let salt = BASE64
            .decode(salt)
            .map_err(|_| scram_error("salt is not base64"))?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| scram_error("iteration count is not a number"))?;
        if iterations == 0 {
            return Err(scram_error("iteration count is zero"));
        }
        if iterations > self.max_iterations {
            return Err(Error::ScramIterations {
                iterations,
                limit: self.max_iterations,
            });
        }

        // RFC 5802 §3.
        let mut salted = [0u8; 32];
        openssl::pkcs5::pbkdf2_hmac(
            password,
            &salt,
            iterations as usize,
            MessageDigest::sha256(),
            &mut salted,
        )
        .map_err(crypto)?;
        let client_key = hmac(&salted, &[b"Client Key"])?;
        let stored_key =
            openssl::hash::hash(MessageDigest::sha256(), &client_key).map_err(crypto)?;
        let without_proof = format!("c={GS2_HEADER_BASE64},r={server_nonce}");
        let auth_message: [&[u8]; 5] = [
            client_first_bare.as_bytes(),
            b",",
            server_first.as_bytes(),
            b",",
            without_proof.as_bytes(),
        ];
        let client_signature = hmac(&stored_key, &auth_message)?;
        let mut proof = client_key;
        for (p, s) in proof.iter_mut().zip(client_signature) {
            *p ^= s;
        }
        let server_key = hmac(&salted, &[b"Server Key"])?;
        let server_signature = hmac(&server_key, &auth_message)?;

        let client_final = format!("{without_proof},p={}", BASE64.encode(proof));
        self.state = State::SentClientFinal { server_signature };
        Ok(client_final.into_bytes())
    }

    /// Takes the server-final-message (`AuthenticationSASLFinal`) and checks the server
    /// signature (RFC 5802 §3: the server proves it knows the password).
    ///
    /// # Errors
    ///
    /// [`Error::Scram`] when the server reports an error (`e=`), the message is
    /// malformed, the signature does not match, or this is not the step the exchange
    /// is at.
    pub fn finish(&mut self, server_final: &[u8]) -> Result<(), Error> {
        let State::SentClientFinal { server_signature } = &self.state else {
            return Err(scram_error("server-final-message out of order"));
        };
        if server_final.starts_with(b"e=") {
            return Err(scram_error("server-final-message reports an error"));
        }
        let verifier = server_final
            .strip_prefix(b"v=")
            .ok_or_else(|| scram_error("server-final-message has no verifier"))?;
        // Extensions may follow the verifier (RFC 5802 §7).
        let verifier = verifier.split(|&b| b == b',').next().unwrap_or_default();
        let verifier = BASE64
            .decode(verifier)
            .map_err(|_| scram_error("server signature is not base64"))?;
        if verifier.len() != server_signature.len()
            || !openssl::memcmp::eq(&verifier, server_signature)
        {
            return Err(scram_error("server signature does not match"));
        }
        self.state = State::Done;
        Ok(())
    }

    /// Whether the server's signature was verified.
    #[must_use]
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7677 §3.
    const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &[u8] =
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &[u8] = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &[u8] = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc7677() -> ScramSha256 {
        ScramSha256::new("user", b"pencil", NONCE, 10_000).unwrap()
    }

    #[test]
    fn rfc7677_example() {
        let mut scram = rfc7677();
        assert_eq!(
            scram.client_first_message(),
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
        );
        assert_eq!(scram.update(SERVER_FIRST).unwrap(), CLIENT_FINAL);
        assert!(!scram.is_done());
        scram.finish(SERVER_FINAL).unwrap();
        assert!(scram.is_done());
    }

    #[test]
    fn wrong_server_signature_is_refused() {
        let mut scram = rfc7677();
        scram.update(SERVER_FIRST).unwrap();
        assert_eq!(
            scram.finish(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Err(Error::Scram {
                reason: "server signature does not match"
            })
        );
        assert!(!scram.is_done());
        let mut scram = rfc7677();
        scram.update(SERVER_FIRST).unwrap();
        assert!(scram.finish(b"e=invalid-proof").is_err());
        let mut scram = rfc7677();
        // Final before first.
        assert!(scram.finish(SERVER_FINAL).is_err());
    }

    #[test]
    fn bad_server_first_messages() {
        for bad in [
            &b"r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"[..],
            b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            b"r=rOprNGfwEbeRWgbNEkqOx,s=!!,i=4096",
            b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0",
            b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=-1",
            b"m=ext,r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1",
            b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==",
            b"",
        ] {
            assert!(
                rfc7677().update(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            ScramSha256::new("", b"pencil", NONCE, 4095)
                .unwrap()
                .update(SERVER_FIRST),
            Err(Error::ScramIterations {
                iterations: 4096,
                limit: 4095
            })
        );
    }

    #[test]
    fn user_names_are_escaped_and_nonces_checked() {
        let scram = ScramSha256::new("a=b,c", b"", "n", 1).unwrap();
        assert_eq!(scram.client_first_message(), b"n,,n=a=3Db=2Cc,r=n");
        assert!(ScramSha256::new("", b"", "a,b", 1).is_err());
        assert!(ScramSha256::new("", b"", "", 1).is_err());
    }
}

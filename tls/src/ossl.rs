//! The only `unsafe` in keel-tls: OpenSSL calls the safe `openssl` crate marks unsafe.
#![allow(unsafe_code)]

use openssl::error::ErrorStack;
use openssl::ssl::{SslRef, SslSessionRef};

/// Offers `session` for resumption on `ssl` (`SSL_set_session`, RFC 8446 §2.2).
///
/// Callers pass only sessions captured by the new-session callback of the same
/// `SslContext` that created `ssl` (each `ClientConfig` owns both its context and its
/// session cache).
pub(crate) fn offer_session(ssl: &mut SslRef, session: &SslSessionRef) -> Result<(), ErrorStack> {
    // SAFETY: `SSL_set_session` requires the session to come from the same SSL_CTX as
    // `ssl`; the only caller takes it from the cache of the ClientConfig whose context
    // created `ssl`, filled by that context's new-session callback.
    unsafe { ssl.set_session(session) }
}

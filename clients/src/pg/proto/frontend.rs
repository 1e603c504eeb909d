//! Frontend (client-to-server) messages of the PostgreSQL Frontend/Backend Protocol
//! version 3.0, appended to the caller's buffer (PostgreSQL documentation §55.7
//! "Message Formats").
//!
//! Each function appends one whole message to `out` or, when an argument cannot be
//! sent (a string holding a NUL byte, a message longer than the protocol's 32-bit
//! length), appends nothing and returns [`Error::InvalidInput`].

use super::Error;

/// The protocol version number a `StartupMessage` carries: 3.0 (§55.7).
pub const PROTOCOL_VERSION: i32 = 196_608;
/// The request code of a `CancelRequest` (§55.7).
pub const CANCEL_REQUEST_CODE: i32 = 80_877_102;
/// The request code of an `SSLRequest` (§55.7).
pub const SSL_REQUEST_CODE: i32 = 80_877_103;

/// Writes a message: `kind` (0 for the untyped startup packets), a length placeholder,
/// the body from `body`, then the length. On error, `out` is truncated back.
fn message(
    out: &mut Vec<u8>,
    kind: Option<u8>,
    body: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
) -> Result<(), Error> {
    let start = out.len();
    if let Some(kind) = kind {
        out.push(kind);
    }
    let len_at = out.len();
    out.extend_from_slice(&[0; 4]);
    if let Err(e) = body(out) {
        out.truncate(start);
        return Err(e);
    }
    let Ok(len) = i32::try_from(out.len() - len_at) else {
        out.truncate(start);
        return Err(Error::InvalidInput {
            what: "message longer than 2^31 - 1 bytes",
        });
    };
    out[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Appends `s` and a NUL; refuses a NUL inside `s`.
fn cstr(out: &mut Vec<u8>, s: &[u8], what: &'static str) -> Result<(), Error> {
    if memchr::memchr(0, s).is_some() {
        return Err(Error::InvalidInput { what });
    }
    out.extend_from_slice(s);
    out.push(0);
    Ok(())
}

/// Appends a `StartupMessage` (§55.7): protocol 3.0 and the run-time parameters
/// `params` as (name, value) pairs, e.g. `("user", "alice")`, `("database", "db")`,
/// `("application_name", "app")`, `("client_encoding", "UTF8")`.
///
/// # Errors
///
/// [`Error::InvalidInput`] when a name or value holds a NUL byte or a name is empty.
pub fn startup_message(out: &mut Vec<u8>, params: &[(&str, &str)]) -> Result<(), Error> {
    message(out, None, |out| {
        out.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        for (name, value) in params {
            if name.is_empty() {
                return Err(Error::InvalidInput {
                    what: "empty startup parameter name",
                });
            }
            cstr(out, name.as_bytes(), "startup parameter name holds a nul")?;
            cstr(out, value.as_bytes(), "startup parameter value holds a nul")?;
        }
        out.push(0);
        Ok(())
    })
}

/// Appends a `PasswordMessage` (`p`, §55.7) carrying `password` (cleartext, or an MD5
/// hash already computed) and its NUL.
///
/// # Errors
///
/// [`Error::InvalidInput`] when `password` holds a NUL byte.
pub fn password_message(out: &mut Vec<u8>, password: &[u8]) -> Result<(), Error> {
    message(out, Some(b'p'), |out| {
        cstr(out, password, "password holds a nul")
    })
}

/// Appends a `SASLInitialResponse` (`p`, §55.7): the chosen `mechanism` and the
/// mechanism's initial response `data` (the SCRAM client-first-message).
///
/// # Errors
///
/// [`Error::InvalidInput`] when `mechanism` holds a NUL byte or `data` is too long.
pub fn sasl_initial_response(out: &mut Vec<u8>, mechanism: &str, data: &[u8]) -> Result<(), Error> {
    message(out, Some(b'p'), |out| {
        cstr(out, mechanism.as_bytes(), "sasl mechanism holds a nul")?;
        let len = i32::try_from(data.len()).map_err(|_| Error::InvalidInput {
            what: "sasl initial response too long",
        })?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(data);
        Ok(())
    })
}

/// Appends a `SASLResponse` (`p`, §55.7) carrying `data` (the SCRAM
/// client-final-message).
///
/// # Errors
///
/// [`Error::InvalidInput`] when the message would be too long.
pub fn sasl_response(out: &mut Vec<u8>, data: &[u8]) -> Result<(), Error> {
    message(out, Some(b'p'), |out| {
        out.extend_from_slice(data);
        Ok(())
    })
}

/// Appends a `Query` (`Q`, §55.7) carrying `sql`, which may hold several statements
/// separated by semicolons (§55.2.2 "Simple Query").
///
/// # Errors
///
/// [`Error::InvalidInput`] when `sql` holds a NUL byte.
pub fn query(out: &mut Vec<u8>, sql: &str) -> Result<(), Error> {
    message(out, Some(b'Q'), |out| {
        cstr(out, sql.as_bytes(), "query holds a nul")
    })
}

/// Appends a `Parse` (`P`, §55.7; §55.2.3 "Extended Query"): prepares `sql` (one
/// statement, `$1`, `$2`, ... for parameters) as the statement `name` (`""` for the
/// unnamed one), with the parameter type OIDs `param_types` (0 or fewer than the
/// parameters: the server infers the rest).
///
/// # Errors
///
/// [`Error::InvalidInput`] when `name` or `sql` holds a NUL or there are more than
/// 32,767 types.
pub fn parse(out: &mut Vec<u8>, name: &str, sql: &str, param_types: &[u32]) -> Result<(), Error> {
    message(out, Some(b'P'), |out| {
        cstr(out, name.as_bytes(), "statement name holds a nul")?;
        cstr(out, sql.as_bytes(), "query holds a nul")?;
        out.extend_from_slice(&count(
            param_types.len(),
            "more than 32767 parameter types",
        )?);
        for oid in param_types {
            out.extend_from_slice(&oid.to_be_bytes());
        }
        Ok(())
    })
}

fn count(n: usize, what: &'static str) -> Result<[u8; 2], Error> {
    i16::try_from(n)
        .map(i16::to_be_bytes)
        .map_err(|_| Error::InvalidInput { what })
}

/// Appends a `Bind` (`B`, §55.7): binds `params` (`None` for SQL NULL) to the prepared
/// statement `statement`, creating the portal `portal` (`""` for the unnamed one).
/// `param_formats` and `result_formats` are format codes (0 text, 1 binary): none means
/// all text, one applies to all, otherwise one per parameter or column.
///
/// # Errors
///
/// [`Error::InvalidInput`] when a name holds a NUL, a list has more than 32,767 entries
/// or a value is longer than 2^31 - 1 bytes.
pub fn bind(
    out: &mut Vec<u8>,
    portal: &str,
    statement: &str,
    param_formats: &[i16],
    params: &[Option<&[u8]>],
    result_formats: &[i16],
) -> Result<(), Error> {
    message(out, Some(b'B'), |out| {
        cstr(out, portal.as_bytes(), "portal name holds a nul")?;
        cstr(out, statement.as_bytes(), "statement name holds a nul")?;
        out.extend_from_slice(&count(param_formats.len(), "more than 32767 formats")?);
        for f in param_formats {
            out.extend_from_slice(&f.to_be_bytes());
        }
        out.extend_from_slice(&count(params.len(), "more than 32767 parameters")?);
        for param in params {
            match param {
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(value) => {
                    let len = i32::try_from(value.len()).map_err(|_| Error::InvalidInput {
                        what: "parameter longer than 2^31 - 1 bytes",
                    })?;
                    out.extend_from_slice(&len.to_be_bytes());
                    out.extend_from_slice(value);
                }
            }
        }
        out.extend_from_slice(&count(result_formats.len(), "more than 32767 formats")?);
        for f in result_formats {
            out.extend_from_slice(&f.to_be_bytes());
        }
        Ok(())
    })
}

/// What a `Describe` or `Close` names (§55.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A prepared statement (`S`).
    Statement,
    /// A portal (`P`).
    Portal,
}

impl Target {
    fn byte(self) -> u8 {
        match self {
            Target::Statement => b'S',
            Target::Portal => b'P',
        }
    }
}

/// Appends a `Describe` (`D`, §55.7) of the statement or portal `name`: the server
/// answers `ParameterDescription` (statements only) and `RowDescription` or `NoData`.
///
/// # Errors
///
/// [`Error::InvalidInput`] when `name` holds a NUL.
pub fn describe(out: &mut Vec<u8>, target: Target, name: &str) -> Result<(), Error> {
    message(out, Some(b'D'), |out| {
        out.push(target.byte());
        cstr(out, name.as_bytes(), "name holds a nul")
    })
}

/// Appends an `Execute` (`E`, §55.7) of the portal `portal`, returning at most `max_rows`
/// rows (0 for no limit; when reached, the server sends `PortalSuspended`).
///
/// # Errors
///
/// [`Error::InvalidInput`] when `portal` holds a NUL.
pub fn execute(out: &mut Vec<u8>, portal: &str, max_rows: i32) -> Result<(), Error> {
    message(out, Some(b'E'), |out| {
        cstr(out, portal.as_bytes(), "portal name holds a nul")?;
        out.extend_from_slice(&max_rows.to_be_bytes());
        Ok(())
    })
}

/// Appends a `Close` (`C`, §55.7) of the statement or portal `name`.
///
/// # Errors
///
/// [`Error::InvalidInput`] when `name` holds a NUL.
pub fn close(out: &mut Vec<u8>, target: Target, name: &str) -> Result<(), Error> {
    message(out, Some(b'C'), |out| {
        out.push(target.byte());
        cstr(out, name.as_bytes(), "name holds a nul")
    })
}

/// Appends a `Sync` (`S`, §55.7): ends an extended-query cycle; the server answers
/// `ReadyForQuery`, after skipping to here when a message of the cycle failed.
pub fn sync(out: &mut Vec<u8>) {
    out.extend_from_slice(b"S\0\0\0\x04");
}

/// Appends a `Flush` (`H`, §55.7): asks the server to send what it has buffered.
pub fn flush(out: &mut Vec<u8>) {
    out.extend_from_slice(b"H\0\0\0\x04");
}

/// Appends a `CopyData` (`d`, §55.7) carrying `data` (any slice of the COPY stream; row
/// boundaries need not match messages).
///
/// # Errors
///
/// [`Error::InvalidInput`] when `data` is longer than 2^31 - 5 bytes.
pub fn copy_data(out: &mut Vec<u8>, data: &[u8]) -> Result<(), Error> {
    message(out, Some(b'd'), |out| {
        out.extend_from_slice(data);
        Ok(())
    })
}

/// Appends a `CopyDone` (`c`, §55.7): the COPY data is complete.
pub fn copy_done(out: &mut Vec<u8>) {
    out.extend_from_slice(b"c\0\0\0\x04");
}

/// Appends a `CopyFail` (`f`, §55.7) with an error `message` for the server to report.
///
/// # Errors
///
/// [`Error::InvalidInput`] when `message` holds a NUL byte.
pub fn copy_fail(out: &mut Vec<u8>, message_text: &str) -> Result<(), Error> {
    message(out, Some(b'f'), |out| {
        cstr(
            out,
            message_text.as_bytes(),
            "copy fail message holds a nul",
        )
    })
}

/// Appends a `Terminate` (`X`, §55.7): the client is closing the connection.
pub fn terminate(out: &mut Vec<u8>) {
    out.extend_from_slice(b"X\0\0\0\x04");
}

/// Appends an `SSLRequest` (§55.2.10): the 8-byte packet asking the server to start TLS.
pub fn ssl_request(out: &mut Vec<u8>) {
    out.extend_from_slice(&8i32.to_be_bytes());
    out.extend_from_slice(&SSL_REQUEST_CODE.to_be_bytes());
}

/// Appends a `CancelRequest` (§55.2.8): the 16-byte packet, sent on a new connection,
/// asking the backend `process_id` (authenticated by `secret_key`, both from
/// `BackendKeyData`) to cancel its current query.
pub fn cancel_request(out: &mut Vec<u8>, process_id: i32, secret_key: i32) {
    out.extend_from_slice(&16i32.to_be_bytes());
    out.extend_from_slice(&CANCEL_REQUEST_CODE.to_be_bytes());
    out.extend_from_slice(&process_id.to_be_bytes());
    out.extend_from_slice(&secret_key.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_message_bytes() {
        let mut out = Vec::new();
        startup_message(&mut out, &[("user", "bob"), ("database", "db")]).unwrap();
        let mut expected = vec![0, 0, 0, 30, 0, 3, 0, 0];
        expected.extend_from_slice(b"user\0bob\0database\0db\0\0");
        assert_eq!(out, expected);
        assert_eq!(
            startup_message(&mut out, &[("user", "b\0b")]),
            Err(Error::InvalidInput {
                what: "startup parameter value holds a nul"
            })
        );
        // Nothing appended on error.
        assert_eq!(out, expected);
    }

    #[test]
    fn extended_query_messages() {
        let mut out = Vec::new();
        parse(&mut out, "", "SELECT $1", &[23]).unwrap();
        assert_eq!(out, b"P\0\0\0\x15\0SELECT $1\0\0\x01\0\0\0\x17");
        out.clear();
        bind(&mut out, "", "s1", &[], &[Some(b"42"), None], &[1]).unwrap();
        assert_eq!(
            out,
            b"B\0\0\0\x1a\0s1\0\0\0\0\x02\0\0\0\x0242\xff\xff\xff\xff\0\x01\0\x01"
        );
        out.clear();
        describe(&mut out, Target::Portal, "").unwrap();
        assert_eq!(out, b"D\0\0\0\x06P\0");
        out.clear();
        execute(&mut out, "", 0).unwrap();
        assert_eq!(out, b"E\0\0\0\x09\0\0\0\0\0");
        out.clear();
        close(&mut out, Target::Statement, "s1").unwrap();
        assert_eq!(out, b"C\0\0\0\x08Ss1\0");
        out.clear();
        sync(&mut out);
        flush(&mut out);
        assert_eq!(out, b"S\0\0\0\x04H\0\0\0\x04");
        out.clear();
        let many = vec![None; 40_000];
        assert!(bind(&mut out, "", "", &[], &many, &[]).is_err());
        assert!(parse(&mut out, "a\0", "", &[]).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn query_and_friends() {
        let mut out = Vec::new();
        query(&mut out, "SELECT 1").unwrap();
        assert_eq!(out, b"Q\0\0\0\x0dSELECT 1\0");
        assert!(query(&mut out, "a\0b").is_err());
        assert_eq!(out, b"Q\0\0\0\x0dSELECT 1\0");

        out.clear();
        password_message(&mut out, b"pw").unwrap();
        assert_eq!(out, b"p\0\0\0\x07pw\0");

        out.clear();
        sasl_initial_response(&mut out, "SCRAM-SHA-256", b"n,,n=,r=x").unwrap();
        assert_eq!(out, b"p\0\0\0\x1fSCRAM-SHA-256\0\0\0\0\x09n,,n=,r=x");

        out.clear();
        sasl_response(&mut out, b"c=biws").unwrap();
        assert_eq!(out, b"p\0\0\0\x0ac=biws");

        out.clear();
        terminate(&mut out);
        assert_eq!(out, b"X\0\0\0\x04");

        out.clear();
        cancel_request(&mut out, 0x0102_0304, -1);
        assert_eq!(
            out,
            [0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e, 1, 2, 3, 4, 255, 255, 255, 255]
        );

        out.clear();
        ssl_request(&mut out);
        assert_eq!(out, [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

        out.clear();
        copy_data(&mut out, b"1\tx\n").unwrap();
        copy_done(&mut out);
        assert_eq!(out, b"d\0\0\0\x081\tx\nc\0\0\0\x04");

        out.clear();
        copy_fail(&mut out, "no").unwrap();
        assert_eq!(out, b"f\0\0\0\x07no\0");
    }
}

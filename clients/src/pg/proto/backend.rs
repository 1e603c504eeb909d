//! Backend (server-to-client) messages of the PostgreSQL Frontend/Backend Protocol
//! version 3.0, parsed from the caller's bytes without copying (PostgreSQL
//! documentation, chapter 55 "Frontend/Backend Protocol", §55.7 "Message Formats").
//!
//! [`parse`] reads one message from the front of a buffer: `Ok(None)` when the buffer
//! does not hold all of it yet, `Ok(Some((message, consumed)))` when it does. Every
//! length and count the server sends is checked before it is used: the message length
//! against 4 and the configured maximum (before waiting for the body, so a lying length
//! never makes the caller buffer more than the limit), each field against the end of
//! its message, counts against the bytes that could hold them. The body of a
//! [`Message::RowDescription`] or [`Message::DataRow`] is walked once in full when it
//! is parsed, so iterating it afterwards cannot fail.

use super::{Error, Limits};

/// The transaction status a `ReadyForQuery` message reports (§55.7, `ReadyForQuery`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransactionStatus {
    /// `I`: not in a transaction block.
    Idle,
    /// `T`: in a transaction block.
    InTransaction,
    /// `E`: in a failed transaction block (statements are refused until it ends).
    Failed,
}

/// One backend message, borrowing from the buffer it was parsed from. Variant names are
/// the protocol's message names (§55.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message<'a> {
    /// `AuthenticationOk` (`R`, code 0): authentication succeeded.
    AuthenticationOk,
    /// `AuthenticationCleartextPassword` (`R`, code 3): send the password in clear.
    AuthenticationCleartextPassword,
    /// `AuthenticationMD5Password` (`R`, code 5) with its 4-byte salt.
    AuthenticationMd5Password {
        /// The salt.
        salt: [u8; 4],
    },
    /// `AuthenticationSASL` (`R`, code 10) with the mechanisms the server offers.
    AuthenticationSasl {
        /// The mechanism names, each NUL-terminated, in the server's order; iterate
        /// with [`sasl_mechanisms`].
        mechanisms: &'a [u8],
    },
    /// `AuthenticationSASLContinue` (`R`, code 11): a SASL challenge.
    AuthenticationSaslContinue {
        /// Mechanism-specific data (the SCRAM server-first-message).
        data: &'a [u8],
    },
    /// `AuthenticationSASLFinal` (`R`, code 12): the outcome of SASL.
    AuthenticationSaslFinal {
        /// Mechanism-specific data (the SCRAM server-final-message).
        data: &'a [u8],
    },
    /// Another `Authentication*` request this client does not implement (Kerberos 2,
    /// SCM 6, GSS 7 and 8, SSPI 9).
    AuthenticationOther {
        /// The request code.
        code: i32,
    },
    /// `BackendKeyData` (`K`): what a `CancelRequest` for this session must carry.
    BackendKeyData {
        /// The process ID of the backend.
        process_id: i32,
        /// Its secret key.
        secret_key: i32,
    },
    /// `ParameterStatus` (`S`): a run-time parameter's current value.
    ParameterStatus {
        /// The parameter's name.
        name: &'a str,
        /// Its value.
        value: &'a str,
    },
    /// `ReadyForQuery` (`Z`): the backend is ready for a new query cycle.
    ReadyForQuery {
        /// The transaction status.
        status: TransactionStatus,
    },
    /// `CommandComplete` (`C`): a statement finished.
    CommandComplete {
        /// The command tag (`SELECT 3`, `INSERT 0 1`, `CREATE TABLE`, ...).
        tag: &'a str,
    },
    /// `EmptyQueryResponse` (`I`): the query string held no statement.
    EmptyQueryResponse,
    /// `RowDescription` (`T`): the columns of the rows that follow.
    RowDescription(RowDescriptionBody<'a>),
    /// `DataRow` (`D`): one row.
    DataRow(DataRowBody<'a>),
    /// `ErrorResponse` (`E`).
    ErrorResponse(ErrorFields<'a>),
    /// `NoticeResponse` (`N`).
    NoticeResponse(ErrorFields<'a>),
    /// `NotificationResponse` (`A`): a `NOTIFY` on a channel this session listens on.
    NotificationResponse {
        /// The process ID of the notifying backend.
        process_id: i32,
        /// The channel name.
        channel: &'a str,
        /// The payload (empty when none was given).
        payload: &'a str,
    },
    /// `ParseComplete` (`1`).
    ParseComplete,
    /// `BindComplete` (`2`).
    BindComplete,
    /// `CloseComplete` (`3`).
    CloseComplete,
    /// `NoData` (`n`): the statement or portal returns no rows.
    NoData,
    /// `PortalSuspended` (`s`): `Execute`'s row limit was reached.
    PortalSuspended,
    /// `ParameterDescription` (`t`): the parameter types of a prepared statement.
    ParameterDescription {
        /// The type OIDs, 4 bytes each, big-endian; iterate with
        /// [`parameter_types`].
        types: &'a [u8],
    },
    /// `CopyInResponse` (`G`): the server waits for `COPY ... FROM STDIN` data.
    CopyInResponse,
    /// `CopyOutResponse` (`H`): `COPY ... TO STDOUT` data follows.
    CopyOutResponse,
    /// `CopyBothResponse` (`W`): streaming replication started.
    CopyBothResponse,
    /// `CopyData` (`d`).
    CopyData {
        /// The data.
        data: &'a [u8],
    },
    /// `CopyDone` (`c`).
    CopyDone,
    /// `NegotiateProtocolVersion` (`v`): the server does not support the minor version
    /// or some protocol options asked for.
    NegotiateProtocolVersion {
        /// The newest minor version the server supports.
        minor_version: i32,
    },
}

/// The mechanism names of an `AuthenticationSASL` message's list (as
/// [`Message::AuthenticationSasl`] gives it), without their NUL terminators.
pub fn sasl_mechanisms(list: &[u8]) -> impl Iterator<Item = &[u8]> {
    list.split(|&b| b == 0).filter(|name| !name.is_empty())
}

/// The type OIDs of a `ParameterDescription` (as [`Message::ParameterDescription`]
/// gives them).
pub fn parameter_types(types: &[u8]) -> impl Iterator<Item = u32> + '_ {
    types
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
}

/// Reads the server's one-byte answer to an `SSLRequest` (§55.2.10): `true` for `S`
/// (start the TLS handshake now), `false` for `N` (no TLS; the session may go on in
/// plain text).
///
/// # Errors
///
/// [`Error::SslResponse`] for any other byte (an `E` is an `ErrorResponse` from a server
/// that does not know the request; it must not be shown to a user, as libpq's
/// documentation warns, because no TLS protects it).
pub fn ssl_response(byte: u8) -> Result<bool, Error> {
    match byte {
        b'S' => Ok(true),
        b'N' => Ok(false),
        byte => Err(Error::SslResponse { byte }),
    }
}

/// Reads one backend message from the front of `buf`.
///
/// Returns `Ok(None)` when `buf` holds less than the whole message (read more and call
/// again with the same bytes at the front), or the message and the number of bytes it
/// took (type byte, length and body), which the caller removes once done with the
/// message.
///
/// # Errors
///
/// [`Error::UnknownMessage`] for a type byte that is not a backend message;
/// [`Error::InvalidLength`] for a length below 4; [`Error::MessageTooLong`] for a body
/// longer than `limits.max_message_len` (found from the 5-byte header, before the body
/// arrives); [`Error::Malformed`] for a body that does not hold what its type says
/// (a field running past the end, a count larger than the body, bytes left over,
/// invalid UTF-8 in a text field, an unknown transaction status).
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<(Message<'a>, usize)>, Error> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    if !is_backend_type(kind) {
        return Err(Error::UnknownMessage { kind });
    }
    let Some(len) = buf.get(1..5) else {
        return Ok(None);
    };
    let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
    if len < 4 {
        return Err(Error::InvalidLength { kind, len });
    }
    // len >= 4, so the cast is lossless on every platform with 32-bit usize or more.
    let body_len = len as usize - 4;
    if body_len > limits.max_message_len {
        return Err(Error::MessageTooLong {
            kind,
            len: body_len,
            limit: limits.max_message_len,
        });
    }
    let total = 5 + body_len;
    let Some(body) = buf.get(5..total) else {
        return Ok(None);
    };
    let message = parse_body(kind, body)?;
    Ok(Some((message, total)))
}

fn is_backend_type(kind: u8) -> bool {
    matches!(
        kind,
        b'R' | b'K'
            | b'S'
            | b'Z'
            | b'C'
            | b'I'
            | b'T'
            | b'D'
            | b'E'
            | b'N'
            | b'A'
            | b'1'
            | b'2'
            | b'3'
            | b'n'
            | b's'
            | b't'
            | b'G'
            | b'H'
            | b'W'
            | b'd'
            | b'c'
            | b'v'
    )
}

/// A cursor over one message body; every read checks the end.
struct Body<'a> {
    kind: u8,
    rest: &'a [u8],
}

impl<'a> Body<'a> {
    fn malformed(&self, reason: &'static str) -> Error {
        Error::Malformed {
            kind: self.kind,
            reason,
        }
    }

    fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Error> {
        if self.rest.len() < n {
            return Err(self.malformed(what));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn i16(&mut self, what: &'static str) -> Result<i16, Error> {
        let b = self.bytes(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &'static str) -> Result<i32, Error> {
        let b = self.bytes(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A NUL-terminated string, without its NUL.
    fn cstr_bytes(&mut self, what: &'static str) -> Result<&'a [u8], Error> {
        let end = memchr::memchr(0, self.rest).ok_or_else(|| self.malformed(what))?;
        let s = &self.rest[..end];
        self.rest = &self.rest[end + 1..];
        Ok(s)
    }

    fn cstr(&mut self, what: &'static str) -> Result<&'a str, Error> {
        let b = self.cstr_bytes(what)?;
        std::str::from_utf8(b).map_err(|_| self.malformed("text field is not utf-8"))
    }

    fn end(self) -> Result<(), Error> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(self.malformed("bytes after the last field"))
        }
    }
}

fn parse_body(kind: u8, body: &[u8]) -> Result<Message<'_>, Error> {
    let mut b = Body { kind, rest: body };
    let message = match kind {
        b'R' => {
            let code = b.i32("authentication code")?;
            match code {
                0 => Message::AuthenticationOk,
                3 => Message::AuthenticationCleartextPassword,
                5 => {
                    let s = b.bytes(4, "md5 salt")?;
                    Message::AuthenticationMd5Password {
                        salt: [s[0], s[1], s[2], s[3]],
                    }
                }
                10 => {
                    let list = b.rest;
                    // A list of NUL-terminated names ending with an empty name.
                    if list.len() < 2 || !list.ends_with(&[0, 0]) {
                        return Err(b.malformed("sasl mechanism list not terminated"));
                    }
                    b.rest = &[];
                    Message::AuthenticationSasl { mechanisms: list }
                }
                11 => {
                    let data = std::mem::take(&mut b.rest);
                    Message::AuthenticationSaslContinue { data }
                }
                12 => {
                    let data = std::mem::take(&mut b.rest);
                    Message::AuthenticationSaslFinal { data }
                }
                // Kerberos V5, SCM credentials, GSS, GSS continue and SSPI.
                2 | 6..=9 => {
                    b.rest = &[];
                    Message::AuthenticationOther { code }
                }
                _ => return Err(b.malformed("unknown authentication code")),
            }
        }
        b'K' => Message::BackendKeyData {
            process_id: b.i32("process id")?,
            secret_key: b.i32("secret key")?,
        },
        b'S' => Message::ParameterStatus {
            name: b.cstr("parameter name")?,
            value: b.cstr("parameter value")?,
        },
        b'Z' => {
            let status = match b.bytes(1, "transaction status")?[0] {
                b'I' => TransactionStatus::Idle,
                b'T' => TransactionStatus::InTransaction,
                b'E' => TransactionStatus::Failed,
                _ => return Err(b.malformed("unknown transaction status")),
            };
            Message::ReadyForQuery { status }
        }
        b'C' => Message::CommandComplete {
            tag: b.cstr("command tag")?,
        },
        b'I' => Message::EmptyQueryResponse,
        b'T' => {
            let body = RowDescriptionBody::check(&mut b)?;
            Message::RowDescription(body)
        }
        b'D' => {
            let body = DataRowBody::check(&mut b)?;
            Message::DataRow(body)
        }
        b'E' | b'N' => {
            let fields = ErrorFields::check(&mut b)?;
            if kind == b'E' {
                Message::ErrorResponse(fields)
            } else {
                Message::NoticeResponse(fields)
            }
        }
        b'A' => Message::NotificationResponse {
            process_id: b.i32("process id")?,
            channel: b.cstr("channel")?,
            payload: b.cstr("payload")?,
        },
        b'1' => Message::ParseComplete,
        b'2' => Message::BindComplete,
        b'3' => Message::CloseComplete,
        b'n' => Message::NoData,
        b's' => Message::PortalSuspended,
        b't' => {
            let count = b.i16("parameter count")?;
            let count =
                usize::try_from(count).map_err(|_| b.malformed("negative parameter count"))?;
            let types = b.bytes(count * 4, "parameter types")?;
            Message::ParameterDescription { types }
        }
        b'G' | b'H' | b'W' => {
            let _format = b.bytes(1, "copy format")?;
            let count = b.i16("copy column count")?;
            let count =
                usize::try_from(count).map_err(|_| b.malformed("negative copy column count"))?;
            let _formats = b.bytes(count * 2, "copy column formats")?;
            match kind {
                b'G' => Message::CopyInResponse,
                b'H' => Message::CopyOutResponse,
                _ => Message::CopyBothResponse,
            }
        }
        b'd' => Message::CopyData {
            data: std::mem::take(&mut b.rest),
        },
        b'c' => Message::CopyDone,
        b'v' => {
            let minor_version = b.i32("minor version")?;
            let count = b.i32("option count")?;
            let count = usize::try_from(count).map_err(|_| b.malformed("negative option count"))?;
            if count > b.rest.len() {
                return Err(b.malformed("option count larger than the message"));
            }
            for _ in 0..count {
                b.cstr_bytes("option name")?;
            }
            Message::NegotiateProtocolVersion { minor_version }
        }
        // `parse` only calls this for the types `is_backend_type` accepts.
        _ => return Err(Error::UnknownMessage { kind }),
    };
    b.end()?;
    Ok(message)
}

/// One column of a `RowDescription` (§55.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDescription<'a> {
    /// The column name.
    pub name: &'a str,
    /// The OID of the table the column comes from, or 0.
    pub table_oid: u32,
    /// The column's attribute number in that table, or 0.
    pub column_id: i16,
    /// The OID of the column's data type.
    pub type_oid: u32,
    /// The data type size (`pg_type.typlen`; negative for variable width).
    pub type_size: i16,
    /// The type modifier (`pg_attribute.atttypmod`).
    pub type_modifier: i32,
    /// The format code: 0 text, 1 binary.
    pub format: i16,
}

/// The body of a `RowDescription`, checked in full when parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowDescriptionBody<'a> {
    count: u16,
    fields: &'a [u8],
}

impl<'a> RowDescriptionBody<'a> {
    fn check(b: &mut Body<'a>) -> Result<Self, Error> {
        let count = b.i16("field count")?;
        let count = u16::try_from(count).map_err(|_| b.malformed("negative field count"))?;
        let fields = b.rest;
        for _ in 0..count {
            b.cstr("field name")?;
            b.bytes(18, "field description")?;
        }
        let used = fields.len() - b.rest.len();
        Ok(RowDescriptionBody {
            count,
            fields: &fields[..used],
        })
    }

    /// The number of columns.
    #[must_use]
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether there are no columns.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The columns, in order.
    pub fn fields(&self) -> impl Iterator<Item = FieldDescription<'a>> + 'a {
        let mut rest = self.fields;
        (0..self.count).map(move |_| {
            // `check` walked these bytes: each field is a UTF-8 name, a NUL and 18 bytes.
            let nul = memchr::memchr(0, rest).unwrap_or(rest.len());
            let name = std::str::from_utf8(&rest[..nul]).unwrap_or("");
            let f = &rest[nul + 1..nul + 19];
            rest = &rest[nul + 19..];
            FieldDescription {
                name,
                table_oid: u32::from_be_bytes([f[0], f[1], f[2], f[3]]),
                column_id: i16::from_be_bytes([f[4], f[5]]),
                type_oid: u32::from_be_bytes([f[6], f[7], f[8], f[9]]),
                type_size: i16::from_be_bytes([f[10], f[11]]),
                type_modifier: i32::from_be_bytes([f[12], f[13], f[14], f[15]]),
                format: i16::from_be_bytes([f[16], f[17]]),
            }
        })
    }
}

/// The body of a `DataRow`, checked in full when parsed: every value lies inside the
/// message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRowBody<'a> {
    count: u16,
    values: &'a [u8],
}

impl<'a> DataRowBody<'a> {
    fn check(b: &mut Body<'a>) -> Result<Self, Error> {
        let count = b.i16("column count")?;
        let count = u16::try_from(count).map_err(|_| b.malformed("negative column count"))?;
        let values = b.rest;
        for _ in 0..count {
            let len = b.i32("value length")?;
            if len == -1 {
                continue;
            }
            let len = usize::try_from(len).map_err(|_| b.malformed("negative value length"))?;
            b.bytes(len, "value runs past the message")?;
        }
        Ok(DataRowBody { count, values })
    }

    /// The number of values.
    #[must_use]
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether the row has no values.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The values in column order, `None` for SQL NULL, each borrowing from the
    /// receive buffer (text or binary as the column's format code says).
    pub fn values(&self) -> impl Iterator<Item = Option<&'a [u8]>> + 'a {
        let mut rest = self.values;
        (0..self.count).map(move |_| {
            // `check` walked these bytes: a length of -1, or a length and that many bytes.
            let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
            rest = &rest[4..];
            if len < 0 {
                return None;
            }
            let (value, tail) = rest.split_at(len as usize);
            rest = tail;
            Some(value)
        })
    }
}

/// The fields of an `ErrorResponse` or `NoticeResponse` (§55.8 "Error and Notice
/// Message Fields"), checked when parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorFields<'a> {
    fields: &'a [u8],
}

impl<'a> ErrorFields<'a> {
    fn check(b: &mut Body<'a>) -> Result<Self, Error> {
        let fields = b.rest;
        loop {
            let code = b.bytes(1, "error fields not terminated")?[0];
            if code == 0 {
                break;
            }
            b.cstr("error field")?;
        }
        Ok(ErrorFields { fields })
    }

    /// The fields as (code, value) pairs in the order sent: `S` severity (localized),
    /// `V` severity, `C` SQLSTATE, `M` message, `D` detail, `H` hint, `P` position, ...
    pub fn iter(&self) -> impl Iterator<Item = (u8, &'a str)> + 'a {
        let mut rest = self.fields;
        std::iter::from_fn(move || {
            let (&code, tail) = rest.split_first()?;
            if code == 0 {
                return None;
            }
            // `check` walked these bytes: each field is UTF-8 text ending in a NUL.
            let nul = memchr::memchr(0, tail)?;
            let value = std::str::from_utf8(&tail[..nul]).unwrap_or("");
            rest = &tail[nul + 1..];
            Some((code, value))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![kind];
        v.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn one(bytes: &[u8]) -> Result<Option<(Message<'_>, usize)>, Error> {
        parse(bytes, &Limits::default())
    }

    #[test]
    fn ssl_responses() {
        assert_eq!(ssl_response(b'S'), Ok(true));
        assert_eq!(ssl_response(b'N'), Ok(false));
        assert_eq!(ssl_response(b'E'), Err(Error::SslResponse { byte: b'E' }));
    }

    #[test]
    fn ready_for_query_and_need_more() {
        let bytes = b"Z\0\0\0\x05I";
        for cut in 0..bytes.len() {
            assert_eq!(one(&bytes[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert_eq!(
            one(bytes).unwrap(),
            Some((
                Message::ReadyForQuery {
                    status: TransactionStatus::Idle
                },
                6
            ))
        );
    }

    #[test]
    fn lengths_are_checked_before_the_body() {
        assert_eq!(
            one(b"Z\0\0\0\x03"),
            Err(Error::InvalidLength { kind: b'Z', len: 3 })
        );
        assert_eq!(
            one(b"D\xff\xff\xff\xff"),
            Err(Error::InvalidLength {
                kind: b'D',
                len: -1
            })
        );
        let limits = Limits {
            max_message_len: 100,
            ..Limits::default()
        };
        assert_eq!(
            parse(b"D\0\0\0\x69", &limits),
            Err(Error::MessageTooLong {
                kind: b'D',
                len: 101,
                limit: 100
            })
        );
        assert_eq!(
            one(b"x\0\0\0\x04"),
            Err(Error::UnknownMessage { kind: b'x' })
        );
        // Known type, but bytes after its fields.
        assert_eq!(
            one(&msg(b'Z', b"IX")),
            Err(Error::Malformed {
                kind: b'Z',
                reason: "bytes after the last field"
            })
        );
    }

    #[test]
    fn row_description_and_data_row() {
        let mut body = 2i16.to_be_bytes().to_vec();
        for name in ["a", "bb"] {
            body.extend_from_slice(name.as_bytes());
            body.push(0);
            body.extend_from_slice(&[
                0, 0, 0, 7, 0, 1, 0, 0, 0, 23, 0, 4, 255, 255, 255, 255, 0, 0,
            ]);
        }
        let bytes = msg(b'T', &body);
        let (m, n) = one(&bytes).unwrap().unwrap();
        assert_eq!(n, bytes.len());
        let Message::RowDescription(rd) = m else {
            panic!("{m:?}")
        };
        let fields: Vec<_> = rd.fields().collect();
        assert_eq!(fields.len(), 2);
        assert_eq!(fields[1].name, "bb");
        assert_eq!(fields[1].type_oid, 23);
        assert_eq!(fields[1].table_oid, 7);
        assert_eq!(fields[1].type_modifier, -1);

        let bytes = msg(b'D', b"\0\x03\0\0\0\x011\xff\xff\xff\xff\0\0\0\0");
        let Message::DataRow(row) = one(&bytes).unwrap().unwrap().0 else {
            panic!()
        };
        let values: Vec<_> = row.values().collect();
        assert_eq!(values, vec![Some(&b"1"[..]), None, Some(&b""[..])]);

        // A value running past the message.
        assert_eq!(
            one(&msg(b'D', b"\0\x01\0\0\0\x05abc")),
            Err(Error::Malformed {
                kind: b'D',
                reason: "value runs past the message"
            })
        );
        // More columns announced than the message holds.
        assert!(one(&msg(b'D', b"\x7f\xff")).is_err());
        assert!(one(&msg(b'D', b"\xff\xff")).is_err());
        // A field name without its NUL.
        assert!(one(&msg(b'T', b"\0\x01abc")).is_err());
    }

    #[test]
    fn error_fields() {
        let bytes = msg(b'E', b"SERROR\0C42P01\0Mno such table\0\0");
        let Message::ErrorResponse(f) = one(&bytes).unwrap().unwrap().0 else {
            panic!()
        };
        let fields: Vec<_> = f.iter().collect();
        assert_eq!(
            fields,
            vec![(b'S', "ERROR"), (b'C', "42P01"), (b'M', "no such table")]
        );
        assert!(one(&msg(b'E', b"SERROR\0")).is_err());
        assert!(one(&msg(b'E', b"SERR")).is_err());
    }

    #[test]
    fn authentication() {
        assert_eq!(
            one(&msg(b'R', b"\0\0\0\x0aSCRAM-SHA-256\0\0"))
                .unwrap()
                .unwrap()
                .0,
            Message::AuthenticationSasl {
                mechanisms: b"SCRAM-SHA-256\0\0"
            }
        );
        assert_eq!(
            sasl_mechanisms(b"SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0").collect::<Vec<_>>(),
            vec![&b"SCRAM-SHA-256-PLUS"[..], &b"SCRAM-SHA-256"[..]]
        );
        assert!(one(&msg(b'R', b"\0\0\0\x0aSCRAM")).is_err());
        assert!(one(&msg(b'R', b"\0\0\0\x63")).is_err());
        assert_eq!(
            one(&msg(b'R', b"\0\0\0\x05abcd")).unwrap().unwrap().0,
            Message::AuthenticationMd5Password { salt: *b"abcd" }
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let limits = Limits { max_message_len: 200, ..Limits::default() };
            if let Ok(Some((m, n))) = parse(&bytes, &limits) {
                proptest::prop_assert!(n <= bytes.len());
                // Walking a parsed body never panics either.
                match m {
                    Message::DataRow(r) => { let _ = r.values().count(); }
                    Message::RowDescription(r) => { let _ = r.fields().count(); }
                    Message::ErrorResponse(f) | Message::NoticeResponse(f) => { let _ = f.iter().count(); }
                    _ => {}
                }
            }
        }

        #[test]
        fn typed_messages_with_arbitrary_bodies_never_panic(
            kind in proptest::sample::select(b"RKSZCITDENA123nstGHWdcv".to_vec()),
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
        ) {
            let bytes = msg(kind, &body);
            if let Ok(Some((m, n))) = parse(&bytes, &Limits::default()) {
                proptest::prop_assert_eq!(n, bytes.len());
                match m {
                    Message::DataRow(r) => { let _ = r.values().count(); }
                    Message::RowDescription(r) => { let _ = r.fields().count(); }
                    Message::ErrorResponse(f) | Message::NoticeResponse(f) => { let _ = f.iter().count(); }
                    _ => {}
                }
            }
        }
    }
}

//! RESP, the REdis Serialization Protocol, versions 2 and 3, without I/O
//! (<https://github.com/redis/redis-specifications/blob/master/protocol/RESP3.md>,
//! RESP2: <https://redis.io/docs/latest/develop/reference/protocol-spec/>).
//!
//! - [`Decoder`] reads one value (a "frame") at a time from the caller's bytes and says
//!   how many it used; `Ok(None)` means more bytes are needed. It keeps what it has
//!   parsed of an incomplete frame, so feeding a growing buffer costs O(bytes read),
//!   and it walks nested aggregates with an explicit stack: no recursion a peer could
//!   drive into a stack overflow. [`parse`] is the one-shot form.
//! - [`write_command`] appends a command, an array of bulk strings (the only form a
//!   client sends, RESP3 §"Client handshake" and RESP2 §"Sending commands"), to the
//!   caller's `Vec<u8>`; [`Value::encode`] appends any value (for tests and fake
//!   servers).
//!
//! Every type of RESP3 is parsed: simple string `+`, simple error `-`, integer `:`,
//! bulk string `$`, array `*`, null `_` (and RESP2's `$-1` and `*-1`), boolean `#`,
//! double `,` (with `inf`, `-inf` and `nan`), big number `(`, bulk error `!`, verbatim
//! string `=`, map `%`, attribute `|`, set `~` and push `>`. Streamed strings and
//! aggregates (`$?`, `*?`, ...) are refused ([`Error::Streamed`]): no Redis server sends
//! them.
//!
//! ```
//! use keel_clients::redis::resp::{parse, write_command, Limits, Value};
//!
//! let mut out = Vec::new();
//! write_command(&mut out, &["GET", "key"]);
//! assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n");
//!
//! let limits = Limits::default();
//! assert_eq!(parse(b"$5\r\nhel", &limits), Ok(None));
//! assert_eq!(
//!     parse(b"$5\r\nhello\r\n+next", &limits),
//!     Ok(Some((Value::BulkString(b"hello".to_vec()), 11)))
//! );
//! ```

use std::fmt;
use std::io::Write as _;

// The type bytes of RESP3 §"RESP3 types", in the spec's order.
/// Simple string: `+<text>\r\n`.
pub const SIMPLE_STRING: u8 = b'+';
/// Simple error: `-<text>\r\n`.
pub const SIMPLE_ERROR: u8 = b'-';
/// Integer: `:[+|-]<digits>\r\n`, a signed 64-bit integer.
pub const INTEGER: u8 = b':';
/// Bulk string: `$<length>\r\n<bytes>\r\n`; `$-1\r\n` is RESP2's null bulk string.
pub const BULK_STRING: u8 = b'$';
/// Array: `*<count>\r\n` then `count` values; `*-1\r\n` is RESP2's null array.
pub const ARRAY: u8 = b'*';
/// Null: `_\r\n` (RESP3).
pub const NULL: u8 = b'_';
/// Boolean: `#t\r\n` or `#f\r\n` (RESP3).
pub const BOOLEAN: u8 = b'#';
/// Double: `,<floating point number>\r\n`, or `inf`, `-inf`, `nan` (RESP3).
pub const DOUBLE: u8 = b',';
/// Big number: `([+|-]<digits>\r\n` (RESP3).
pub const BIG_NUMBER: u8 = b'(';
/// Bulk error: `!<length>\r\n<bytes>\r\n` (RESP3).
pub const BULK_ERROR: u8 = b'!';
/// Verbatim string: `=<length>\r\n<format>:<bytes>\r\n`, the format three bytes
/// (RESP3).
pub const VERBATIM_STRING: u8 = b'=';
/// Map: `%<count>\r\n` then `count` key-value pairs (RESP3).
pub const MAP: u8 = b'%';
/// Attribute: `|<count>\r\n` then `count` key-value pairs, then the value they
/// describe (RESP3).
pub const ATTRIBUTE: u8 = b'|';
/// Set: `~<count>\r\n` then `count` values (RESP3).
pub const SET: u8 = b'~';
/// Push: `><count>\r\n` then `count` values, out-of-band data (RESP3).
pub const PUSH: u8 = b'>';

/// A RESP value, owned. Byte strings are kept exactly as received; nothing is decoded
/// as text.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Simple string (`+`): a short status such as `OK`, without CR or LF.
    SimpleString(Vec<u8>),
    /// Simple error (`-`): `ERR message`, the first word being the error code by
    /// convention (RESP3 §"Simple types").
    SimpleError(Vec<u8>),
    /// Integer (`:`), signed 64 bits.
    Integer(i64),
    /// Bulk string (`$`): any bytes.
    BulkString(Vec<u8>),
    /// Array (`*`): values in order.
    Array(Vec<Value>),
    /// Null (RESP3 `_`; RESP2's null bulk string `$-1` and null array `*-1` too).
    Null,
    /// Boolean (`#t` or `#f`).
    Boolean(bool),
    /// Double (`,`): an IEEE 754 binary64, infinities and NaN included.
    Double(f64),
    /// Big number (`(`): an integer of any size, as its decimal digits with an
    /// optional leading `-` or `+` (ASCII, checked).
    BigNumber(String),
    /// Bulk error (`!`): an error whose message is any bytes.
    BulkError(Vec<u8>),
    /// Verbatim string (`=`): text with a three-byte format (`txt`, `mkd`).
    VerbatimString {
        /// The format, e.g. `*b"txt"`.
        format: [u8; 3],
        /// The text after `<format>:`.
        text: Vec<u8>,
    },
    /// Map (`%`): key-value pairs in the order received (duplicates kept).
    Map(Vec<(Value, Value)>),
    /// Attribute (`|`): key-value pairs describing the value that follows them; RESP3
    /// §"Attribute type" says a client that does not use them should pass the value on
    /// as if they were not there. The decoder keeps both.
    Attribute {
        /// The attribute's key-value pairs.
        attributes: Vec<(Value, Value)>,
        /// The value they describe.
        value: Box<Value>,
    },
    /// Set (`~`): values in the order received (duplicates kept).
    Set(Vec<Value>),
    /// Push (`>`): out-of-band data such as pub/sub messages and invalidations
    /// (RESP3 §"Push type"); the first element names its kind.
    Push(Vec<Value>),
}

impl Value {
    /// Whether this is an error reply: a simple error or a bulk error (also under an
    /// attribute).
    #[must_use]
    pub fn is_error(&self) -> bool {
        match self {
            Value::SimpleError(_) | Value::BulkError(_) => true,
            Value::Attribute { value, .. } => value.is_error(),
            _ => false,
        }
    }

    /// The value without the attributes around it.
    #[must_use]
    pub fn without_attributes(&self) -> &Value {
        let mut value = self;
        while let Value::Attribute { value: inner, .. } = value {
            value = inner;
        }
        value
    }

    /// The bytes of a string-like value: simple string, simple error, bulk string,
    /// bulk error, verbatim string (its text), big number (its digits); `None` for
    /// the other types.
    #[must_use]
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::SimpleString(b)
            | Value::SimpleError(b)
            | Value::BulkString(b)
            | Value::BulkError(b)
            | Value::VerbatimString { text: b, .. } => Some(b),
            Value::BigNumber(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// Appends this value in RESP3 (RESP2 for the types RESP2 has; [`Value::Null`] as
    /// `_\r\n`) to `out`. Simple strings and errors are written as given: the caller
    /// keeps CR and LF out of them, else the output is not one valid frame.
    pub fn encode(&self, out: &mut Vec<u8>) {
        // Writing to a Vec cannot fail.
        let _ = self.encode_io(out);
    }

    fn encode_io(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        match self {
            Value::SimpleString(s) => line(out, SIMPLE_STRING, s),
            Value::SimpleError(s) => line(out, SIMPLE_ERROR, s),
            Value::Integer(i) => write!(out, ":{i}\r\n"),
            Value::BulkString(b) => blob(out, BULK_STRING, b),
            Value::Array(items) => aggregate(out, ARRAY, items),
            Value::Null => {
                out.extend_from_slice(b"_\r\n");
                Ok(())
            }
            Value::Boolean(b) => {
                out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
                Ok(())
            }
            Value::Double(d) => {
                if d.is_nan() {
                    out.extend_from_slice(b",nan\r\n");
                } else if d.is_infinite() {
                    out.extend_from_slice(if *d > 0.0 { b",inf\r\n" } else { b",-inf\r\n" });
                } else {
                    // `{:?}` is the shortest text that parses back to the same f64.
                    write!(out, ",{d:?}\r\n")?;
                }
                Ok(())
            }
            Value::BigNumber(n) => line(out, BIG_NUMBER, n.as_bytes()),
            Value::BulkError(b) => blob(out, BULK_ERROR, b),
            Value::VerbatimString { format, text } => {
                write!(out, "={}\r\n", text.len() + 4)?;
                out.extend_from_slice(format);
                out.push(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
                Ok(())
            }
            Value::Map(pairs) => pairs_of(out, MAP, pairs),
            Value::Attribute { attributes, value } => {
                pairs_of(out, ATTRIBUTE, attributes)?;
                value.encode_io(out)
            }
            Value::Set(items) => aggregate(out, SET, items),
            Value::Push(items) => aggregate(out, PUSH, items),
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, text: &[u8]) -> std::io::Result<()> {
    out.push(kind);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

fn blob(out: &mut Vec<u8>, kind: u8, bytes: &[u8]) -> std::io::Result<()> {
    write!(out, "{}{}\r\n", char::from(kind), bytes.len())?;
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    Ok(())
}

fn aggregate(out: &mut Vec<u8>, kind: u8, items: &[Value]) -> std::io::Result<()> {
    write!(out, "{}{}\r\n", char::from(kind), items.len())?;
    items.iter().try_for_each(|v| v.encode_io(out))
}

fn pairs_of(out: &mut Vec<u8>, kind: u8, pairs: &[(Value, Value)]) -> std::io::Result<()> {
    write!(out, "{}{}\r\n", char::from(kind), pairs.len())?;
    for (k, v) in pairs {
        k.encode_io(out)?;
        v.encode_io(out)?;
    }
    Ok(())
}

/// Appends one command to `out`: an array of bulk strings, `*<n>\r\n` then
/// `$<len>\r\n<arg>\r\n` for each argument, bytes as given (RESP2 §"Sending commands to
/// a Redis server"; RESP3 keeps this form for requests).
///
/// An empty `args` writes `*0\r\n`, which a server ignores without a reply: callers
/// that count replies must not send it ([`crate::redis::Connection::send`] refuses
/// it).
pub fn write_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    let _ = write!(out, "*{}\r\n", args.len());
    for arg in args {
        let _ = blob(out, BULK_STRING, arg.as_ref());
    }
}

/// Limits on what a peer can make the decoder hold. The defaults follow Redis's own
/// `proto-max-bulk-len` (512 MiB) and leave room for any reply a Redis server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The largest bulk string, bulk error or verbatim string payload, in bytes
    /// (default 512 MiB). A longer one is [`Error::BulkTooLarge`], found from its
    /// header before any payload is read.
    pub max_bulk_size: usize,
    /// The most elements of one array, set or push, or pairs of one map or attribute
    /// (default 16,777,216). More is [`Error::AggregateTooLarge`], found from its
    /// header; memory is reserved as elements arrive, never from the count alone.
    pub max_aggregate_len: usize,
    /// The deepest nesting of aggregates (default 128; a top-level array is depth 1).
    /// Deeper is [`Error::TooDeep`].
    pub max_depth: usize,
    /// The longest line of a simple string, simple error, integer, double, big number
    /// or length, in bytes without its CRLF (default 1 MiB). Longer is
    /// [`Error::LineTooLong`].
    pub max_line_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_size: 512 << 20,
            max_aggregate_len: 1 << 24,
            max_depth: 128,
            max_line_size: 1 << 20,
        }
    }
}

/// The peer's bytes are not valid RESP, or break a [`Limits`]. After any of these the
/// byte stream cannot be resynchronised: the connection must be closed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A type byte that is not one of RESP3's (§"RESP3 types").
    #[error("unknown resp type byte 0x{byte:02x}")]
    UnknownType {
        /// The byte.
        byte: u8,
    },
    /// A CR not followed by LF inside a line (a simple string or error, an integer, a
    /// length, ...): RESP lines cannot hold CR or LF.
    #[error("bare cr in a {:?} line", char::from(*kind))]
    BareCr {
        /// The type byte of the line.
        kind: u8,
    },
    /// An LF not preceded by CR inside a line.
    #[error("bare lf in a {:?} line", char::from(*kind))]
    BareLf {
        /// The type byte of the line.
        kind: u8,
    },
    /// A length or count that is not a decimal number (`$x`, `*`, `$+1`, `$ 1`).
    #[error("invalid length in a {:?} header", char::from(*kind))]
    InvalidLength {
        /// The type byte.
        kind: u8,
    },
    /// A negative length or count other than RESP2's `-1` null (which only `$` and `*`
    /// may use).
    #[error("negative length {len} in a {:?} header", char::from(*kind))]
    NegativeLength {
        /// The type byte.
        kind: u8,
        /// The length as sent (or `i64::MIN` when below it).
        len: i64,
    },
    /// A bulk string, bulk error or verbatim string whose payload is not followed by
    /// CRLF (its length does not match its bytes).
    #[error("{:?} payload not followed by crlf", char::from(*kind))]
    BulkNotTerminated {
        /// The type byte.
        kind: u8,
    },
    /// An integer (`:`) that is not `[+|-]<digits>`.
    #[error("invalid integer")]
    InvalidInteger,
    /// An integer (`:`) outside the signed 64-bit range.
    #[error("integer outside the signed 64-bit range")]
    IntegerOutOfRange,
    /// A double (`,`) that is not a number, `inf`, `-inf` or `nan`.
    #[error("invalid double")]
    InvalidDouble,
    /// A big number (`(`) that is not `[+|-]<digits>`.
    #[error("invalid big number")]
    InvalidBigNumber,
    /// A boolean (`#`) other than `t` or `f`.
    #[error("invalid boolean")]
    InvalidBoolean,
    /// A null (`_`) with bytes before its CRLF.
    #[error("invalid null")]
    InvalidNull,
    /// A verbatim string (`=`) shorter than 4 bytes or without `:` after its format.
    #[error("invalid verbatim string")]
    InvalidVerbatim,
    /// A streamed string or aggregate (`$?`, `*?`, `;` chunks, `.` end; RESP3
    /// §"Streamed strings", §"Streamed aggregated data types"), not supported.
    #[error("streamed {:?} not supported", char::from(*kind))]
    Streamed {
        /// The type byte.
        kind: u8,
    },
    /// A payload longer than [`Limits::max_bulk_size`].
    #[error("{:?} payload of {len} bytes over the limit of {limit}", char::from(*kind))]
    BulkTooLarge {
        /// The type byte.
        kind: u8,
        /// The length announced.
        len: u64,
        /// The limit in bytes.
        limit: usize,
    },
    /// An aggregate with more elements (or pairs) than [`Limits::max_aggregate_len`].
    #[error("{:?} of {len} elements over the limit of {limit}", char::from(*kind))]
    AggregateTooLarge {
        /// The type byte.
        kind: u8,
        /// The count announced.
        len: u64,
        /// The limit.
        limit: usize,
    },
    /// Aggregates nested deeper than [`Limits::max_depth`].
    #[error("aggregates nested deeper than {limit}")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// A line longer than [`Limits::max_line_size`].
    #[error("line longer than {limit} bytes")]
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
}

/// Parses one complete value from the start of `input`: `Ok(Some((value, consumed)))`
/// with the number of bytes it took, or `Ok(None)` when `input` ends before the value
/// does. The one-shot form of [`Decoder::decode`], which parses from the start each
/// time it is called.
///
/// # Errors
///
/// Any [`Error`]: the bytes are not RESP, or break `limits`.
pub fn parse(input: &[u8], limits: &Limits) -> Result<Option<(Value, usize)>, Error> {
    Decoder::new(*limits).decode(input)
}

/// An aggregate being read.
#[derive(Debug)]
struct Frame {
    kind: Open,
    /// Values still to read into `items`.
    remaining: usize,
    items: Vec<Value>,
}

#[derive(Debug)]
enum Open {
    Array,
    Set,
    Push,
    /// Keys and values alternate in `items`.
    Map,
    /// Keys and values alternate in `items`; then the described value.
    Attribute,
    /// The pairs are read; `items` gets the value they describe.
    Described(Vec<(Value, Value)>),
}

/// What one header or scalar at the cursor gives.
enum Item {
    Value(Value),
    Open(Open, usize),
}

/// A resumable RESP decoder: reads one value at a time from the caller's buffer.
///
/// Call [`Decoder::decode`] with the unconsumed bytes; on `Ok(None)` call it again with
/// the same bytes and more after them (never fewer, never different ones): the decoder
/// keeps the elements of an incomplete aggregate it has already read and goes on after
/// them. After `Ok(Some((value, consumed)))`, remove `consumed` bytes from the front
/// and call again for the next value. After an error the decoder is not usable (the
/// stream cannot be resynchronised).
///
/// Nesting is walked with a heap-allocated stack bounded by [`Limits::max_depth`], so
/// no input can overflow the thread's stack. Dropping a deeply nested [`Value`] is
/// recursive, which the depth limit bounds too.
#[derive(Debug)]
pub struct Decoder {
    limits: Limits,
    /// Bytes of the current value already parsed.
    pos: usize,
    /// How far the line after `pos` (the line of the item at `pos`) is known to hold
    /// no CR or LF, so that a line arriving a few bytes at a time is scanned once, not
    /// from its start at every resume; 0 when nothing is known.
    scanned: usize,
    stack: Vec<Frame>,
}

impl Decoder {
    /// A decoder enforcing `limits`.
    #[must_use]
    pub fn new(limits: Limits) -> Decoder {
        Decoder {
            limits,
            pos: 0,
            scanned: 0,
            stack: Vec::new(),
        }
    }

    /// The limits this decoder enforces.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether part of a value has been parsed and the rest is awaited.
    #[must_use]
    pub fn is_partial(&self) -> bool {
        self.pos > 0
    }

    /// Forgets any partly parsed value (for a new connection).
    pub fn reset(&mut self) {
        self.pos = 0;
        self.scanned = 0;
        self.stack.clear();
    }

    /// Parses the next value from `input`, the unconsumed bytes (see the type's docs):
    /// `Ok(Some((value, consumed)))`, or `Ok(None)` when more bytes are needed.
    ///
    /// # Errors
    ///
    /// Any [`Error`]: the bytes are not RESP, or break the limits.
    pub fn decode(&mut self, input: &[u8]) -> Result<Option<(Value, usize)>, Error> {
        loop {
            let Some((item, next)) = self.item(input)? else {
                return Ok(None);
            };
            self.pos = next;
            self.scanned = 0;
            let mut value = match item {
                Item::Value(value) => value,
                Item::Open(kind, count) => {
                    if self.stack.len() >= self.limits.max_depth {
                        return Err(Error::TooDeep {
                            limit: self.limits.max_depth,
                        });
                    }
                    let frame = Frame {
                        kind,
                        remaining: count,
                        // Reserve little: the count is the peer's word, not yet bytes.
                        items: Vec::with_capacity(count.min(64)),
                    };
                    match finish(frame) {
                        Finished::Value(value) => value,
                        Finished::Open(frame) => {
                            self.stack.push(frame);
                            continue;
                        }
                    }
                }
            };
            // Hand the finished value to the aggregates it completes.
            loop {
                let Some(frame) = self.stack.last_mut() else {
                    let consumed = self.pos;
                    self.pos = 0;
                    self.scanned = 0;
                    return Ok(Some((value, consumed)));
                };
                frame.items.push(value);
                frame.remaining -= 1;
                if frame.remaining > 0 {
                    break;
                }
                let Some(frame) = self.stack.pop() else {
                    unreachable!("the frame was just borrowed from the stack")
                };
                match finish(frame) {
                    Finished::Value(done) => value = done,
                    Finished::Open(frame) => {
                        self.stack.push(frame);
                        break;
                    }
                }
            }
        }
    }

    /// Reads the header or scalar at `self.pos`: the item and the position after it.
    fn item(&mut self, input: &[u8]) -> Result<Option<(Item, usize)>, Error> {
        let Some(&kind) = input.get(self.pos) else {
            return Ok(None);
        };
        if !matches!(
            kind,
            SIMPLE_STRING
                | SIMPLE_ERROR
                | INTEGER
                | BULK_STRING
                | ARRAY
                | NULL
                | BOOLEAN
                | DOUBLE
                | BIG_NUMBER
                | BULK_ERROR
                | VERBATIM_STRING
                | MAP
                | ATTRIBUTE
                | SET
                | PUSH
        ) {
            return Err(Error::UnknownType { byte: kind });
        }
        let start = self.pos + 1;
        let line = read_line(
            input,
            start,
            self.scanned.max(start),
            kind,
            self.limits.max_line_size,
        )?;
        let (text, after) = match line {
            Line::Complete(text, after) => (text, after),
            Line::Partial { scanned } => {
                self.scanned = scanned;
                return Ok(None);
            }
        };
        let value = match kind {
            SIMPLE_STRING => Value::SimpleString(text.to_vec()),
            SIMPLE_ERROR => Value::SimpleError(text.to_vec()),
            INTEGER => Value::Integer(parse_integer(text)?),
            NULL if text.is_empty() => Value::Null,
            NULL => return Err(Error::InvalidNull),
            BOOLEAN => match text {
                b"t" => Value::Boolean(true),
                b"f" => Value::Boolean(false),
                _ => return Err(Error::InvalidBoolean),
            },
            DOUBLE => Value::Double(parse_double(text).ok_or(Error::InvalidDouble)?),
            BIG_NUMBER => {
                let digits = text.strip_prefix(b"-").or(text.strip_prefix(b"+"));
                let digits = digits.unwrap_or(text);
                if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                    return Err(Error::InvalidBigNumber);
                }
                // ASCII, checked just above.
                Value::BigNumber(String::from_utf8_lossy(text).into_owned())
            }
            BULK_STRING | BULK_ERROR | VERBATIM_STRING => {
                let Some(len) = self.length(kind, text)? else {
                    return Ok(Some((Item::Value(Value::Null), after)));
                };
                // `len` is at most `max_bulk_size`, a usize: no overflow unless the
                // limit is near usize::MAX, which checked_add catches.
                let end = after.checked_add(len).ok_or(Error::BulkTooLarge {
                    kind,
                    len: len as u64,
                    limit: self.limits.max_bulk_size,
                })?;
                let Some(terminator) = input.get(end..end.saturating_add(2)) else {
                    return Ok(None);
                };
                if terminator.len() < 2 {
                    return Ok(None);
                }
                if terminator != b"\r\n" {
                    return Err(Error::BulkNotTerminated { kind });
                }
                let payload = &input[after..end];
                let value = match kind {
                    BULK_STRING => Value::BulkString(payload.to_vec()),
                    BULK_ERROR => Value::BulkError(payload.to_vec()),
                    _ => match payload {
                        [a, b, c, b':', text @ ..] => Value::VerbatimString {
                            format: [*a, *b, *c],
                            text: text.to_vec(),
                        },
                        _ => return Err(Error::InvalidVerbatim),
                    },
                };
                return Ok(Some((Item::Value(value), end + 2)));
            }
            // ARRAY | MAP | ATTRIBUTE | SET | PUSH
            _ => {
                let Some(count) = self.length(kind, text)? else {
                    return Ok(Some((Item::Value(Value::Null), after)));
                };
                let (open, values) = match kind {
                    ARRAY => (Open::Array, Some(count)),
                    SET => (Open::Set, Some(count)),
                    PUSH => (Open::Push, Some(count)),
                    MAP => (Open::Map, count.checked_mul(2)),
                    _ => (Open::Attribute, count.checked_mul(2)),
                };
                let values = values.ok_or(Error::AggregateTooLarge {
                    kind,
                    len: count as u64,
                    limit: self.limits.max_aggregate_len,
                })?;
                return Ok(Some((Item::Open(open, values), after)));
            }
        };
        Ok(Some((Item::Value(value), after)))
    }

    /// The length or count of a `$ ! = * ~ > % |` header; `None` for RESP2's `-1`
    /// null (on `$` and `*` only).
    fn length(&self, kind: u8, text: &[u8]) -> Result<Option<usize>, Error> {
        if text == b"?" {
            return Err(Error::Streamed { kind });
        }
        let (negative, digits) = match text.strip_prefix(b"-") {
            Some(digits) => (true, digits),
            None => (false, text),
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err(Error::InvalidLength { kind });
        }
        let magnitude = digits.iter().try_fold(0u64, |n, d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        });
        if negative {
            if digits == b"1" && matches!(kind, BULK_STRING | ARRAY) {
                return Ok(None);
            }
            let len = magnitude
                .and_then(|m| i64::try_from(m).ok())
                .map_or(i64::MIN, |m| -m);
            return Err(Error::NegativeLength { kind, len });
        }
        let is_blob = matches!(kind, BULK_STRING | BULK_ERROR | VERBATIM_STRING);
        let limit = if is_blob {
            self.limits.max_bulk_size
        } else {
            self.limits.max_aggregate_len
        };
        match magnitude.and_then(|m| usize::try_from(m).ok()) {
            Some(len) if len <= limit => Ok(Some(len)),
            _ => {
                let len = magnitude.unwrap_or(u64::MAX);
                Err(if is_blob {
                    Error::BulkTooLarge { kind, len, limit }
                } else {
                    Error::AggregateTooLarge { kind, len, limit }
                })
            }
        }
    }
}

enum Finished {
    Value(Value),
    Open(Frame),
}

/// Turns a frame with nothing left to read into its value, or into the next frame
/// (an attribute's pairs are followed by the value they describe).
fn finish(frame: Frame) -> Finished {
    if frame.remaining > 0 {
        return Finished::Open(frame);
    }
    let value = match frame.kind {
        Open::Array => Value::Array(frame.items),
        Open::Set => Value::Set(frame.items),
        Open::Push => Value::Push(frame.items),
        Open::Map => Value::Map(pairs(frame.items)),
        Open::Attribute => {
            return Finished::Open(Frame {
                kind: Open::Described(pairs(frame.items)),
                remaining: 1,
                items: Vec::with_capacity(1),
            })
        }
        Open::Described(attributes) => Value::Attribute {
            attributes,
            value: Box::new(frame.items.into_iter().next().unwrap_or(Value::Null)),
        },
    };
    Finished::Value(value)
}

/// Pairs up alternating keys and values (the decoder reads an even number).
fn pairs(items: Vec<Value>) -> Vec<(Value, Value)> {
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut items = items.into_iter();
    while let (Some(k), Some(v)) = (items.next(), items.next()) {
        out.push((k, v));
    }
    out
}

/// What [`read_line`] found.
enum Line<'a> {
    /// The line's text and the position after its CRLF.
    Complete(&'a [u8], usize),
    /// The CRLF has not arrived; the bytes before `scanned` hold no CR or LF (scan
    /// from there next time).
    Partial { scanned: usize },
}

/// The line starting at `start` up to its CRLF. The bytes from `start` to `from` are
/// known to hold no CR or LF (an earlier call scanned them), so the scan starts at
/// `from`: a line that arrives in many pieces costs time linear in its length.
fn read_line(
    input: &[u8],
    start: usize,
    from: usize,
    kind: u8,
    max: usize,
) -> Result<Line<'_>, Error> {
    let rest = input.get(start..).unwrap_or_default();
    // A CR at index `max` ends a line of `max` bytes, the longest allowed.
    let window = &rest[..rest.len().min(max.saturating_add(1))];
    let skip = (from - start).min(window.len());
    match memchr::memchr2(b'\r', b'\n', &window[skip..]).map(|i| i + skip) {
        Some(i) if window[i] == b'\n' => Err(Error::BareLf { kind }),
        Some(i) => match rest.get(i + 1) {
            None => Ok(Line::Partial { scanned: start + i }),
            Some(b'\n') => Ok(Line::Complete(&rest[..i], start + i + 2)),
            Some(_) => Err(Error::BareCr { kind }),
        },
        None if rest.len() > max => Err(Error::LineTooLong { limit: max }),
        None => Ok(Line::Partial {
            scanned: start + window.len(),
        }),
    }
}

/// `[+|-]<digits>` as an i64 (RESP3 §"Number").
fn parse_integer(text: &[u8]) -> Result<i64, Error> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Error::InvalidInteger);
    }
    // Accumulate negatively so that i64::MIN fits.
    let mut n: i64 = 0;
    for d in digits {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_sub(i64::from(d - b'0')))
            .ok_or(Error::IntegerOutOfRange)?;
    }
    if negative {
        Ok(n)
    } else {
        n.checked_neg().ok_or(Error::IntegerOutOfRange)
    }
}

/// RESP3 §"Double type": `[<+|->]<integral>[.<fractional>][<E|e>[sign]<exponent>]`,
/// or `inf`, `-inf`, `nan` (a sign before `nan` is accepted).
fn parse_double(text: &[u8]) -> Option<f64> {
    let unsigned = match text {
        [b'-' | b'+', rest @ ..] => rest,
        _ => text,
    };
    match unsigned {
        b"inf" => {
            return Some(if text[0] == b'-' {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        b"nan" => return Some(f64::NAN),
        _ => {}
    }
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let integral = digits(unsigned);
    if integral == 0 {
        return None;
    }
    let mut rest = &unsigned[integral..];
    if let [b'.', after @ ..] = rest {
        let fractional = digits(after);
        if fractional == 0 {
            return None;
        }
        rest = &after[fractional..];
    }
    if let [b'e' | b'E', after @ ..] = rest {
        let after = match after {
            [b'-' | b'+', a @ ..] => a,
            a => a,
        };
        let exponent = digits(after);
        if exponent == 0 {
            return None;
        }
        rest = &after[exponent..];
    }
    if !rest.is_empty() {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

impl fmt::Display for Value {
    /// A short human-readable form (for messages, not a wire format).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Integer(i) => write!(f, "{i}"),
            Value::Null => f.write_str("(nil)"),
            Value::Boolean(b) => write!(f, "{b}"),
            Value::Double(d) => write!(f, "{d}"),
            other => match other.as_bytes() {
                Some(b) => write!(f, "{}", String::from_utf8_lossy(b)),
                None => write!(f, "{other:?}"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(input: &[u8]) -> Value {
        match parse(input, &Limits::default()) {
            Ok(Some((value, consumed))) => {
                assert_eq!(consumed, input.len(), "consumed all of {input:?}");
                value
            }
            other => panic!("{input:?}: {other:?}"),
        }
    }

    fn err(input: &[u8]) -> Error {
        match parse(input, &Limits::default()) {
            Err(e) => e,
            other => panic!("{input:?}: expected an error, got {other:?}"),
        }
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// Every vector three ways: all at once, one byte more each time through one
    /// decoder (resuming), and with trailing bytes that it must leave alone.
    fn three_ways(input: &[u8], expected: &Value) {
        assert_eq!(&ok(input), expected);
        let mut decoder = Decoder::new(Limits::default());
        for end in 0..input.len() {
            assert_eq!(decoder.decode(&input[..end]), Ok(None), "prefix {end}");
        }
        assert_eq!(
            decoder.decode(input),
            Ok(Some((expected.clone(), input.len())))
        );
        let mut trailing = input.to_vec();
        trailing.extend_from_slice(b"+next\r\n");
        assert_eq!(
            parse(&trailing, &Limits::default()),
            Ok(Some((expected.clone(), input.len())))
        );
    }

    #[test]
    fn every_type() {
        let cases: Vec<(&[u8], Value)> = vec![
            (b"+OK\r\n", Value::SimpleString(b"OK".to_vec())),
            (b"+\r\n", Value::SimpleString(Vec::new())),
            (b"-ERR no\r\n", Value::SimpleError(b"ERR no".to_vec())),
            (b":0\r\n", Value::Integer(0)),
            (b":-12\r\n", Value::Integer(-12)),
            (b":+7\r\n", Value::Integer(7)),
            (b":9223372036854775807\r\n", Value::Integer(i64::MAX)),
            (b":-9223372036854775808\r\n", Value::Integer(i64::MIN)),
            (b"$5\r\nhello\r\n", bulk("hello")),
            (b"$0\r\n\r\n", bulk("")),
            (b"$4\r\na\r\nb\r\n", bulk("a\r\nb")),
            (b"$-1\r\n", Value::Null),
            (b"*-1\r\n", Value::Null),
            (b"*0\r\n", Value::Array(vec![])),
            (
                b"*2\r\n:1\r\n$1\r\nx\r\n",
                Value::Array(vec![Value::Integer(1), bulk("x")]),
            ),
            (b"_\r\n", Value::Null),
            (b"#t\r\n", Value::Boolean(true)),
            (b"#f\r\n", Value::Boolean(false)),
            (b",1.5\r\n", Value::Double(1.5)),
            (b",-2\r\n", Value::Double(-2.0)),
            (b",1.23E10\r\n", Value::Double(1.23e10)),
            (b",3e-2\r\n", Value::Double(0.03)),
            (b",inf\r\n", Value::Double(f64::INFINITY)),
            (b",-inf\r\n", Value::Double(f64::NEG_INFINITY)),
            (
                b"(3492890328409238509324850943850943825024385\r\n",
                Value::BigNumber("3492890328409238509324850943850943825024385".into()),
            ),
            (b"(-1\r\n", Value::BigNumber("-1".into())),
            (
                b"!21\r\nSYNTAX invalid syntax\r\n",
                Value::BulkError(b"SYNTAX invalid syntax".to_vec()),
            ),
            (
                b"=15\r\ntxt:Some string\r\n",
                Value::VerbatimString {
                    format: *b"txt",
                    text: b"Some string".to_vec(),
                },
            ),
            (
                b"=4\r\nmkd:\r\n",
                Value::VerbatimString {
                    format: *b"mkd",
                    text: Vec::new(),
                },
            ),
            (
                b"%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n",
                Value::Map(vec![
                    (Value::SimpleString(b"first".to_vec()), Value::Integer(1)),
                    (Value::SimpleString(b"second".to_vec()), Value::Integer(2)),
                ]),
            ),
            (b"%0\r\n", Value::Map(vec![])),
            (
                b"~2\r\n+a\r\n#f\r\n",
                Value::Set(vec![Value::SimpleString(b"a".to_vec()), Value::Boolean(false)]),
            ),
            (
                b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
                Value::Push(vec![bulk("message"), bulk("ch"), bulk("hi")]),
            ),
            // The spec's attribute example, around an array.
            (
                b"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
                Value::Attribute {
                    attributes: vec![(
                        Value::SimpleString(b"key-popularity".to_vec()),
                        Value::Map(vec![
                            (bulk("a"), Value::Double(0.1923)),
                            (bulk("b"), Value::Double(0.0012)),
                        ]),
                    )],
                    value: Box::new(Value::Array(vec![
                        Value::Integer(2039123),
                        Value::Integer(9543892),
                    ])),
                },
            ),
            // An attribute inside an array, and one with no pairs.
            (
                b"*2\r\n|1\r\n+ttl\r\n:3600\r\n:2\r\n|0\r\n_\r\n",
                Value::Array(vec![
                    Value::Attribute {
                        attributes: vec![(
                            Value::SimpleString(b"ttl".to_vec()),
                            Value::Integer(3600),
                        )],
                        value: Box::new(Value::Integer(2)),
                    },
                    Value::Attribute {
                        attributes: vec![],
                        value: Box::new(Value::Null),
                    },
                ]),
            ),
            (
                b"*3\r\n*1\r\n*0\r\n%1\r\n~0\r\n*-1\r\n$-1\r\n",
                Value::Array(vec![
                    Value::Array(vec![Value::Array(vec![])]),
                    Value::Map(vec![(Value::Set(vec![]), Value::Null)]),
                    Value::Null,
                ]),
            ),
        ];
        for (input, expected) in &cases {
            three_ways(input, expected);
        }
    }

    #[test]
    fn nan() {
        for input in [&b",nan\r\n"[..], b",-nan\r\n"] {
            match ok(input) {
                Value::Double(d) => assert!(d.is_nan()),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn strict_checks() {
        use Error::*;
        let cases: Vec<(&[u8], Error)> = vec![
            (b"@x\r\n", UnknownType { byte: b'@' }),
            (b"x", UnknownType { byte: b'x' }),
            (b"*1\r\n?\r\n", UnknownType { byte: b'?' }),
            (b"+O\rK\r\n", BareCr { kind: b'+' }),
            (b"+O\nK\r\n", BareLf { kind: b'+' }),
            (b"-E\rR\r\n", BareCr { kind: b'-' }),
            (b":1\r2\r\n", BareCr { kind: b':' }),
            (b"$3\r\nabcd\r\n", BulkNotTerminated { kind: b'$' }),
            (b"$3\r\nab\r\n\r\n", BulkNotTerminated { kind: b'$' }),
            (b"!1\r\nab\r\n", BulkNotTerminated { kind: b'!' }),
            (
                b"$-2\r\n",
                NegativeLength {
                    kind: b'$',
                    len: -2,
                },
            ),
            (
                b"*-5\r\n",
                NegativeLength {
                    kind: b'*',
                    len: -5,
                },
            ),
            (
                b"%-1\r\n",
                NegativeLength {
                    kind: b'%',
                    len: -1,
                },
            ),
            (
                b"!-1\r\n",
                NegativeLength {
                    kind: b'!',
                    len: -1,
                },
            ),
            (
                b"~-1\r\n",
                NegativeLength {
                    kind: b'~',
                    len: -1,
                },
            ),
            (b"$-0x\r\n", InvalidLength { kind: b'$' }),
            (b"$+1\r\n", InvalidLength { kind: b'$' }),
            (b"$ 1\r\n", InvalidLength { kind: b'$' }),
            (b"$\r\n", InvalidLength { kind: b'$' }),
            (b"*1x\r\n", InvalidLength { kind: b'*' }),
            (b":9223372036854775808\r\n", IntegerOutOfRange),
            (b":-9223372036854775809\r\n", IntegerOutOfRange),
            (b":99999999999999999999999\r\n", IntegerOutOfRange),
            (b":\r\n", InvalidInteger),
            (b":1.0\r\n", InvalidInteger),
            (b":-\r\n", InvalidInteger),
            (b",\r\n", InvalidDouble),
            (b",1.\r\n", InvalidDouble),
            (b",.5\r\n", InvalidDouble),
            (b",infinity\r\n", InvalidDouble),
            (b",1e\r\n", InvalidDouble),
            (b",0x10\r\n", InvalidDouble),
            (b"(12a\r\n", InvalidBigNumber),
            (b"(\r\n", InvalidBigNumber),
            (b"#x\r\n", InvalidBoolean),
            (b"#\r\n", InvalidBoolean),
            (b"_x\r\n", InvalidNull),
            (b"=3\r\ntxt\r\n", InvalidVerbatim),
            (b"=4\r\ntxtx\r\n", InvalidVerbatim),
            (b"$?\r\n", Streamed { kind: b'$' }),
            (b"*?\r\n", Streamed { kind: b'*' }),
        ];
        for (input, expected) in cases {
            assert_eq!(err(input), expected, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn limits() {
        let limits = Limits {
            max_bulk_size: 4,
            max_aggregate_len: 2,
            max_depth: 3,
            max_line_size: 8,
        };
        let p = |input: &[u8]| parse(input, &limits);
        assert!(matches!(p(b"$4\r\nabcd\r\n"), Ok(Some(_))));
        // Refused from the header alone, before any payload arrives.
        assert_eq!(
            p(b"$5\r\n"),
            Err(Error::BulkTooLarge {
                kind: b'$',
                len: 5,
                limit: 4
            })
        );
        assert_eq!(
            p(b"$99999999\r\n"),
            Err(Error::BulkTooLarge {
                kind: b'$',
                len: 99_999_999,
                limit: 4
            })
        );
        assert_eq!(
            parse(b"$99999999999999999999999\r\n", &Limits::default()),
            Err(Error::BulkTooLarge {
                kind: b'$',
                len: u64::MAX,
                limit: 512 << 20
            })
        );
        assert!(matches!(
            p(b"=5\r\n"),
            Err(Error::BulkTooLarge { kind: b'=', .. })
        ));
        assert!(matches!(p(b"*2\r\n_\r\n_\r\n"), Ok(Some(_))));
        assert_eq!(
            p(b"*3\r\n"),
            Err(Error::AggregateTooLarge {
                kind: b'*',
                len: 3,
                limit: 2
            })
        );
        assert!(matches!(
            p(b"%3\r\n"),
            Err(Error::AggregateTooLarge { kind: b'%', .. })
        ));
        assert!(matches!(p(b"*1\r\n*1\r\n*0\r\n"), Ok(Some(_))));
        assert_eq!(
            p(b"*1\r\n*1\r\n*1\r\n*0\r\n"),
            Err(Error::TooDeep { limit: 3 })
        );
        assert!(matches!(p(b"+12345678\r\n"), Ok(Some(_))));
        assert_eq!(p(b"+123456789"), Err(Error::LineTooLong { limit: 8 }));
        assert_eq!(p(b"+12345678"), Ok(None));
        assert_eq!(p(b"+12345678\r"), Ok(None));
    }

    #[test]
    fn deep_nesting_is_refused_without_recursion() {
        // A million nested arrays: refused at the depth limit; with the limit lifted,
        // parsed on a small thread stack because the walk is iterative.
        let mut input = b"*1\r\n".repeat(1_000_000);
        assert_eq!(
            parse(&input, &Limits::default()),
            Err(Error::TooDeep { limit: 128 })
        );
        input.extend_from_slice(b":1\r\n");
        let deep = Limits {
            max_depth: usize::MAX,
            ..Limits::default()
        };
        let handle = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || {
                let (value, consumed) = parse(&input, &deep).unwrap().unwrap();
                assert_eq!(consumed, input.len());
                // Take it apart iteratively: dropping it would recurse.
                let mut value = value;
                let mut depth = 0;
                while let Value::Array(mut items) = value {
                    value = items.pop().unwrap();
                    depth += 1;
                }
                assert_eq!((depth, value), (1_000_000, Value::Integer(1)));
            })
            .unwrap();
        handle.join().unwrap();
    }

    #[test]
    fn huge_counts_do_not_allocate() {
        // 16 million elements announced, three bytes sent: no big reservation.
        let mut decoder = Decoder::new(Limits::default());
        assert_eq!(decoder.decode(b"*16777216\r\n_\r\n"), Ok(None));
        assert!(decoder.stack[0].items.capacity() <= 64);
    }

    #[test]
    fn commands() {
        let mut out = Vec::new();
        write_command(&mut out, &[&b"SET"[..], b"k", b"a\r\nb", b""]);
        assert_eq!(
            out,
            b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n$0\r\n\r\n"
        );
        // A command parses back as the array of bulk strings it is.
        assert_eq!(
            ok(&out),
            Value::Array(vec![bulk("SET"), bulk("k"), bulk("a\r\nb"), bulk("")])
        );
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let line = "[a-zA-Z0-9 :._-]{0,12}".prop_map(String::into_bytes);
        let leaf = prop_oneof![
            line.clone().prop_map(Value::SimpleString),
            line.prop_map(Value::SimpleError),
            any::<i64>().prop_map(Value::Integer),
            proptest::collection::vec(any::<u8>(), 0..24).prop_map(Value::BulkString),
            Just(Value::Null),
            any::<bool>().prop_map(Value::Boolean),
            any::<f64>()
                .prop_filter("nan is not equal to itself", |d| !d.is_nan())
                .prop_map(Value::Double),
            "[+-]?[0-9]{1,40}".prop_map(Value::BigNumber),
            proptest::collection::vec(any::<u8>(), 0..24).prop_map(Value::BulkError),
            ("[a-z]{3}", proptest::collection::vec(any::<u8>(), 0..24)).prop_map(|(f, text)| {
                let f = f.as_bytes();
                Value::VerbatimString {
                    format: [f[0], f[1], f[2]],
                    text,
                }
            }),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            let pairs = proptest::collection::vec((inner.clone(), inner.clone()), 0..4);
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Set),
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Push),
                pairs.clone().prop_map(Value::Map),
                (pairs, inner).prop_map(|(attributes, value)| Value::Attribute {
                    attributes,
                    value: Box::new(value),
                }),
            ]
        })
    }

    proptest! {
        #[test]
        fn encode_then_parse_gives_the_value_back(value in arb_value()) {
            let mut wire = Vec::new();
            value.encode(&mut wire);
            prop_assert_eq!(ok(&wire), value);
        }

        #[test]
        fn any_split_gives_the_same_values(
            values in proptest::collection::vec(arb_value(), 1..4),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let mut wire = Vec::new();
            for v in &values {
                v.encode(&mut wire);
            }
            // Feed the stream in pieces through one decoder, the way a driver does.
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(wire.len() + 1)).collect();
            cuts.push(wire.len());
            cuts.sort_unstable();
            let mut decoder = Decoder::new(Limits::default());
            let (mut start, mut got) = (0, Vec::new());
            for end in cuts {
                while let Some((value, consumed)) = decoder.decode(&wire[start..end]).unwrap() {
                    got.push(value);
                    start += consumed;
                }
            }
            prop_assert_eq!(start, wire.len());
            prop_assert_eq!(got, values);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let limits = Limits { max_bulk_size: 64, max_aggregate_len: 8, max_depth: 4, max_line_size: 32 };
            if let Ok(Some((_, consumed))) = parse(&bytes, &limits) {
                prop_assert!(consumed <= bytes.len());
            }
        }

        #[test]
        fn mutated_frames_never_panic(value in arb_value(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let mut wire = Vec::new();
            value.encode(&mut wire);
            let i = at.index(wire.len());
            wire[i] = byte;
            // Resuming byte by byte gives the same outcome as parsing at once.
            let whole = parse(&wire, &Limits::default());
            let mut decoder = Decoder::new(Limits::default());
            let mut stepped = Ok(None);
            for end in 0..=wire.len() {
                stepped = decoder.decode(&wire[..end]);
                if !matches!(stepped, Ok(None)) {
                    break;
                }
            }
            match (&whole, &stepped) {
                (Ok(Some((a, n))), Ok(Some((b, m)))) => {
                    prop_assert_eq!(n, m);
                    // NaN may come from a mutation; compare the re-encodings.
                    let (mut x, mut y) = (Vec::new(), Vec::new());
                    a.encode(&mut x);
                    b.encode(&mut y);
                    prop_assert_eq!(x, y);
                }
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                (Ok(None), Ok(None)) => {}
                _ => prop_assert!(false, "whole {:?} stepped {:?}", whole, stepped),
            }
        }
    }
}

//! Decoder and encoder for the chunked transfer coding
//! ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
//!
//! ```text
//! chunked-body   = *chunk
//!                  last-chunk
//!                  trailer-section
//!                  CRLF
//!
//! chunk          = chunk-size [ chunk-ext ] CRLF
//!                  chunk-data CRLF
//! chunk-size     = 1*HEXDIG
//! last-chunk     = 1*("0") [ chunk-ext ] CRLF
//!
//! chunk-data     = 1*OCTET ; a sequence of chunk-size octets
//!
//! chunk-ext      = *( BWS ";" BWS chunk-ext-name
//!                     [ BWS "=" BWS chunk-ext-val ] )
//! chunk-ext-name = token
//! chunk-ext-val  = token / quoted-string
//!
//! trailer-section = *( field-line CRLF )
//! ```

use core::ops::Range;

use crate::chars::{is_ows, is_tchar, FIELD_VALUE, HEX_VALUE, QDTEXT};
use crate::error::Error;
use crate::request::FieldLine;
use crate::response::write_field_line;

/// At most this many hex digits in a chunk-size, so it fits in a `u64`.
const MAX_CHUNK_SIZE_DIGITS: u8 = 16;

/// Limits for a chunked body. Going over one is a typed [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkedLimits {
    /// Maximum length in bytes of one chunk-size line's chunk-ext (everything
    /// between the hex digits and the CRLF; default 1024). Longer is
    /// [`Error::ChunkExtTooLong`]
    /// ([RFC 9112 §7.1.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1.1)).
    pub max_chunk_ext_size: usize,
    /// Maximum length in bytes of all the chunk-exts of one body together
    /// (default 16 KiB, as hyper). Longer is [`Error::ChunkExtsTooLarge`].
    /// Chunk extensions carry no content, so without this bound a body of
    /// one-byte chunks could bring `max_chunk_ext_size` bytes of framing per
    /// content byte past `max_body_size`.
    pub max_chunk_exts_size: usize,
    /// Maximum size in bytes of the trailer section, its field lines and the
    /// final CRLF included (default 8 KiB). Larger is
    /// [`Error::TrailerSectionTooLarge`]
    /// ([RFC 9112 §7.1.2](https://www.rfc-editor.org/rfc/rfc9112#section-7.1.2)).
    pub max_trailer_section_size: usize,
    /// Maximum sum of all chunk sizes in bytes, i.e. the decoded content
    /// length (default `u64::MAX`, no limit). More is
    /// [`Error::BodyTooLarge`], reported as soon as a chunk-size would go
    /// over it.
    pub max_body_size: u64,
}

impl Default for ChunkedLimits {
    fn default() -> Self {
        Self {
            max_chunk_ext_size: 1024,
            max_chunk_exts_size: 16 * 1024,
            max_trailer_section_size: 8 * 1024,
            max_body_size: u64::MAX,
        }
    }
}

/// The result of one [`ChunkedDecoder::decode`] call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// How many bytes from the front of the input were used, framing and
    /// chunk-data together. The caller removes them after it has handled
    /// `event` and passes the remaining bytes (plus new ones) next time.
    pub consumed: usize,
    /// What the consumed bytes contained.
    pub event: ChunkEvent,
}

/// What [`ChunkedDecoder::decode`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkEvent {
    /// Content bytes: this non-empty range of the input is chunk-data
    /// (`range.end <= consumed`). Next: use the bytes, then call `decode`
    /// again with the input after `consumed`.
    Data(Range<usize>),
    /// All input was used (it held framing only, or nothing). Next: call
    /// `decode` again when more bytes arrive.
    NeedMore,
    /// The body is over: the trailer section's final CRLF was consumed. The
    /// bytes after `consumed` belong to the next message.
    End,
}

/// Where the decoder is in the chunked body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In the hex digits of a chunk-size (`digits` read so far).
    Size { digits: u8 },
    /// In the chunk-ext of a chunk-size line.
    Ext(Ext),
    /// Read the CR that ends a chunk-size line.
    SizeLf,
    /// In chunk-data; `ChunkedDecoder::remaining` bytes to go.
    Data,
    /// After chunk-data, expecting CR.
    DataCr,
    /// After chunk-data and CR, expecting LF.
    DataLf,
    /// At the start of a trailer field line or of the final CRLF.
    TrailerLineStart,
    /// In a trailer field name.
    TrailerName,
    /// Whitespace after a trailer field name (an error once classified).
    TrailerNameWhitespace,
    /// In a trailer field value.
    TrailerValue,
    /// Read the CR that ends a trailer field line.
    TrailerLf,
    /// Read the CR of the final CRLF.
    FinalLf,
    /// The chunked body is complete.
    Done,
    /// Failed with this error, which every later call returns.
    Failed(Error),
}

/// Where the decoder is inside a chunk-ext.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ext {
    /// BWS after the chunk-size or after an extension value: `;` next.
    BeforeSemicolon,
    /// After `;` (and BWS): a chunk-ext-name next.
    BeforeName,
    /// In a chunk-ext-name.
    Name,
    /// BWS after a chunk-ext-name: `=` or `;` next.
    AfterName,
    /// After `=` (and BWS): a chunk-ext-val next.
    BeforeValue,
    /// In a token chunk-ext-val.
    TokenValue,
    /// In a quoted-string chunk-ext-val.
    QuotedValue,
    /// After a backslash in a quoted-string (quoted-pair).
    QuotedPair,
    /// After the closing DQUOTE of a quoted-string.
    AfterQuoted,
}

/// An incremental decoder for one chunked body
/// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
///
/// Call [`decode`](Self::decode) with the bytes that follow the head (or
/// follow what earlier calls consumed) until it returns [`ChunkEvent::End`].
/// The input can be split anywhere: framing bytes are consumed into the
/// decoder's state, so the caller never has to keep them. Chunk extensions
/// are checked against the grammar and skipped; trailer fields are checked
/// like header field lines and discarded, which RFC 9112 §7.1.2 allows.
///
/// # Strictness
///
/// Every line of the chunked framing must end with CRLF: unlike the request
/// head, a bare LF is rejected here, and so is whitespace after the
/// chunk-size that does not lead to a `;`. Front-ends that disagree on these
/// details can be led into request smuggling (see `DESIGN.md`). Errors are
/// sticky: after one, every call returns it again until
/// [`reset`](Self::reset).
///
/// # Examples
///
/// ```
/// use keel_http::{ChunkEvent, ChunkedDecoder, ChunkedLimits};
///
/// let mut body = &b"4\r\nWiki\r\n6;lang=en\r\npedia \r\n0\r\nExpires: never\r\n\r\nnext"[..];
/// let mut decoder = ChunkedDecoder::new(ChunkedLimits::default());
/// let mut content = Vec::new();
/// loop {
///     let decoded = decoder.decode(body)?;
///     match decoded.event {
///         ChunkEvent::Data(range) => content.extend_from_slice(&body[range]),
///         ChunkEvent::NeedMore => panic!("the whole body is here"),
///         ChunkEvent::End => {
///             body = &body[decoded.consumed..];
///             break;
///         }
///     }
///     body = &body[decoded.consumed..];
/// }
/// assert_eq!(content, b"Wikipedia ");
/// assert_eq!(body, b"next");
/// assert!(decoder.is_done());
/// # Ok::<(), keel_http::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ChunkedDecoder {
    limits: ChunkedLimits,
    state: State,
    /// The chunk-size being read, then the chunk-data bytes still to come.
    remaining: u64,
    /// Sum of the chunk sizes read so far, in bytes.
    body_size: u64,
    /// Bytes of chunk-ext read on the current chunk-size line.
    ext_size: usize,
    /// Bytes of chunk-ext read in the whole body.
    exts_size: usize,
    /// Bytes of the trailer section read so far.
    trailer_size: usize,
    /// Whether a trailer field line was read (for obs-fold detection).
    has_trailer_fields: bool,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new(ChunkedLimits::default())
    }
}

impl ChunkedDecoder {
    /// Creates a decoder positioned at the first chunk-size of a body.
    #[must_use]
    pub fn new(limits: ChunkedLimits) -> Self {
        Self {
            limits,
            state: State::Size { digits: 0 },
            remaining: 0,
            body_size: 0,
            ext_size: 0,
            exts_size: 0,
            trailer_size: 0,
            has_trailer_fields: false,
        }
    }

    /// Makes the decoder ready for a new chunked body (clearing a sticky
    /// error), keeping its limits.
    pub fn reset(&mut self) {
        *self = Self::new(self.limits);
    }

    /// Whether the whole chunked body, trailer section included, was decoded.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input`, the body bytes not consumed by earlier calls
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
    ///
    /// Consumes framing bytes until it reaches chunk-data, the end of the
    /// body or the end of `input`, and returns one event:
    /// [`ChunkEvent::Data`] with a non-empty range of `input` (at most the
    /// rest of the current chunk), [`ChunkEvent::NeedMore`] after using all of
    /// `input`, or [`ChunkEvent::End`]. `consumed <= input.len()` always.
    /// After `End`, further calls return `End` with `consumed == 0`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidChunkSize`], [`Error::ChunkSizeOverflow`],
    /// [`Error::InvalidChunkExt`], [`Error::ChunkExtTooLong`],
    /// [`Error::ChunkExtsTooLarge`],
    /// [`Error::InvalidChunkData`], [`Error::BodyTooLarge`], trailer field
    /// errors ([`Error::InvalidFieldName`], [`Error::WhitespaceBeforeColon`],
    /// [`Error::InvalidFieldValue`], [`Error::ObsFold`]) and
    /// [`Error::TrailerSectionTooLarge`]. Errors are sticky.
    ///
    /// # Examples
    ///
    /// ```
    /// use keel_http::{ChunkEvent, ChunkedDecoder, ChunkedLimits, Decoded};
    ///
    /// let mut decoder = ChunkedDecoder::new(ChunkedLimits::default());
    /// // The input may stop anywhere, even inside the chunk-size line.
    /// assert_eq!(decoder.decode(b"5\r")?, Decoded { consumed: 2, event: ChunkEvent::NeedMore });
    /// assert_eq!(decoder.decode(b"\nhel")?, Decoded { consumed: 4, event: ChunkEvent::Data(1..4) });
    /// assert_eq!(decoder.decode(b"lo\r\n0\r\n\r\n")?, Decoded { consumed: 2, event: ChunkEvent::Data(0..2) });
    /// assert_eq!(decoder.decode(b"\r\n0\r\n\r\n")?, Decoded { consumed: 7, event: ChunkEvent::End });
    /// # Ok::<(), keel_http::Error>(())
    /// ```
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, Error> {
        if let State::Failed(error) = self.state {
            return Err(error);
        }
        let result = self.decode_inner(input);
        if let Err(error) = result {
            self.state = State::Failed(error);
        }
        result
    }

    fn decode_inner(&mut self, input: &[u8]) -> Result<Decoded, Error> {
        let mut pos = 0;
        loop {
            match self.state {
                State::Data => {
                    let available = input.len() - pos;
                    if available == 0 {
                        return Ok(need_more(pos));
                    }
                    let n = usize::try_from(self.remaining).map_or(available, |r| r.min(available));
                    // n <= remaining, since it is the minimum of both.
                    self.remaining -= n as u64;
                    if self.remaining == 0 {
                        self.state = State::DataCr;
                    }
                    return Ok(Decoded {
                        consumed: pos + n,
                        event: ChunkEvent::Data(pos..pos + n),
                    });
                }
                State::Done => {
                    return Ok(Decoded {
                        consumed: pos,
                        event: ChunkEvent::End,
                    })
                }
                _ => {}
            }
            let Some(&byte) = input.get(pos) else {
                return Ok(need_more(pos));
            };
            pos += 1;
            self.state = self.step(byte)?;
        }
    }

    /// Takes one framing byte and returns the next state.
    fn step(&mut self, b: u8) -> Result<State, Error> {
        let next = match self.state {
            State::Size { digits } => {
                let value = HEX_VALUE[usize::from(b)];
                if value != 0xff {
                    if digits == MAX_CHUNK_SIZE_DIGITS {
                        return Err(Error::ChunkSizeOverflow);
                    }
                    // At most 16 hex digits: the shift never loses bits.
                    self.remaining = (self.remaining << 4) | u64::from(value);
                    return Ok(State::Size { digits: digits + 1 });
                }
                if digits == 0 {
                    return Err(Error::InvalidChunkSize);
                }
                self.body_size = self
                    .body_size
                    .checked_add(self.remaining)
                    .filter(|&total| total <= self.limits.max_body_size)
                    .ok_or(Error::BodyTooLarge {
                        limit: self.limits.max_body_size,
                    })?;
                match b {
                    b'\r' => State::SizeLf,
                    b';' => self.ext_byte(Ext::BeforeName)?,
                    b' ' | b'\t' => self.ext_byte(Ext::BeforeSemicolon)?,
                    _ => return Err(Error::InvalidChunkSize),
                }
            }
            State::Ext(ext) => {
                if b == b'\r' {
                    match ext {
                        Ext::Name | Ext::TokenValue | Ext::AfterQuoted => State::SizeLf,
                        _ => return Err(Error::InvalidChunkExt),
                    }
                } else {
                    let next = next_ext(ext, b).ok_or(Error::InvalidChunkExt)?;
                    self.ext_byte(next)?
                }
            }
            State::SizeLf => {
                if b != b'\n' {
                    return Err(Error::InvalidChunkSize);
                }
                self.ext_size = 0;
                if self.remaining == 0 {
                    State::TrailerLineStart
                } else {
                    State::Data
                }
            }
            State::DataCr if b == b'\r' => State::DataLf,
            State::DataLf if b == b'\n' => State::Size { digits: 0 },
            State::DataCr | State::DataLf => return Err(Error::InvalidChunkData),
            State::TrailerLineStart
            | State::TrailerName
            | State::TrailerNameWhitespace
            | State::TrailerValue
            | State::TrailerLf
            | State::FinalLf => {
                self.trailer_size += 1;
                if self.trailer_size > self.limits.max_trailer_section_size {
                    return Err(Error::TrailerSectionTooLarge {
                        limit: self.limits.max_trailer_section_size,
                    });
                }
                self.trailer_step(b)?
            }
            // `decode_inner` handles these without calling `step`, and a
            // failed decoder returns before.
            State::Data | State::Done | State::Failed(_) => {
                unreachable!("ChunkedDecoder::step in state {:?}", self.state)
            }
        };
        Ok(next)
    }

    /// Counts one chunk-ext byte against the limits (of the line and of the
    /// body) and enters `next`.
    fn ext_byte(&mut self, next: Ext) -> Result<State, Error> {
        self.ext_size += 1;
        if self.ext_size > self.limits.max_chunk_ext_size {
            return Err(Error::ChunkExtTooLong {
                limit: self.limits.max_chunk_ext_size,
            });
        }
        self.exts_size += 1;
        if self.exts_size > self.limits.max_chunk_exts_size {
            return Err(Error::ChunkExtsTooLarge {
                limit: self.limits.max_chunk_exts_size,
            });
        }
        Ok(State::Ext(next))
    }

    /// One byte of the trailer section: `*( field-line CRLF ) CRLF`, where
    /// `field-line = field-name ":" OWS field-value OWS`.
    fn trailer_step(&mut self, b: u8) -> Result<State, Error> {
        let next = match (self.state, b) {
            (State::TrailerLineStart, b'\r') => State::FinalLf,
            (State::TrailerLineStart, b' ' | b'\t') if self.has_trailer_fields => {
                return Err(Error::ObsFold)
            }
            (State::TrailerLineStart | State::TrailerName, b) if is_tchar(b) => State::TrailerName,
            (State::TrailerName, b':') => State::TrailerValue,
            (State::TrailerName | State::TrailerNameWhitespace, b) if is_ows(b) => {
                State::TrailerNameWhitespace
            }
            (State::TrailerNameWhitespace, b':') => return Err(Error::WhitespaceBeforeColon),
            (State::TrailerValue, b'\r') => State::TrailerLf,
            (State::TrailerValue, b) if FIELD_VALUE[usize::from(b)] => State::TrailerValue,
            (State::TrailerValue | State::TrailerLf, _) => {
                if b == b'\n' && self.state == State::TrailerLf {
                    self.has_trailer_fields = true;
                    State::TrailerLineStart
                } else {
                    return Err(Error::InvalidFieldValue);
                }
            }
            (State::FinalLf, b'\n') => State::Done,
            _ => return Err(Error::InvalidFieldName),
        };
        Ok(next)
    }
}

/// The chunk-ext state after byte `b` (not CR) in state `ext`, or `None` if
/// `b` cannot appear there.
fn next_ext(ext: Ext, b: u8) -> Option<Ext> {
    let next = match (ext, b) {
        (Ext::BeforeSemicolon, b' ' | b'\t') => Ext::BeforeSemicolon,
        (
            Ext::BeforeSemicolon | Ext::AfterName | Ext::Name | Ext::TokenValue | Ext::AfterQuoted,
            b';',
        ) => Ext::BeforeName,
        (Ext::BeforeName, b' ' | b'\t') => Ext::BeforeName,
        (Ext::BeforeName | Ext::Name, b) if is_tchar(b) => Ext::Name,
        (Ext::Name | Ext::AfterName, b' ' | b'\t') => Ext::AfterName,
        (Ext::Name | Ext::AfterName, b'=') => Ext::BeforeValue,
        (Ext::BeforeValue, b' ' | b'\t') => Ext::BeforeValue,
        (Ext::BeforeValue, b'"') => Ext::QuotedValue,
        (Ext::BeforeValue | Ext::TokenValue, b) if is_tchar(b) => Ext::TokenValue,
        (Ext::TokenValue | Ext::AfterQuoted, b' ' | b'\t') => Ext::BeforeSemicolon,
        (Ext::QuotedValue, b'"') => Ext::AfterQuoted,
        (Ext::QuotedValue, b'\\') => Ext::QuotedPair,
        (Ext::QuotedValue, b) if QDTEXT[usize::from(b)] => Ext::QuotedValue,
        // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
        (Ext::QuotedPair, b) if b == b'\t' || b == b' ' || (b >= 0x21 && b != 0x7f) => {
            Ext::QuotedValue
        }
        _ => return None,
    };
    Some(next)
}

fn need_more(consumed: usize) -> Decoded {
    Decoded {
        consumed,
        event: ChunkEvent::NeedMore,
    }
}

// ---- Encoding ------------------------------------------------------------

/// Appends the line that starts a chunk of `len` bytes of chunk-data:
/// `chunk-size CRLF`, the size in lowercase hexadecimal without leading zeros
/// and no chunk-ext
/// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
///
/// The caller sends the `len` data bytes itself after `out` (so a large body
/// never has to be copied), then the CRLF that ends chunk-data. `len == 0`
/// appends nothing: a zero chunk-size would be the last-chunk, which
/// [`write_last_chunk`] writes.
///
/// # Examples
///
/// ```
/// let mut out = Vec::new();
/// keel_http::write_chunk_size_line(&mut out, 26);
/// out.extend_from_slice(b"abcdefghijklmnopqrstuvwxyz\r\n");
/// keel_http::write_last_chunk(&mut out, &[]);
/// assert_eq!(out, b"1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n");
/// ```
pub fn write_chunk_size_line(out: &mut Vec<u8>, len: u64) {
    if len == 0 {
        return;
    }
    write_hex(out, len);
    out.extend_from_slice(b"\r\n");
}

/// Appends one whole chunk holding `data`: `chunk-size CRLF chunk-data CRLF`
/// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
/// Empty `data` appends nothing (an empty chunk would be the last-chunk).
///
/// # Examples
///
/// ```
/// let mut out = Vec::new();
/// keel_http::write_chunk(&mut out, b"hello");
/// keel_http::write_chunk(&mut out, b"");
/// keel_http::write_last_chunk(&mut out, &[]);
/// assert_eq!(out, b"5\r\nhello\r\n0\r\n\r\n");
/// ```
pub fn write_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    write_chunk_size_line(out, data.len() as u64);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends the end of a chunked body: the last-chunk `0 CRLF`, the
/// `trailers` as field lines, and the CRLF that ends the trailer section
/// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1),
/// [§7.1.2](https://www.rfc-editor.org/rfc/rfc9112#section-7.1.2)). Without
/// trailers that is `0\r\n\r\n`.
///
/// The CRLF that ends the previous chunk's data is not included (see
/// [`write_chunk_size_line`]). Trailer names and values must be valid
/// ([`is_valid_field_name`](crate::is_valid_field_name),
/// [`is_valid_field_value`](crate::is_valid_field_value)), as for
/// [`write_field_line`](crate::write_field_line); this is checked in debug
/// builds only.
///
/// # Examples
///
/// ```
/// use keel_http::FieldLine;
///
/// let mut out = Vec::new();
/// let trailers = [FieldLine { name: b"Digest", value: b"sha-256=abc" }];
/// keel_http::write_last_chunk(&mut out, &trailers);
/// assert_eq!(out, b"0\r\nDigest: sha-256=abc\r\n\r\n");
/// ```
pub fn write_last_chunk(out: &mut Vec<u8>, trailers: &[FieldLine<'_>]) {
    out.extend_from_slice(b"0\r\n");
    for field in trailers {
        write_field_line(out, field.name, field.value);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `n` in lowercase hexadecimal, without leading zeros, as a
/// chunk-size ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
fn write_hex(out: &mut Vec<u8>, n: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 16];
    let mut start = buf.len();
    let mut n = n;
    loop {
        start -= 1;
        // `n & 0xf` is 0..=15.
        buf[start] = DIGITS[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_hex_formats_chunk_sizes() {
        for (n, hex) in [
            (0, "0"),
            (1, "1"),
            (15, "f"),
            (16, "10"),
            (u64::MAX, "ffffffffffffffff"),
        ] {
            let mut out = Vec::new();
            write_hex(&mut out, n);
            assert_eq!(out, hex.as_bytes());
        }
    }

    #[test]
    fn chunks_and_last_chunks_are_framed() {
        let mut out = Vec::new();
        write_chunk_size_line(&mut out, 0);
        write_chunk(&mut out, b"");
        assert_eq!(out, b"", "no empty chunk: it would be the last-chunk");
        write_chunk(&mut out, &[b'x'; 300]);
        write_chunk_size_line(&mut out, 2);
        out.extend_from_slice(b"yz\r\n");
        write_last_chunk(
            &mut out,
            &[
                FieldLine {
                    name: b"A",
                    value: b"1",
                },
                FieldLine {
                    name: b"b-2",
                    value: b"",
                },
            ],
        );
        let mut expected = b"12c\r\n".to_vec();
        expected.extend_from_slice(&[b'x'; 300]);
        expected.extend_from_slice(b"\r\n2\r\nyz\r\n0\r\nA: 1\r\nb-2: \r\n\r\n");
        assert_eq!(out, expected);
    }

    /// Feeds `input` in pieces of `piece` bytes the way a driver would (keep
    /// unconsumed bytes, append new ones) and returns the content and the
    /// number of bytes consumed when `End` came.
    fn decode_split(
        limits: ChunkedLimits,
        input: &[u8],
        piece: usize,
    ) -> Result<(Vec<u8>, usize), Error> {
        let mut decoder = ChunkedDecoder::new(limits);
        let mut content = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut fed = 0;
        let mut consumed_total = 0;
        loop {
            let Decoded { consumed, event } = decoder.decode(&pending)?;
            assert!(consumed <= pending.len());
            consumed_total += consumed;
            match event {
                ChunkEvent::Data(range) => {
                    assert!(!range.is_empty() && range.end <= consumed);
                    content.extend_from_slice(&pending[range]);
                    pending.drain(..consumed);
                }
                ChunkEvent::NeedMore => {
                    assert_eq!(consumed, pending.len(), "NeedMore uses all input");
                    assert!(fed < input.len(), "input ended before End");
                    pending.clear();
                    let end = (fed + piece).min(input.len());
                    pending.extend_from_slice(&input[fed..end]);
                    fed = end;
                }
                ChunkEvent::End => {
                    assert!(decoder.is_done());
                    return Ok((content, consumed_total));
                }
            }
        }
    }

    /// Decodes `input` whole, byte by byte and in 3-byte pieces, checks they
    /// agree and that decoding stops right after the body, and returns the
    /// content.
    #[track_caller]
    fn accept(input: &[u8]) -> Vec<u8> {
        let limits = ChunkedLimits::default();
        let mut with_next = input.to_vec();
        with_next.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let (content, consumed) = decode_split(limits, &with_next, with_next.len()).unwrap();
        assert_eq!(consumed, input.len(), "stops at the end of the body");
        for piece in [1, 3] {
            assert_eq!(
                decode_split(limits, input, piece),
                Ok((content.clone(), input.len()))
            );
        }
        content
    }

    /// Asserts that `input` fails with `error` both whole and byte by byte.
    #[track_caller]
    fn reject_with(limits: ChunkedLimits, input: &[u8], error: Error) {
        for piece in [input.len().max(1), 1] {
            let mut decoder = ChunkedDecoder::new(limits);
            let mut pending: Vec<u8> = Vec::new();
            let mut fed = 0;
            let result = loop {
                match decoder.decode(&pending) {
                    Err(e) => break Err(e),
                    Ok(Decoded {
                        event: ChunkEvent::End,
                        ..
                    }) => break Ok(()),
                    Ok(decoded) => {
                        pending.drain(..decoded.consumed);
                        if decoded.event == ChunkEvent::NeedMore {
                            if fed == input.len() {
                                break Ok(());
                            }
                            let end = (fed + piece).min(input.len());
                            pending.extend_from_slice(&input[fed..end]);
                            fed = end;
                        }
                    }
                }
            };
            assert_eq!(
                result,
                Err(error),
                "{:?} in pieces of {piece}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[track_caller]
    fn reject(input: &[u8], error: Error) {
        reject_with(ChunkedLimits::default(), input, error);
    }

    // ---- acceptance ------------------------------------------------------

    #[test]
    fn decodes_chunks_and_last_chunk() {
        assert_eq!(
            accept(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            b"hello world"
        );
        assert_eq!(accept(b"0\r\n\r\n"), b"");
        assert_eq!(accept(b"000\r\n\r\n"), b"");
    }

    #[test]
    fn chunk_size_is_case_insensitive_hex_with_leading_zeros() {
        let content = accept(b"1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0a\r\n0123456789\r\n0\r\n\r\n");
        assert_eq!(content.len(), 36);
        assert_eq!(
            accept(b"000000000000000A\r\n0123456789\r\n0\r\n\r\n").len(),
            10
        );
    }

    #[test]
    fn chunk_data_may_hold_any_bytes() {
        assert_eq!(accept(b"4\r\n\r\n\0\n\r\n0\r\n\r\n"), b"\r\n\0\n");
    }

    #[test]
    fn chunk_extensions_are_skipped() {
        for ext in [
            ";a",
            ";a=b",
            "; a = b",
            " ;a",
            "\t; a",
            ";a=\"quoted ; \\\" value\"",
            ";a=\"\"",
            ";a;b=c;d=\"e\" ;f",
            ";a=b ;c",
            ";a=\"x\" ; b",
        ] {
            let body = format!("3{ext}\r\nabc\r\n0{ext}\r\n\r\n");
            assert_eq!(accept(body.as_bytes()), b"abc", "{ext}");
        }
    }

    /// BWS is `*( SP / HTAB )` (RFC 9110 §5.6.3), so a run of whitespace may
    /// come before each `;`, after the size or after a value.
    #[test]
    fn chunk_ext_bws_may_be_several_bytes() {
        for ext in ["  ;a", " \t ;a", ";a=b \t ;c", ";a=\"x\"\t\t;b"] {
            let body = format!("3{ext}\r\nabc\r\n0{ext}\r\n\r\n");
            assert_eq!(accept(body.as_bytes()), b"abc", "{ext:?}");
        }
    }

    /// `quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )` (RFC 9110
    /// §5.6.4): those octets may be escaped in a quoted chunk-ext-val, a
    /// control byte or DEL may not.
    #[test]
    fn chunk_ext_quoted_pair_escapes_htab_sp_vchar_and_obs_text_only() {
        for escaped in [b'\t', b' ', b'!', b'"', b'\\', b'~', 0x80, 0xff] {
            let mut body = b"3;a=\"x\\".to_vec();
            body.push(escaped);
            body.extend_from_slice(b"y\"\r\nabc\r\n0\r\n\r\n");
            assert_eq!(accept(&body), b"abc", "escaped {escaped:#04x}");
        }
        for escaped in [0x00, 0x01, 0x0b, b'\n', 0x1f, 0x7f] {
            let mut body = b"3;a=\"x\\".to_vec();
            body.push(escaped);
            body.extend_from_slice(b"y\"\r\nabc\r\n0\r\n\r\n");
            reject(&body, Error::InvalidChunkExt);
        }
    }

    #[test]
    fn trailer_fields_are_validated_and_discarded() {
        assert_eq!(
            accept(b"3\r\nabc\r\n0\r\nExpires: never\r\nX-Checksum:  abc \t\r\nX-Empty:\r\n\r\n"),
            b"abc"
        );
    }

    #[test]
    fn data_events_never_exceed_the_chunk() {
        let mut decoder = ChunkedDecoder::default();
        let input = b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let decoded = decoder.decode(input).unwrap();
        assert_eq!(
            decoded,
            Decoded {
                consumed: 6,
                event: ChunkEvent::Data(3..6)
            }
        );
        let rest = &input[6..];
        let decoded = decoder.decode(rest).unwrap();
        assert_eq!(
            decoded,
            Decoded {
                consumed: 7,
                event: ChunkEvent::Data(5..7)
            }
        );
        let rest = &rest[7..];
        assert_eq!(
            decoder.decode(rest).unwrap(),
            Decoded {
                consumed: 7,
                event: ChunkEvent::End
            }
        );
        assert!(decoder.is_done());
        assert_eq!(
            decoder.decode(b"more").unwrap(),
            Decoded {
                consumed: 0,
                event: ChunkEvent::End
            }
        );
    }

    #[test]
    fn need_more_consumes_framing() {
        let mut decoder = ChunkedDecoder::default();
        assert_eq!(decoder.decode(b"").unwrap(), need_more(0));
        assert_eq!(decoder.decode(b"1").unwrap(), need_more(1));
        assert_eq!(decoder.decode(b"0;x=\"a").unwrap(), need_more(6));
        assert_eq!(decoder.decode(b"\"\r").unwrap(), need_more(2));
        assert_eq!(
            decoder.decode(b"\nxyz").unwrap(),
            Decoded {
                consumed: 4,
                event: ChunkEvent::Data(1..4)
            }
        );
        assert!(!decoder.is_done());
    }

    // ---- chunk-size ------------------------------------------------------

    #[test]
    fn rejects_missing_chunk_size() {
        reject(b"\r\nabc\r\n0\r\n\r\n", Error::InvalidChunkSize);
        reject(b";ext\r\n", Error::InvalidChunkSize);
    }

    #[test]
    fn rejects_0x_prefix_and_signs() {
        reject(b"0x5\r\nhello\r\n0\r\n\r\n", Error::InvalidChunkSize);
        reject(b"+5\r\nhello\r\n0\r\n\r\n", Error::InvalidChunkSize);
        reject(b"-5\r\nhello\r\n0\r\n\r\n", Error::InvalidChunkSize);
    }

    #[test]
    fn rejects_whitespace_around_chunk_size() {
        reject(b" 5\r\nhello\r\n0\r\n\r\n", Error::InvalidChunkSize);
        // BWS is only allowed when a chunk-ext follows.
        reject(b"5 \r\nhello\r\n0\r\n\r\n", Error::InvalidChunkExt);
        reject(b"5\t\r\nhello\r\n0\r\n\r\n", Error::InvalidChunkExt);
    }

    #[test]
    fn rejects_bare_lf_after_chunk_size() {
        reject(b"5\nhello\r\n0\r\n\r\n", Error::InvalidChunkSize);
        reject(b"5\r\nhello\r\n0\n\r\n", Error::InvalidChunkSize);
        reject(b"5;a\nhello\r\n0\r\n\r\n", Error::InvalidChunkExt);
    }

    #[test]
    fn rejects_bare_cr_after_chunk_size() {
        reject(b"5\rhello\r\n0\r\n\r\n", Error::InvalidChunkSize);
    }

    #[test]
    fn rejects_chunk_size_over_16_digits() {
        reject(
            b"00000000000000001\r\na\r\n0\r\n\r\n",
            Error::ChunkSizeOverflow,
        );
        reject(b"10000000000000000\r\n", Error::ChunkSizeOverflow);
        let mut decoder = ChunkedDecoder::default();
        assert_eq!(
            decoder.decode(b"ffffffffffffffff\r\n").unwrap(),
            need_more(18)
        );
    }

    // ---- chunk-ext -------------------------------------------------------

    #[test]
    fn rejects_malformed_chunk_ext() {
        for ext in [
            ";",
            "; ",
            ";=b",
            ";a=",
            ";a= ",
            ";a b",
            ";a=b c",
            ";a=b ",
            ";a ",
            ";a=\"x",
            ";a=\"x\"y",
            ";a=\"\x01\"",
            ";a=b\x7f",
            ";a=@",
            " x",
        ] {
            let body = format!("3{ext}\r\nabc\r\n0\r\n\r\n");
            reject(body.as_bytes(), Error::InvalidChunkExt);
        }
    }

    #[test]
    fn rejects_chunk_exts_over_the_body_limit() {
        let limits = ChunkedLimits {
            max_chunk_ext_size: 8,
            max_chunk_exts_size: 16,
            ..ChunkedLimits::default()
        };
        // Two lines of 8 bytes of extensions: 16 in all, at the limit.
        let ok = b"1;abc=def\r\na\r\n0;abc=def\r\n\r\n";
        let mut decoder = ChunkedDecoder::new(limits);
        let d = decoder.decode(ok).unwrap();
        assert_eq!(d.event, ChunkEvent::Data(11..12));
        assert_eq!(decoder.decode(&ok[12..]).unwrap().event, ChunkEvent::End);
        // A third line's first extension byte goes over.
        reject_with(
            limits,
            b"1;abc=def\r\na\r\n1;abc=def\r\nb\r\n1;\r\nc\r\n0\r\n\r\n",
            Error::ChunkExtsTooLarge { limit: 16 },
        );
        assert_eq!(ChunkedLimits::default().max_chunk_exts_size, 16 * 1024);
    }

    #[test]
    fn rejects_chunk_ext_over_limit() {
        let limits = ChunkedLimits {
            max_chunk_ext_size: 8,
            ..ChunkedLimits::default()
        };
        // ";abc=def" is exactly 8 bytes.
        let mut decoder = ChunkedDecoder::new(limits);
        assert_eq!(decoder.decode(b"3;abc=def\r\n").unwrap(), need_more(11));
        reject_with(
            limits,
            b"3;abc=defg\r\nabc\r\n0\r\n\r\n",
            Error::ChunkExtTooLong { limit: 8 },
        );
        // The limit applies to each line, not to the body.
        let mut decoder = ChunkedDecoder::new(limits);
        let body = b"1;abc=def\r\na\r\n0;abc=def\r\n\r\n";
        let d = decoder.decode(body).unwrap();
        assert_eq!(d.event, ChunkEvent::Data(11..12));
        assert_eq!(decoder.decode(&body[12..]).unwrap().event, ChunkEvent::End);
    }

    // ---- chunk-data ------------------------------------------------------

    #[test]
    fn rejects_chunk_data_not_followed_by_crlf() {
        reject(b"3\r\nabcd\r\n0\r\n\r\n", Error::InvalidChunkData);
        reject(b"3\r\nabc\n0\r\n\r\n", Error::InvalidChunkData);
        reject(b"3\r\nabc\rX0\r\n\r\n", Error::InvalidChunkData);
        reject(b"3\r\nabc0\r\n\r\n", Error::InvalidChunkData);
        // One byte too many, then LF: the byte is not taken for the CR.
        reject(b"3\r\nabcd\n0\r\n\r\n", Error::InvalidChunkData);
        reject(b"3\r\nabc\n\n0\r\n\r\n", Error::InvalidChunkData);
    }

    #[test]
    fn rejects_body_over_max_body_size() {
        let limits = ChunkedLimits {
            max_body_size: 5,
            ..ChunkedLimits::default()
        };
        assert_eq!(
            decode_split(limits, b"2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n", 64),
            Ok((b"abcde".to_vec(), 20))
        );
        reject_with(
            limits,
            b"2\r\nab\r\n4\r\ncdef\r\n0\r\n\r\n",
            Error::BodyTooLarge { limit: 5 },
        );
        // Reported at the chunk-size, before any of that chunk's data.
        let mut decoder = ChunkedDecoder::new(limits);
        assert_eq!(
            decoder.decode(b"6\r\n"),
            Err(Error::BodyTooLarge { limit: 5 })
        );
        // The sum is checked arithmetic.
        let mut decoder = ChunkedDecoder::default();
        assert_eq!(
            decoder.decode(b"ffffffffffffffff\r\n").unwrap(),
            need_more(18)
        );
        decoder.remaining = 0;
        decoder.state = State::DataCr;
        assert_eq!(
            decoder.decode(b"\r\n1\r\n"),
            Err(Error::BodyTooLarge { limit: u64::MAX })
        );
    }

    // ---- trailer section -------------------------------------------------

    #[test]
    fn rejects_invalid_trailer_field_name() {
        reject(b"0\r\nX@Y: 1\r\n\r\n", Error::InvalidFieldName);
        reject(b"0\r\n: 1\r\n\r\n", Error::InvalidFieldName);
        reject(b"0\r\nNoColon\r\n\r\n", Error::InvalidFieldName);
    }

    #[test]
    fn rejects_whitespace_before_colon_in_trailer() {
        reject(b"0\r\nX-Y : 1\r\n\r\n", Error::WhitespaceBeforeColon);
    }

    #[test]
    fn rejects_invalid_trailer_field_value() {
        reject(b"0\r\nX: a\x01b\r\n\r\n", Error::InvalidFieldValue);
        reject(b"0\r\nX: a\x7f\r\n\r\n", Error::InvalidFieldValue);
        reject(b"0\r\nX: a\nY: b\r\n\r\n", Error::InvalidFieldValue);
        reject(b"0\r\nX: a\rY: b\r\n\r\n", Error::InvalidFieldValue);
    }

    #[test]
    fn rejects_obs_fold_in_trailer() {
        reject(b"0\r\nX: a\r\n b\r\n\r\n", Error::ObsFold);
        reject(b"0\r\n b\r\n\r\n", Error::InvalidFieldName);
    }

    #[test]
    fn rejects_final_line_that_is_not_crlf() {
        reject(b"0\r\n\n", Error::InvalidFieldName);
        reject(b"0\r\n\rX", Error::InvalidFieldName);
        reject(b"0\r\nX: 1\r\n\n", Error::InvalidFieldName);
    }

    #[test]
    fn rejects_trailer_section_over_limit() {
        let limits = ChunkedLimits {
            max_trailer_section_size: 10,
            ..ChunkedLimits::default()
        };
        // "X: 12345\r\n" + "\r\n" is 12 bytes; "X: 123\r\n\r\n" is 10.
        assert_eq!(
            decode_split(limits, b"0\r\nX: 123\r\n\r\n", 64),
            Ok((Vec::new(), 13))
        );
        reject_with(
            limits,
            b"0\r\nX: 1234\r\n\r\n",
            Error::TrailerSectionTooLarge { limit: 10 },
        );
        reject_with(
            limits,
            b"0\r\nX: 12345678901234567890",
            Error::TrailerSectionTooLarge { limit: 10 },
        );
    }

    // ---- state -----------------------------------------------------------

    #[test]
    fn errors_are_sticky_until_reset() {
        let mut decoder = ChunkedDecoder::default();
        assert_eq!(decoder.decode(b"x"), Err(Error::InvalidChunkSize));
        assert_eq!(decoder.decode(b"0\r\n\r\n"), Err(Error::InvalidChunkSize));
        decoder.reset();
        assert_eq!(decoder.decode(b"0\r\n\r\n").unwrap().event, ChunkEvent::End);
        decoder.reset();
        assert!(!decoder.is_done());
    }

    mod encoding {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// What the encoder writes, the decoder reads back: the same
            /// content, every byte used, whatever the split of the input.
            #[test]
            fn encoded_bodies_decode_to_their_content(
                chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..6),
                trailers in prop::collection::vec(
                    (prop::sample::select(vec!["A", "x-t", "Digest"]), "[ -~]{0,8}"),
                    0..3,
                ),
                piece in 1..64usize,
            ) {
                let mut wire = Vec::new();
                for chunk in &chunks {
                    write_chunk(&mut wire, chunk);
                }
                let trailers: Vec<(&str, String)> = trailers
                    .into_iter()
                    .map(|(name, value)| (name, value.trim_matches(' ').to_owned()))
                    .collect();
                let lines: Vec<FieldLine<'_>> = trailers
                    .iter()
                    .map(|(name, value)| FieldLine { name: name.as_bytes(), value: value.as_bytes() })
                    .collect();
                write_last_chunk(&mut wire, &lines);
                let (content, consumed) =
                    decode_split(ChunkedLimits::default(), &wire, piece).unwrap();
                prop_assert_eq!(content, chunks.concat());
                prop_assert_eq!(consumed, wire.len());
            }
        }
    }
}

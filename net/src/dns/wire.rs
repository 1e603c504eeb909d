//! An I/O-free codec for DNS messages (RFC 1035 §4, RFC 3596, RFC 6891).
//!
//! It opens no socket and reads no clock. [`Message::decode`] parses a whole message
//! (one UDP datagram, or one TCP message without its two-byte length prefix) into owned
//! values; [`encode_query`] and [`Message::encode`] append a message to the caller's
//! `Vec<u8>`.
//!
//! ```text
//!   +---------------------+
//!   |        Header       |  12 octets: ID, flags, four counts   (RFC 1035 §4.1.1)
//!   +---------------------+
//!   |       Question      |  QNAME QTYPE QCLASS                  (§4.1.2)
//!   +---------------------+
//!   |        Answer       |  resource records                    (§4.1.3)
//!   +---------------------+
//!   |      Authority      |
//!   +---------------------+
//!   |      Additional     |  may hold one OPT pseudo-record      (RFC 6891 §6.1)
//!   +---------------------+
//! ```
//!
//! What is decoded: the header, questions, and the RDATA of A (RFC 1035 §3.4.1), AAAA
//! (RFC 3596 §2.2) and CNAME (§3.3.1) records, plus the OPT record's fields. Every other
//! record type is skipped by its RDLENGTH and kept as raw bytes ([`RData::Other`]).
//!
//! Names may be compressed on read (§4.1.4). Every compression pointer must point
//! strictly before the labels it ends (the name's start, or the previous pointer's
//! target), which rules out loops; a name takes at most 255
//! octets uncompressed (§3.1) and at most 127 pointers. Every read is bounds-checked, so
//! no input makes the decoder panic, loop, or read past the message; a record count
//! larger than the message can hold fails before anything is allocated for it.
//!
//! ```
//! use keel_net::dns::wire::{encode_query, Message, Name, Question, RrClass, RrType};
//! let q = Question { qname: Name::from_ascii("example.com").unwrap(), qtype: RrType::AAAA, qclass: RrClass::IN };
//! let mut out = Vec::new();
//! encode_query(0x1234, &q, true, Some(1232), &mut out);
//! let m = Message::decode(&out).unwrap();
//! assert_eq!(m.header.id, 0x1234);
//! assert_eq!(m.questions, vec![q]);
//! assert_eq!(m.edns.unwrap().udp_payload_size, 1232);
//! ```

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The longest name in octets, in uncompressed wire form (RFC 1035 §3.1).
pub const MAX_NAME_SIZE: usize = 255;
/// The longest label in octets (RFC 1035 §2.3.4).
pub const MAX_LABEL_SIZE: usize = 63;
/// The most compression pointers followed while reading one name.
pub const MAX_POINTERS: usize = 127;
/// The header's size in octets (RFC 1035 §4.1.1).
pub const HEADER_SIZE: usize = 12;

/// What is wrong with a DNS message given to [`Message::decode`]. Offsets are in octets
/// from the start of the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The message ends inside `what`, which starts at `offset`.
    #[error("message ends inside the {what} at octet {offset}")]
    Truncated {
        /// The part being read (`header`, `name`, `question`, `record`, `RDATA`).
        what: &'static str,
        /// Where it starts.
        offset: usize,
    },
    /// A label length octet with the reserved top bits `01` or `10` (RFC 1035 §4.1.4;
    /// the extended label types of RFC 6891 §5 are not supported).
    #[error("reserved label type 0x{octet:02x} at octet {offset}")]
    BadLabelType {
        /// Where it is.
        offset: usize,
        /// The length octet.
        octet: u8,
    },
    /// A compression pointer that does not point strictly before the labels it ends: a
    /// forward reference (RFC 1035 §4.1.4 "a prior occurrence").
    #[error("compression pointer at octet {offset} does not point before its name ({target})")]
    BadPointer {
        /// Where the pointer is.
        offset: usize,
        /// Where it points.
        target: usize,
    },
    /// More than [`MAX_POINTERS`] pointers in one name.
    #[error("more than {MAX_POINTERS} compression pointers in the name at octet {offset}")]
    TooManyPointers {
        /// Where the name starts.
        offset: usize,
    },
    /// A name longer than [`MAX_NAME_SIZE`] octets once decompressed.
    #[error("name at octet {offset} longer than {MAX_NAME_SIZE} octets")]
    NameTooLong {
        /// Where the name starts.
        offset: usize,
    },
    /// An A, AAAA or OPT RDATA of the wrong length, or a CNAME whose name does not fill
    /// its RDATA exactly.
    #[error("RDATA of type {rtype} at octet {offset} has bad length {rdlength}")]
    BadRdata {
        /// The record type.
        rtype: RrType,
        /// Where the RDATA starts.
        offset: usize,
        /// Its RDLENGTH.
        rdlength: u16,
    },
    /// An OPT record outside the additional section, not at the root name, or a second
    /// one (RFC 6891 §6.1.1).
    #[error("misplaced or repeated OPT record at octet {offset}")]
    BadOpt {
        /// Where the record starts.
        offset: usize,
    },
    /// A section count larger than the rest of the message could hold.
    #[error("{section} count {count} exceeds what the message can hold")]
    CountTooLarge {
        /// Which count (`question`, `answer`, `authority`, `additional`).
        section: &'static str,
        /// The count from the header.
        count: u16,
    },
}

/// A resource record TYPE or a QTYPE (RFC 1035 §3.2.2, §3.2.3).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RrType(pub u16);

impl RrType {
    /// A host address, IPv4 (1).
    pub const A: RrType = RrType(1);
    /// An authoritative name server (2).
    pub const NS: RrType = RrType(2);
    /// The canonical name for an alias (5).
    pub const CNAME: RrType = RrType(5);
    /// Start of a zone of authority (6).
    pub const SOA: RrType = RrType(6);
    /// A domain name pointer (12).
    pub const PTR: RrType = RrType(12);
    /// Mail exchange (15).
    pub const MX: RrType = RrType(15);
    /// Text strings (16).
    pub const TXT: RrType = RrType(16);
    /// A host address, IPv6 (28; RFC 3596 §2.1).
    pub const AAAA: RrType = RrType(28);
    /// The EDNS(0) pseudo-record (41; RFC 6891 §6.1.1).
    pub const OPT: RrType = RrType(41);
    /// A request for all records (QTYPE 255, "*").
    pub const ANY: RrType = RrType(255);
}

impl fmt::Display for RrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match *self {
            RrType::A => "A",
            RrType::NS => "NS",
            RrType::CNAME => "CNAME",
            RrType::SOA => "SOA",
            RrType::PTR => "PTR",
            RrType::MX => "MX",
            RrType::TXT => "TXT",
            RrType::AAAA => "AAAA",
            RrType::OPT => "OPT",
            RrType::ANY => "ANY",
            RrType(n) => return write!(f, "TYPE{n}"),
        };
        f.write_str(s)
    }
}

impl fmt::Debug for RrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A CLASS or QCLASS (RFC 1035 §3.2.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RrClass(pub u16);

impl RrClass {
    /// The Internet (1).
    pub const IN: RrClass = RrClass(1);
}

/// A response code (RFC 1035 §4.1.1), 12 bits wide when an OPT record carries the upper
/// eight (RFC 6891 §6.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rcode(pub u16);

impl Rcode {
    /// No error (0).
    pub const NOERROR: Rcode = Rcode(0);
    /// Format error: the server could not interpret the query (1).
    pub const FORMERR: Rcode = Rcode(1);
    /// Server failure (2).
    pub const SERVFAIL: Rcode = Rcode(2);
    /// Name error: the domain name does not exist (3).
    pub const NXDOMAIN: Rcode = Rcode(3);
    /// Not implemented (4).
    pub const NOTIMP: Rcode = Rcode(4);
    /// Refused (5).
    pub const REFUSED: Rcode = Rcode(5);
}

/// The fixed 12-octet header (RFC 1035 §4.1.1). `rcode` here is the full code, with the
/// OPT record's upper bits merged in by [`Message::decode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The query ID the response must echo.
    pub id: u16,
    /// QR: `true` in a response.
    pub qr: bool,
    /// OPCODE (0 is a standard query).
    pub opcode: u8,
    /// AA: authoritative answer.
    pub aa: bool,
    /// TC: the message was truncated to fit the transport.
    pub tc: bool,
    /// RD: recursion desired.
    pub rd: bool,
    /// RA: recursion available.
    pub ra: bool,
    /// RCODE.
    pub rcode: Rcode,
    /// QDCOUNT, ANCOUNT, NSCOUNT, ARCOUNT as read from the wire.
    pub counts: [u16; 4],
}

/// A domain name (RFC 1035 §3.1), held in uncompressed wire form: length-prefixed labels
/// ending with the zero-length root label. Comparison ignores ASCII case (§2.3.3).
#[derive(Clone)]
pub struct Name {
    wire: Vec<u8>,
}

impl Name {
    /// The root name `.`.
    pub fn root() -> Name {
        Name { wire: vec![0] }
    }

    /// Parses a dotted name such as `www.example.com` or `www.example.com.` (a trailing
    /// dot is allowed, and the name is always taken as fully qualified). Labels are 1 to
    /// 63 octets of any bytes but `.`; no escapes. `.` alone is the root.
    ///
    /// # Errors
    /// A static reason: an empty label, a label over 63 octets, or a name over 255.
    pub fn from_ascii(s: &str) -> Result<Name, &'static str> {
        if s == "." {
            return Ok(Name::root());
        }
        let s = s.strip_suffix('.').unwrap_or(s);
        if s.is_empty() {
            return Err("empty name");
        }
        let mut wire = Vec::with_capacity(s.len() + 2);
        for label in s.split('.') {
            if label.is_empty() {
                return Err("empty label");
            }
            if label.len() > MAX_LABEL_SIZE {
                return Err("label longer than 63 octets");
            }
            wire.push(label.len() as u8);
            wire.extend_from_slice(label.as_bytes());
        }
        wire.push(0);
        if wire.len() > MAX_NAME_SIZE {
            return Err("name longer than 255 octets");
        }
        Ok(Name { wire })
    }

    /// The name in uncompressed wire form, root label included (2 to 255 octets, or 1
    /// for the root).
    pub fn as_wire(&self) -> &[u8] {
        &self.wire
    }

    /// The labels, from the leftmost; the root label is not included.
    pub fn labels(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut i = 0;
        std::iter::from_fn(move || {
            let len = *self.wire.get(i)? as usize;
            if len == 0 {
                return None;
            }
            let label = self.wire.get(i + 1..i + 1 + len)?;
            i += 1 + len;
            Some(label)
        })
    }

    /// The number of labels, root excluded (`www.example.com` has 3).
    pub fn label_count(&self) -> usize {
        self.labels().count()
    }

    /// This name with `suffix` appended (`www` + `example.com`).
    ///
    /// # Errors
    /// When the result would be longer than 255 octets.
    pub fn join(&self, suffix: &Name) -> Result<Name, &'static str> {
        let mut wire = self.wire[..self.wire.len() - 1].to_vec();
        wire.extend_from_slice(&suffix.wire);
        if wire.len() > MAX_NAME_SIZE {
            return Err("name longer than 255 octets");
        }
        Ok(Name { wire })
    }

    fn lower(&self) -> impl Iterator<Item = u8> + '_ {
        self.wire.iter().map(u8::to_ascii_lowercase)
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.wire.eq_ignore_ascii_case(&other.wire)
    }
}
impl Eq for Name {}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        for b in self.lower() {
            h.write_u8(b);
        }
    }
}

impl fmt::Display for Name {
    /// Dotted form with a trailing dot (`www.example.com.`), as in master files (RFC 1035
    /// §5.1, <https://www.rfc-editor.org/rfc/rfc1035#section-5.1>) and as dig prints it:
    /// the characters special there (`.`, `\`, `"`, `(`, `)`, `;`, `@`, `$`) are written
    /// `\X`; octets that do not print (space, controls, DEL, non-ASCII) `\DDD`; every
    /// other printable ASCII octet, `*` included, as itself (`*.cdn.example.net.`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.wire.len() == 1 {
            return f.write_str(".");
        }
        for label in self.labels() {
            for &b in label {
                match b {
                    b'.' | b'\\' | b'"' | b'(' | b')' | b';' | b'@' | b'$' => {
                        write!(f, "\\{}", b as char)?
                    }
                    b'!'..=b'~' => write!(f, "{}", b as char)?,
                    _ => write!(f, "\\{b:03}")?,
                }
            }
            f.write_str(".")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

/// One entry of the question section (RFC 1035 §4.1.2).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Question {
    /// QNAME.
    pub qname: Name,
    /// QTYPE.
    pub qtype: RrType,
    /// QCLASS.
    pub qclass: RrClass,
}

/// The RDATA of a resource record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RData {
    /// An IPv4 address (A, RFC 1035 §3.4.1).
    A(Ipv4Addr),
    /// An IPv6 address (AAAA, RFC 3596 §2.2).
    Aaaa(Ipv6Addr),
    /// The canonical name of an alias (CNAME, RFC 1035 §3.3.1), decompressed.
    Cname(Name),
    /// Any other type, skipped: the raw RDATA octets. Names inside them may be
    /// compressed relative to the original message and are not followed.
    Other(Vec<u8>),
}

/// A resource record (RFC 1035 §4.1.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The owner NAME.
    pub name: Name,
    /// TYPE.
    pub rtype: RrType,
    /// CLASS.
    pub class: RrClass,
    /// TTL in seconds; a value with the most significant bit set reads as 0, as
    /// RFC 2181 §8 asks (<https://www.rfc-editor.org/rfc/rfc2181#section-8>).
    pub ttl: u32,
    /// RDATA.
    pub data: RData,
}

/// The fields of an OPT pseudo-record (RFC 6891 §6.1.2, §6.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edns {
    /// The largest UDP payload the sender can take, in octets (its CLASS field).
    pub udp_payload_size: u16,
    /// The upper 8 bits of the 12-bit RCODE.
    pub extended_rcode: u8,
    /// The EDNS version (0).
    pub version: u8,
    /// DO: the sender takes DNSSEC records.
    pub dnssec_ok: bool,
}

/// A decoded DNS message (RFC 1035 §4.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The header, with the full RCODE.
    pub header: Header,
    /// The question section (normally one entry).
    pub questions: Vec<Question>,
    /// The answer section.
    pub answers: Vec<Record>,
    /// The authority section.
    pub authority: Vec<Record>,
    /// The additional section, without the OPT record.
    pub additional: Vec<Record>,
    /// The OPT record, when present.
    pub edns: Option<Edns>,
}

struct Reader<'a> {
    msg: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str, start: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.msg.len());
        match end {
            Some(end) => {
                let s = &self.msg[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(WireError::Truncated {
                what,
                offset: start,
            }),
        }
    }

    fn u16(&mut self, what: &'static str, start: usize) -> Result<u16, WireError> {
        let b = self.take(2, what, start)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, what: &'static str, start: usize) -> Result<u32, WireError> {
        let b = self.take(4, what, start)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a possibly compressed name at the cursor and moves past it (RFC 1035 §4.1.4).
    fn name(&mut self) -> Result<Name, WireError> {
        let start = self.pos;
        let mut wire = Vec::with_capacity(32);
        let mut pos = self.pos;
        // Where the cursor ends: after the first pointer, or after the root label.
        let mut end = None;
        let mut pointers = 0;
        // Each pointer must point before the start of the stretch of labels it ends (the
        // name's start, then each earlier target): positions strictly decrease per hop,
        // so the walk ends even on hostile input.
        let mut segment_start = start;
        loop {
            let Some(&len) = self.msg.get(pos) else {
                return Err(WireError::Truncated {
                    what: "name",
                    offset: start,
                });
            };
            match len & 0xC0 {
                0x00 => {
                    let len = len as usize;
                    let label =
                        self.msg
                            .get(pos + 1..pos + 1 + len)
                            .ok_or(WireError::Truncated {
                                what: "name",
                                offset: start,
                            })?;
                    if wire.len() + 1 + len > MAX_NAME_SIZE {
                        return Err(WireError::NameTooLong { offset: start });
                    }
                    wire.push(len as u8);
                    wire.extend_from_slice(label);
                    pos += 1 + len;
                    if len == 0 {
                        self.pos = end.unwrap_or(pos);
                        return Ok(Name { wire });
                    }
                }
                0xC0 => {
                    let Some(&low) = self.msg.get(pos + 1) else {
                        return Err(WireError::Truncated {
                            what: "name",
                            offset: start,
                        });
                    };
                    let target = (((len & 0x3F) as usize) << 8) | low as usize;
                    if target >= segment_start {
                        return Err(WireError::BadPointer {
                            offset: pos,
                            target,
                        });
                    }
                    pointers += 1;
                    if pointers > MAX_POINTERS {
                        return Err(WireError::TooManyPointers { offset: start });
                    }
                    end.get_or_insert(pos + 2);
                    pos = target;
                    segment_start = target;
                }
                _ => {
                    return Err(WireError::BadLabelType {
                        offset: pos,
                        octet: len,
                    })
                }
            }
        }
    }
}

const SECTIONS: [&str; 4] = ["question", "answer", "authority", "additional"];

/// The header of a message (RFC 1035 §4.1.1).
fn read_header(r: &mut Reader<'_>) -> Result<Header, WireError> {
    let h = r.take(HEADER_SIZE, "header", 0)?;
    let flags = u16::from_be_bytes([h[2], h[3]]);
    Ok(Header {
        id: u16::from_be_bytes([h[0], h[1]]),
        qr: flags & 0x8000 != 0,
        opcode: ((flags >> 11) & 0xF) as u8,
        aa: flags & 0x0400 != 0,
        tc: flags & 0x0200 != 0,
        rd: flags & 0x0100 != 0,
        ra: flags & 0x0080 != 0,
        rcode: Rcode(flags & 0xF),
        counts: [
            u16::from_be_bytes([h[4], h[5]]),
            u16::from_be_bytes([h[6], h[7]]),
            u16::from_be_bytes([h[8], h[9]]),
            u16::from_be_bytes([h[10], h[11]]),
        ],
    })
}

/// The `count` entries of the question section (RFC 1035 §4.1.2), after the header.
fn read_questions(r: &mut Reader<'_>, count: u16) -> Result<Vec<Question>, WireError> {
    // A question takes at least 5 octets: refuse a count the message cannot hold
    // before allocating for it.
    if count as usize * 5 > r.msg.len() - HEADER_SIZE {
        return Err(WireError::CountTooLarge {
            section: SECTIONS[0],
            count,
        });
    }
    let mut questions = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let start = r.pos;
        let qname = r.name()?;
        let qtype = RrType(r.u16("question", start)?);
        let qclass = RrClass(r.u16("question", start)?);
        questions.push(Question {
            qname,
            qtype,
            qclass,
        });
    }
    Ok(questions)
}

impl Message {
    /// Decodes one whole message: a UDP payload, or a TCP message without its two-octet
    /// length prefix (RFC 1035 §4.2.2). Octets after the last record are ignored.
    ///
    /// # Errors
    /// A [`WireError`] saying what is malformed and where.
    pub fn decode(msg: &[u8]) -> Result<Message, WireError> {
        let mut r = Reader { msg, pos: 0 };
        let mut header = read_header(&mut r)?;
        let counts = header.counts;
        // A record takes at least 11 octets: refuse counts the message cannot hold
        // before allocating for them.
        let room = msg.len() - HEADER_SIZE;
        for i in 1..4 {
            if counts[i] as usize * 11 > room {
                return Err(WireError::CountTooLarge {
                    section: SECTIONS[i],
                    count: counts[i],
                });
            }
        }
        let questions = read_questions(&mut r, counts[0])?;
        let mut sections: [Vec<Record>; 3] = Default::default();
        let mut edns = None;
        for (i, section) in sections.iter_mut().enumerate() {
            section.reserve(counts[i + 1] as usize);
            for _ in 0..counts[i + 1] {
                let start = r.pos;
                let name = r.name()?;
                let rtype = RrType(r.u16("record", start)?);
                let class = r.u16("record", start)?;
                let ttl = r.u32("record", start)?;
                let rdlength = r.u16("record", start)?;
                let rdstart = r.pos;
                let rdata = r.take(rdlength as usize, "RDATA", rdstart)?;
                let bad = WireError::BadRdata {
                    rtype,
                    offset: rdstart,
                    rdlength,
                };
                if rtype == RrType::OPT {
                    if i != 2 || edns.is_some() || name.wire != [0] {
                        return Err(WireError::BadOpt { offset: start });
                    }
                    edns = Some(Edns {
                        udp_payload_size: class,
                        extended_rcode: (ttl >> 24) as u8,
                        version: (ttl >> 16) as u8,
                        dnssec_ok: ttl & 0x8000 != 0,
                    });
                    continue;
                }
                let data = match rtype {
                    RrType::A => {
                        let a: [u8; 4] = rdata.try_into().map_err(|_| bad)?;
                        RData::A(Ipv4Addr::from(a))
                    }
                    RrType::AAAA => {
                        let a: [u8; 16] = rdata.try_into().map_err(|_| bad)?;
                        RData::Aaaa(Ipv6Addr::from(a))
                    }
                    RrType::CNAME => {
                        let mut sub = Reader { msg, pos: rdstart };
                        let target = sub.name()?;
                        if sub.pos != rdstart + rdlength as usize {
                            return Err(bad);
                        }
                        RData::Cname(target)
                    }
                    _ => RData::Other(rdata.to_vec()),
                };
                section.push(Record {
                    name,
                    rtype,
                    class: RrClass(class),
                    // RFC 2181 §8: a TTL with the most significant bit set is treated
                    // as zero (not as the value of the low 31 bits).
                    ttl: if ttl & 0x8000_0000 != 0 { 0 } else { ttl },
                    data,
                });
            }
        }
        if let Some(e) = edns {
            header.rcode = Rcode(((e.extended_rcode as u16) << 4) | header.rcode.0);
        }
        let [answers, authority, additional] = sections;
        Ok(Message {
            header,
            questions,
            answers,
            authority,
            additional,
            edns,
        })
    }

    /// Decodes only the header and the question section of a message, leaving the
    /// other sections empty (the header's counts stay as sent). For an answer with
    /// TC set, which may be cut anywhere after its question (RFC 1035 §4.2.1): its
    /// header and question are enough to match it to the query and ask again over
    /// TCP.
    ///
    /// # Errors
    /// A [`WireError`] when the header or the question section is malformed.
    pub fn decode_head(msg: &[u8]) -> Result<Message, WireError> {
        let mut r = Reader { msg, pos: 0 };
        let header = read_header(&mut r)?;
        let questions = read_questions(&mut r, header.counts[0])?;
        Ok(Message {
            header,
            questions,
            answers: Vec::new(),
            authority: Vec::new(),
            additional: Vec::new(),
            edns: None,
        })
    }

    /// Appends this message in wire form to `out`, without name compression. Counts come
    /// from the section lengths (not from `header.counts`); the RCODE's upper bits go to
    /// the OPT record when `edns` is set. Meant for tests and fake servers.
    ///
    /// # Panics
    /// When a section holds more than 65,535 entries or an RDATA more than 65,535
    /// octets: the wire format cannot express it.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let h = &self.header;
        let flags = (h.qr as u16) << 15
            | ((h.opcode as u16) & 0xF) << 11
            | (h.aa as u16) << 10
            | (h.tc as u16) << 9
            | (h.rd as u16) << 8
            | (h.ra as u16) << 7
            | (h.rcode.0 & 0xF);
        let count = |n: usize| u16::try_from(n).expect("section has at most 65535 entries");
        out.extend_from_slice(&h.id.to_be_bytes());
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&count(self.questions.len()).to_be_bytes());
        out.extend_from_slice(&count(self.answers.len()).to_be_bytes());
        out.extend_from_slice(&count(self.authority.len()).to_be_bytes());
        let opt = self.edns.is_some() as usize;
        out.extend_from_slice(&count(self.additional.len() + opt).to_be_bytes());
        for q in &self.questions {
            out.extend_from_slice(&q.qname.wire);
            out.extend_from_slice(&q.qtype.0.to_be_bytes());
            out.extend_from_slice(&q.qclass.0.to_be_bytes());
        }
        for r in self
            .answers
            .iter()
            .chain(&self.authority)
            .chain(&self.additional)
        {
            out.extend_from_slice(&r.name.wire);
            out.extend_from_slice(&r.rtype.0.to_be_bytes());
            out.extend_from_slice(&r.class.0.to_be_bytes());
            out.extend_from_slice(&r.ttl.to_be_bytes());
            let rdata: &[u8] = match &r.data {
                RData::A(a) => &a.octets(),
                RData::Aaaa(a) => &a.octets(),
                RData::Cname(n) => &n.wire,
                RData::Other(b) => b,
            };
            let len = u16::try_from(rdata.len()).expect("RDATA has at most 65535 octets");
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(rdata);
        }
        if let Some(e) = self.edns {
            let ext = ((h.rcode.0 >> 4) as u8).max(e.extended_rcode);
            push_opt(out, e.udp_payload_size, ext, e.version, e.dnssec_ok);
        }
    }
}

fn push_opt(out: &mut Vec<u8>, udp_payload_size: u16, ext_rcode: u8, version: u8, dnssec_ok: bool) {
    out.push(0); // root owner name
    out.extend_from_slice(&RrType::OPT.0.to_be_bytes());
    out.extend_from_slice(&udp_payload_size.to_be_bytes());
    let ttl = (ext_rcode as u32) << 24 | (version as u32) << 16 | (dnssec_ok as u32) << 15;
    out.extend_from_slice(&ttl.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // RDLENGTH: no options
}

/// Appends a standard query (OPCODE 0) for `question` with ID `id` to `out`: the header,
/// the question, and, when `edns_udp_size` is `Some(octets)`, an OPT record advertising
/// that UDP payload size (RFC 6891 §6.1.2; 1232 is the common choice, 512 the minimum
/// that means anything). `recursion_desired` sets RD (RFC 1035 §4.1.1). The ID should
/// come from a random source (RFC 5452 §9.2).
pub fn encode_query(
    id: u16,
    question: &Question,
    recursion_desired: bool,
    edns_udp_size: Option<u16>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&id.to_be_bytes());
    let flags: u16 = if recursion_desired { 0x0100 } else { 0 };
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&(edns_udp_size.is_some() as u16).to_be_bytes());
    out.extend_from_slice(&question.qname.wire);
    out.extend_from_slice(&question.qtype.0.to_be_bytes());
    out.extend_from_slice(&question.qclass.0.to_be_bytes());
    if let Some(size) = edns_udp_size {
        push_opt(out, size, 0, 0, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hex with spaces, as in the RFCs' diagrams.
    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    #[test]
    fn query_bytes_are_as_rfc_1035_lays_them_out() {
        let q = Question {
            qname: name("a.bc"),
            qtype: RrType::A,
            qclass: RrClass::IN,
        };
        let mut out = Vec::new();
        encode_query(0xbeef, &q, true, None, &mut out);
        assert_eq!(
            out,
            hex("beef 0100 0001 0000 0000 0000  01 61 02 6263 00  0001 0001")
        );
        out.clear();
        encode_query(1, &q, false, Some(1232), &mut out);
        assert_eq!(
            out,
            hex("0001 0000 0001 0000 0000 0001  01 61 02 6263 00  0001 0001  00 0029 04d0 00000000 0000")
        );
    }

    #[test]
    fn decodes_a_compressed_answer_with_cname_and_skips_mx() {
        // Question www.ex.; answers: www.ex. CNAME ex. ; ex. A 192.0.2.1 ; ex. AAAA ;
        // ex. MX 10 ex. (skipped, its name compressed).
        let m = hex("1234 8180 0001 0004 0000 0000
             03 777777 02 6578 00 0001 0001
             c00c 0005 0001 0000012c 0002 c010
             c010 0001 0001 00000e10 0004 c0000201
             c010 001c 0001 80000010 0010 20010db8000000000000000000000001
             c010 000f 0001 00000010 0004 000a c010");
        let msg = Message::decode(&m).unwrap();
        assert!(msg.header.qr && msg.header.rd && msg.header.ra && !msg.header.tc);
        assert_eq!(msg.header.rcode, Rcode::NOERROR);
        assert_eq!(msg.questions[0].qname, name("WWW.ex"));
        assert_eq!(msg.answers.len(), 4);
        assert_eq!(msg.answers[0].data, RData::Cname(name("ex")));
        assert_eq!(msg.answers[0].ttl, 300);
        assert_eq!(msg.answers[1].data, RData::A(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(msg.answers[1].name, name("ex."));
        assert_eq!(
            msg.answers[2].data,
            RData::Aaaa("2001:db8::1".parse().unwrap())
        );
        // RFC 2181 §8: a TTL with the most significant bit set is treated as zero.
        assert_eq!(msg.answers[2].ttl, 0, "0x80000010 is read as 0");
        assert_eq!(msg.answers[3].rtype, RrType::MX);
        assert_eq!(msg.answers[3].data, RData::Other(hex("000a c010")));
    }

    #[test]
    fn rejects_pointer_loops_and_forward_pointers() {
        // The question's name is a pointer to itself.
        let m = hex("0000 8000 0001 0000 0000 0000 c00c 0001 0001");
        assert_eq!(
            Message::decode(&m).unwrap_err(),
            WireError::BadPointer {
                offset: 12,
                target: 12
            }
        );
        // A label, then a pointer back to that label: a loop through two hops.
        let m = hex("0000 8000 0001 0000 0000 0000 01 61 c00c 0001 0001");
        assert_eq!(
            Message::decode(&m).unwrap_err(),
            WireError::BadPointer {
                offset: 14,
                target: 12
            }
        );
        let m = hex("0000 8000 0001 0000 0000 0000 c00e 00 0001 0001");
        assert!(matches!(
            Message::decode(&m),
            Err(WireError::BadPointer { .. })
        ));
    }

    #[test]
    fn rejects_reserved_label_types_long_names_and_short_input() {
        let m = hex("0000 8000 0001 0000 0000 0000 41 00 0001 0001");
        assert_eq!(
            Message::decode(&m).unwrap_err(),
            WireError::BadLabelType {
                offset: 12,
                octet: 0x41
            }
        );
        let mut m = hex("0000 8000 0001 0000 0000 0000");
        for _ in 0..5 {
            m.push(63);
            m.extend_from_slice(&[b'a'; 63]);
        }
        m.extend_from_slice(&hex("00 0001 0001"));
        assert_eq!(
            Message::decode(&m).unwrap_err(),
            WireError::NameTooLong { offset: 12 }
        );
        assert_eq!(
            Message::decode(&hex("0000 8000 00")).unwrap_err(),
            WireError::Truncated {
                what: "header",
                offset: 0
            }
        );
        let m = hex("0000 8000 0001 0000 0000 0000 01 61 00 0001");
        assert_eq!(
            Message::decode(&m).unwrap_err(),
            WireError::Truncated {
                what: "question",
                offset: 12
            }
        );
        let m = hex("0000 8000 0000 ffff 0000 0000");
        assert_eq!(
            Message::decode(&m).unwrap_err(),
            WireError::CountTooLarge {
                section: "answer",
                count: 0xffff
            }
        );
    }

    #[test]
    fn rejects_bad_rdata_lengths() {
        let m = hex("0000 8000 0000 0001 0000 0000 00 0001 0001 00000000 0003 010203");
        assert!(matches!(
            Message::decode(&m),
            Err(WireError::BadRdata {
                rtype: RrType::A,
                rdlength: 3,
                ..
            })
        ));
        // A CNAME whose name is shorter than its RDLENGTH.
        let m = hex("0000 8000 0000 0001 0000 0000 00 0005 0001 00000000 0003 00 0000");
        assert!(matches!(
            Message::decode(&m),
            Err(WireError::BadRdata {
                rtype: RrType::CNAME,
                ..
            })
        ));
    }

    #[test]
    fn opt_sets_the_extended_rcode_and_is_checked() {
        // RCODE 0x1 in the header plus extended 0x01 -> 0x11 (BADVERS is 16|0 = 16).
        let m = hex("0000 8001 0000 0000 0000 0001 00 0029 1000 01000000 0000");
        let msg = Message::decode(&m).unwrap();
        assert_eq!(msg.header.rcode, Rcode(0x11));
        assert_eq!(msg.edns.unwrap().udp_payload_size, 4096);
        let twice = hex(
            "0000 8000 0000 0000 0000 0002 00 0029 1000 00000000 0000 00 0029 1000 00000000 0000",
        );
        assert_eq!(
            Message::decode(&twice).unwrap_err(),
            WireError::BadOpt { offset: 23 }
        );
        let in_answer = hex("0000 8000 0000 0001 0000 0000 00 0029 1000 00000000 0000");
        assert!(matches!(
            Message::decode(&in_answer),
            Err(WireError::BadOpt { .. })
        ));
    }

    #[test]
    fn encode_then_decode_round_trips() {
        let msg = Message {
            header: Header {
                id: 7,
                qr: true,
                opcode: 0,
                aa: true,
                tc: false,
                rd: true,
                ra: true,
                rcode: Rcode::NXDOMAIN,
                counts: [1, 2, 0, 0],
            },
            questions: vec![Question {
                qname: name("x.y"),
                qtype: RrType::AAAA,
                qclass: RrClass::IN,
            }],
            answers: vec![
                Record {
                    name: name("x.y"),
                    rtype: RrType::CNAME,
                    class: RrClass::IN,
                    ttl: 5,
                    data: RData::Cname(name("z.y")),
                },
                Record {
                    name: name("z.y"),
                    rtype: RrType::AAAA,
                    class: RrClass::IN,
                    ttl: 6,
                    data: RData::Aaaa("::1".parse().unwrap()),
                },
            ],
            authority: vec![],
            additional: vec![],
            edns: Some(Edns {
                udp_payload_size: 1232,
                extended_rcode: 0,
                version: 0,
                dnssec_ok: false,
            }),
        };
        let mut out = Vec::new();
        msg.encode(&mut out);
        let mut back = Message::decode(&out).unwrap();
        back.header.counts = msg.header.counts;
        assert_eq!(back, msg);
    }

    #[test]
    fn names_parse_display_and_compare_without_case() {
        assert_eq!(name("Example.COM.").to_string(), "Example.COM.");
        assert_eq!(name("example.com"), name("EXAMPLE.com."));
        assert_eq!(name(".").to_string(), ".");
        assert_eq!(name("a.b.c").label_count(), 3);
        assert_eq!(
            name("www").join(&name("example.com")).unwrap(),
            name("www.example.com")
        );
        assert_eq!(Name::from_ascii("a..b"), Err("empty label"));
        assert_eq!(Name::from_ascii(""), Err("empty name"));
        assert!(Name::from_ascii(&"a".repeat(64)).is_err());
        assert!(Name::from_ascii(&vec!["a".repeat(63); 4].join(".")).is_err());
        assert_eq!(Name::from_ascii("a b").unwrap().to_string(), "a\\032b.");
    }

    /// A name of `labels` labels of `len` octets each: its wire size is
    /// `labels * (len + 1) + 1`.
    fn name_of(labels: usize, len: usize) -> String {
        vec!["a".repeat(len); labels].join(".")
    }

    #[test]
    fn names_respect_the_label_and_name_limits() {
        // RFC 1035 §2.3.4: labels of 63 octets or less, names of 255 octets or less.
        assert!(Name::from_ascii(&"x".repeat(63)).is_ok());
        assert!(Name::from_ascii(&"x".repeat(64)).is_err());
        // 3 labels of 63 + one of 61: 3 * 64 + 62 + 1 = 255 octets exactly.
        let at_limit = format!("{}.{}", name_of(3, 63), "b".repeat(61));
        assert_eq!(Name::from_ascii(&at_limit).unwrap().as_wire().len(), 255);
        let over = format!("{}.{}", name_of(3, 63), "b".repeat(62));
        assert!(Name::from_ascii(&over).is_err());
        assert!(Name::from_ascii("a..b").is_err());
        assert!(Name::from_ascii("").is_err());
        assert_eq!(Name::from_ascii(".").unwrap().as_wire(), &[0]);
    }

    #[test]
    fn wire_form_and_join() {
        let www = Name::from_ascii("www").unwrap();
        assert_eq!(www.as_wire(), b"\x03www\x00");
        let full = www
            .join(&Name::from_ascii("example.com.").unwrap())
            .unwrap();
        assert_eq!(full.as_wire(), b"\x03www\x07example\x03com\x00");
        assert_eq!(full.label_count(), 3);
        // Joining up to exactly 255 octets works; one more octet does not.
        let left = Name::from_ascii(&name_of(2, 63)).unwrap(); // 129 octets with root
        let right = Name::from_ascii(&format!("{}.{}", "c".repeat(63), "d".repeat(61))).unwrap(); // 127
        assert_eq!(left.join(&right).unwrap().as_wire().len(), 255);
        let right = Name::from_ascii(&format!("{}.{}", "c".repeat(63), "d".repeat(62))).unwrap();
        assert!(left.join(&right).is_err());
    }

    #[test]
    fn names_compare_and_hash_without_case() {
        // RFC 4343: DNS names are case-insensitive.
        let a = Name::from_ascii("WWW.Example.COM").unwrap();
        let b = Name::from_ascii("www.example.com.").unwrap();
        assert_eq!(a, b);
        let mut set = std::collections::HashSet::new();
        set.insert(a);
        assert!(set.contains(&b));
        assert!(!set.contains(&Name::from_ascii("www.example.org").unwrap()));
    }

    #[test]
    fn names_and_types_display_in_master_file_form() {
        // RFC 1035 §5.1: other bytes as \DDD; a trailing dot; the root is ".".
        let n = Name::from_ascii("a b.x_y-z").unwrap();
        assert_eq!(n.to_string(), "a\\032b.x_y-z.");
        assert_eq!(format!("{n:?}"), "Name(a\\032b.x_y-z.)");
        assert_eq!(Name::root().to_string(), ".");
        assert_eq!(RrType::AAAA.to_string(), "AAAA");
        assert_eq!(format!("{:?}", RrType(99)), "TYPE99");
    }

    /// The name with these labels, as they come off the wire (any octets, `.` too).
    fn name_of_labels(labels: &[&[u8]]) -> Name {
        let mut wire = Vec::new();
        for label in labels {
            wire.push(label.len() as u8);
            wire.extend_from_slice(label);
        }
        wire.push(0);
        Name { wire }
    }

    #[test]
    fn only_master_file_specials_and_non_printing_octets_are_escaped() {
        // RFC 1035 §5.1: `.`, `\`, `"`, `(`, `)`, `;`, `@` and `$` are special in master
        // files and written `\X`; octets that do not print (space, controls, DEL,
        // non-ASCII) are written `\DDD`; every other printable octet is itself, as dig
        // prints it. `*` is no special: a wildcard owner (RFC 4592 §2.1.1) reads `*.`.
        let star = name_of_labels(&[b"*", b"cdn", b"example", b"net"]);
        assert_eq!(star.to_string(), "*.cdn.example.net.");
        assert_eq!(name("*.cdn.example.net").to_string(), "*.cdn.example.net.");
        let printable = name_of_labels(&[b"!#%&'*+,/:<=>?[]^`{|}~", b"a-b_c"]);
        assert_eq!(printable.to_string(), "!#%&'*+,/:<=>?[]^`{|}~.a-b_c.");
        let specials = name_of_labels(&[b"a.b", b"\\", b"\"()", b";@$"]);
        assert_eq!(specials.to_string(), r#"a\.b.\\.\"\(\).\;\@\$."#);
        let unprintable = name_of_labels(&[b"a b", b"\x00\x1f\x7f\x80\xff"]);
        assert_eq!(unprintable.to_string(), r"a\032b.\000\031\127\128\255.");
    }

    /// A 12-octet header with these flags and counts.
    fn header(flags: u16, counts: [u16; 4]) -> Vec<u8> {
        let mut m = vec![0x12, 0x34];
        m.extend_from_slice(&flags.to_be_bytes());
        for c in counts {
            m.extend_from_slice(&c.to_be_bytes());
        }
        m
    }

    #[test]
    fn header_flags_are_read_from_their_own_bits() {
        // RFC 1035 §4.1.1: QR(15) OPCODE(14-11) AA(10) TC(9) RD(8) RA(7) Z(6-4) RCODE(3-0).
        let h = |flags| Message::decode(&header(flags, [0; 4])).unwrap().header;
        let none = Header {
            id: 0x1234,
            qr: false,
            opcode: 0,
            aa: false,
            tc: false,
            rd: false,
            ra: false,
            rcode: Rcode::NOERROR,
            counts: [0; 4],
        };
        assert_eq!(h(0x0000), none);
        // The Z bits are ignored.
        assert_eq!(h(0x0070), none);
        assert_eq!(h(0x8000), Header { qr: true, ..none });
        assert_eq!(h(0x0800), Header { opcode: 1, ..none });
        assert_eq!(h(0x2000), Header { opcode: 4, ..none });
        assert_eq!(h(0x7800), Header { opcode: 15, ..none });
        assert_eq!(h(0x0400), Header { aa: true, ..none });
        assert_eq!(h(0x0200), Header { tc: true, ..none });
        assert_eq!(h(0x0100), Header { rd: true, ..none });
        assert_eq!(h(0x0080), Header { ra: true, ..none });
        assert_eq!(
            h(0x000f),
            Header {
                rcode: Rcode(15),
                ..none
            }
        );
        let all = Header {
            qr: true,
            opcode: 15,
            aa: true,
            tc: true,
            rd: true,
            ra: true,
            rcode: Rcode(15),
            ..none
        };
        assert_eq!(h(0xffff), all);
        // The query encode_query writes reads back as a query, not a response.
        let q = Question {
            qname: name("a"),
            qtype: RrType::A,
            qclass: RrClass::IN,
        };
        let mut out = Vec::new();
        encode_query(9, &q, false, None, &mut out);
        let back = Message::decode(&out).unwrap().header;
        assert!(
            !back.qr && !back.rd && !back.ra && back.opcode == 0,
            "{back:?}"
        );
    }

    fn empty_message(header: Header) -> Message {
        Message {
            header,
            questions: vec![],
            answers: vec![],
            authority: vec![],
            additional: vec![],
            edns: None,
        }
    }

    #[test]
    fn encode_packs_each_header_field_into_its_bits() {
        let none = Header {
            id: 0xabcd,
            qr: false,
            opcode: 0,
            aa: false,
            tc: false,
            rd: false,
            ra: false,
            rcode: Rcode::NOERROR,
            counts: [0; 4],
        };
        let flags = |h: Header| {
            let mut out = Vec::new();
            empty_message(h).encode(&mut out);
            assert_eq!(out.len(), HEADER_SIZE);
            assert_eq!(out[..2], [0xab, 0xcd]);
            u16::from_be_bytes([out[2], out[3]])
        };
        assert_eq!(flags(none), 0x0000);
        assert_eq!(flags(Header { qr: true, ..none }), 0x8000);
        assert_eq!(flags(Header { opcode: 1, ..none }), 0x0800);
        assert_eq!(flags(Header { opcode: 5, ..none }), 0x2800);
        // OPCODE is four bits: higher bits of the u8 are dropped, not spilled into QR.
        assert_eq!(
            flags(Header {
                opcode: 0x1f,
                ..none
            }),
            0x7800
        );
        assert_eq!(flags(Header { aa: true, ..none }), 0x0400);
        assert_eq!(flags(Header { tc: true, ..none }), 0x0200);
        assert_eq!(flags(Header { rd: true, ..none }), 0x0100);
        assert_eq!(flags(Header { ra: true, ..none }), 0x0080);
        // Without an OPT record only the low four bits of the RCODE can be sent.
        assert_eq!(
            flags(Header {
                rcode: Rcode(0x1f3),
                ..none
            }),
            0x0003
        );
        // Every field set: decode gives the same header back.
        let all = Header {
            qr: true,
            opcode: 2,
            aa: true,
            tc: true,
            rd: true,
            ra: true,
            rcode: Rcode::REFUSED,
            ..none
        };
        assert_eq!(flags(all), 0x9785);
        let mut out = Vec::new();
        empty_message(all).encode(&mut out);
        assert_eq!(Message::decode(&out).unwrap().header, all);
    }

    #[test]
    fn opt_record_carries_payload_size_extended_rcode_version_and_do() {
        // RFC 6891 §6.1.3: the OPT TTL is EXTENDED-RCODE(8) VERSION(8) DO(1) Z(15); the
        // full RCODE is EXTENDED-RCODE << 4 | header RCODE.
        let mut msg = empty_message(Header {
            id: 1,
            qr: true,
            opcode: 0,
            aa: false,
            tc: false,
            rd: false,
            ra: false,
            rcode: Rcode(0xabc),
            counts: [0; 4],
        });
        msg.edns = Some(Edns {
            udp_payload_size: 4096,
            extended_rcode: 0xab,
            version: 1,
            dnssec_ok: true,
        });
        let mut out = Vec::new();
        msg.encode(&mut out);
        assert_eq!(
            out,
            hex("0001 800c 0000 0000 0000 0001  00 0029 1000 ab 01 8000 0000")
        );
        let back = Message::decode(&out).unwrap();
        assert_eq!(back.header.rcode, Rcode(0xabc));
        assert_eq!(back.edns, msg.edns);
        // Each field alone, so none can hide behind another.
        for (ext, version, dnssec_ok, ttl) in [
            (0x01, 0, false, "01 00 0000"),
            (0, 0x02, false, "00 02 0000"),
            (0, 0, true, "00 00 8000"),
            (0xff, 0xff, true, "ff ff 8000"),
        ] {
            msg.header.rcode = Rcode((ext as u16) << 4);
            msg.edns = Some(Edns {
                udp_payload_size: 512,
                extended_rcode: ext,
                version,
                dnssec_ok,
            });
            out.clear();
            msg.encode(&mut out);
            let want = hex(&format!("00 0029 0200 {ttl} 0000"));
            assert_eq!(out[HEADER_SIZE..], want[..], "{ext} {version} {dnssec_ok}");
            let back = Message::decode(&out).unwrap();
            assert_eq!(back.edns, msg.edns);
            assert_eq!(back.header.rcode, msg.header.rcode);
        }
    }

    #[test]
    fn a_message_cut_after_its_question_decodes_its_head_only() {
        let q = Question {
            qname: Name::from_ascii("cut.keel.test").unwrap(),
            qtype: RrType::A,
            qclass: RrClass::IN,
        };
        let mut m = Vec::new();
        encode_query(0x1234, &q, true, None, &mut m);
        m[2] |= 0x82; // QR and TC
        m[7] = 3; // ANCOUNT 3, with only part of one record after the question
        let whole = m.len();
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
        assert!(Message::decode(&m).is_err());
        let head = Message::decode_head(&m).unwrap();
        assert!(head.header.tc && head.header.qr);
        assert_eq!(head.header.id, 0x1234);
        assert_eq!(head.header.counts, [1, 3, 0, 0]);
        assert_eq!(head.questions, [q]);
        assert!(head.answers.is_empty());
        // The question itself must be whole.
        assert!(Message::decode_head(&m[..whole - 1]).is_err());
    }

    #[test]
    fn decoded_names_may_take_255_octets_and_no_more() {
        // RFC 1035 §3.1: 255 octets or less, counting length octets and the root label.
        let question = |labels: &[usize]| {
            let mut m = header(0, [1, 0, 0, 0]);
            for &len in labels {
                m.push(len as u8);
                m.extend(std::iter::repeat_n(b'x', len));
            }
            m.extend_from_slice(&hex("00 0001 0001"));
            Message::decode(&m)
        };
        // 3 * 64 + 62 + 1 = 255.
        let m = question(&[63, 63, 63, 61]).unwrap();
        assert_eq!(m.questions[0].qname.as_wire().len(), 255);
        assert_eq!(
            question(&[63, 63, 63, 62]).unwrap_err(),
            WireError::NameTooLong { offset: 12 }
        );
        // 4 * 64 = 256 before the root label.
        assert_eq!(
            question(&[63, 63, 63, 63]).unwrap_err(),
            WireError::NameTooLong { offset: 12 }
        );
    }

    /// A message whose second answer's owner name is reached through `pointers`
    /// compression pointers, each pointing to the one before it, the first to a root
    /// label inside the first answer's RDATA.
    fn pointer_chain(pointers: usize) -> Vec<u8> {
        let mut m = header(0x8000, [0, 2, 0, 0]);
        let chain = pointers - 1; // pointers inside the RDATA
        m.extend_from_slice(&hex("00 0010 0001 00000000"));
        m.extend_from_slice(&(1 + 2 * chain as u16).to_be_bytes());
        let root_at = m.len();
        m.push(0);
        let mut target = root_at;
        for _ in 0..chain {
            let at = m.len();
            m.extend_from_slice(&(0xc000 | target as u16).to_be_bytes());
            target = at;
        }
        m.extend_from_slice(&(0xc000 | target as u16).to_be_bytes());
        m.extend_from_slice(&hex("0001 0001 00000000 0004 c0000201"));
        m
    }

    #[test]
    fn a_name_may_follow_127_pointers_and_no_more() {
        let m = Message::decode(&pointer_chain(MAX_POINTERS)).unwrap();
        assert_eq!(m.answers[1].name, Name::root());
        assert_eq!(m.answers[1].data, RData::A(Ipv4Addr::new(192, 0, 2, 1)));
        let m = pointer_chain(MAX_POINTERS + 1);
        let second = m.len() - 16; // the pointer, then 14 octets of type to RDATA
        assert_eq!(
            Message::decode(&m).unwrap_err(),
            WireError::TooManyPointers { offset: second }
        );
    }

    #[test]
    fn counts_are_checked_against_the_octets_left() {
        // A question takes at least 5 octets (root, QTYPE, QCLASS), a record at least 11
        // (root, TYPE, CLASS, TTL, RDLENGTH).
        let question = hex("00 0001 0001");
        let record = hex("00 0010 0001 00000000 0000");
        let mut m = header(0, [1, 0, 0, 0]);
        m.extend_from_slice(&question);
        assert_eq!(Message::decode(&m).unwrap().questions.len(), 1);
        m.pop();
        assert_eq!(
            Message::decode(&m).unwrap_err(),
            WireError::CountTooLarge {
                section: "question",
                count: 1
            }
        );
        for (i, section) in [(1, "answer"), (2, "authority"), (3, "additional")] {
            let mut counts = [0; 4];
            counts[i] = 1;
            let mut m = header(0, counts);
            m.extend_from_slice(&record);
            assert!(Message::decode(&m).is_ok(), "{section}");
            m.pop();
            assert_eq!(
                Message::decode(&m).unwrap_err(),
                WireError::CountTooLarge { section, count: 1 }
            );
            assert_eq!(
                Message::decode(&header(0, counts)).unwrap_err(),
                WireError::CountTooLarge { section, count: 1 }
            );
        }
        assert_eq!(
            Message::decode(&header(0, [1, 0, 0, 0])).unwrap_err(),
            WireError::CountTooLarge {
                section: "question",
                count: 1
            }
        );
    }

    #[test]
    fn names_hash_by_their_letters_without_case() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let h = |s: &str| {
            BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
                .hash_one(name(s))
        };
        assert_eq!(h("WWW.Example.COM"), h("www.example.com"));
        // Different names hash differently (a constant hash would make every map of
        // names a list).
        assert_ne!(h("a.example"), h("b.example"));
        assert_ne!(h("example"), h("example.com"));
    }
}

//! A minimal DER reader (X.690 §8, §10) for the certificate fields keel's policy checks and
//! the `openssl` crate does not expose: extension criticality, name constraints, AKI, AIA.
//!
//! Only single-byte tags and definite lengths of at most four bytes are accepted; anything
//! else is reported as malformed. Every read is bounds-checked: no input panics.

/// Malformed DER.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed;

pub(crate) const BOOLEAN: u8 = 0x01;
pub(crate) const INTEGER: u8 = 0x02;
pub(crate) const OCTET_STRING: u8 = 0x04;
pub(crate) const OID: u8 = 0x06;
pub(crate) const SEQUENCE: u8 = 0x30;

/// A cursor over DER bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next tag, without consuming it.
    pub(crate) fn peek_tag(&self) -> Option<u8> {
        self.data.first().copied()
    }

    /// Reads one TLV; returns its tag and contents.
    pub(crate) fn read_any(&mut self) -> Result<(u8, &'a [u8]), Malformed> {
        let tag = *self.data.first().ok_or(Malformed)?;
        if tag & 0x1f == 0x1f {
            return Err(Malformed);
        }
        let first = *self.data.get(1).ok_or(Malformed)?;
        let (len, header) = if first < 0x80 {
            (usize::from(first), 2usize)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 {
                return Err(Malformed);
            }
            let bytes = self.data.get(2..2 + n).ok_or(Malformed)?;
            let len = bytes
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, 2 + n)
        };
        let end = header.checked_add(len).ok_or(Malformed)?;
        let content = self.data.get(header..end).ok_or(Malformed)?;
        self.data = self.data.get(end..).ok_or(Malformed)?;
        Ok((tag, content))
    }

    /// Reads one TLV that must have `tag`.
    pub(crate) fn read(&mut self, tag: u8) -> Result<&'a [u8], Malformed> {
        let (t, c) = self.read_any()?;
        if t == tag {
            Ok(c)
        } else {
            Err(Malformed)
        }
    }

    /// Reads a TLV with `tag` if the next one has it.
    pub(crate) fn read_optional(&mut self, tag: u8) -> Result<Option<&'a [u8]>, Malformed> {
        if self.peek_tag() == Some(tag) {
            self.read(tag).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// One extension of a certificate (RFC 5280 §4.1.2.9).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Extension<'a> {
    /// The OID's content bytes.
    pub oid: &'a [u8],
    pub critical: bool,
    /// The extnValue OCTET STRING's contents.
    pub value: &'a [u8],
}

/// The parts of a certificate's TBSCertificate (RFC 5280 §4.1) the policy looks at.
#[derive(Debug, Clone)]
pub(crate) struct TbsView<'a> {
    /// 0 = v1, 1 = v2, 2 = v3.
    pub version: u64,
    /// The serial number's INTEGER contents (two's complement, big-endian).
    pub serial: &'a [u8],
    pub extensions: Vec<Extension<'a>>,
}

impl<'a> TbsView<'a> {
    /// Parses a DER Certificate.
    pub(crate) fn parse(cert: &'a [u8]) -> Result<Self, Malformed> {
        let mut outer = Reader::new(Reader::new(cert).read(SEQUENCE)?);
        let mut tbs = Reader::new(outer.read(SEQUENCE)?);
        let version = match tbs.read_optional(0xa0)? {
            Some(v) => {
                let int = Reader::new(v).read(INTEGER)?;
                if int.len() != 1 {
                    return Err(Malformed);
                }
                u64::from(int[0])
            }
            None => 0,
        };
        let serial = tbs.read(INTEGER)?;
        tbs.read(SEQUENCE)?; // signature
        tbs.read(SEQUENCE)?; // issuer
        tbs.read(SEQUENCE)?; // validity
        tbs.read(SEQUENCE)?; // subject
        tbs.read(SEQUENCE)?; // subjectPublicKeyInfo
        tbs.read_optional(0x81)?; // issuerUniqueID
        tbs.read_optional(0x81 | 0x20)?;
        tbs.read_optional(0x82)?; // subjectUniqueID
        tbs.read_optional(0x82 | 0x20)?;
        let mut extensions = Vec::new();
        if let Some(exts) = tbs.read_optional(0xa3)? {
            let mut list = Reader::new(Reader::new(exts).read(SEQUENCE)?);
            while !list.is_empty() {
                let mut ext = Reader::new(list.read(SEQUENCE)?);
                let oid = ext.read(OID)?;
                let critical = match ext.read_optional(BOOLEAN)? {
                    Some([0xff]) => true,
                    Some([0x00]) => false,
                    Some(_) => return Err(Malformed),
                    None => false,
                };
                let value = ext.read(OCTET_STRING)?;
                if !ext.is_empty() {
                    return Err(Malformed);
                }
                extensions.push(Extension {
                    oid,
                    critical,
                    value,
                });
            }
        }
        if !tbs.is_empty() {
            return Err(Malformed);
        }
        Ok(TbsView {
            version,
            serial,
            extensions,
        })
    }

    /// The extension with `oid`, if present.
    pub(crate) fn extension(&self, oid: &[u8]) -> Option<&Extension<'a>> {
        self.extensions.iter().find(|e| e.oid == oid)
    }
}

/// Extension OIDs (content bytes of id-ce-* and id-pe-*, RFC 5280 §4.2).
pub(crate) mod oid {
    pub const SUBJECT_KEY_IDENTIFIER: &[u8] = &[0x55, 0x1d, 0x0e];
    pub const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
    pub const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13];
    pub const NAME_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x1e];
    pub const POLICY_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x24];
    pub const AUTHORITY_KEY_IDENTIFIER: &[u8] = &[0x55, 0x1d, 0x23];
    pub const EXT_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25];
    pub const AUTHORITY_INFO_ACCESS: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x01];
    /// anyExtendedKeyUsage, 2.5.29.37.0.
    pub const ANY_EXTENDED_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25, 0x00];
    /// id-kp-serverAuth, 1.3.6.1.5.5.7.3.1 (RFC 5280 §4.2.1.12).
    pub const KP_SERVER_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
    /// id-kp-clientAuth, 1.3.6.1.5.5.7.3.2 (RFC 5280 §4.2.1.12).
    pub const KP_CLIENT_AUTH: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_short_and_long_lengths() {
        let mut r = Reader::new(&[0x04, 0x02, 0xaa, 0xbb, 0x30, 0x81, 0x01, 0x05]);
        assert_eq!(r.read(OCTET_STRING), Ok(&[0xaa, 0xbb][..]));
        assert_eq!(r.read(SEQUENCE), Ok(&[0x05][..]));
        assert!(r.is_empty());
    }

    #[test]
    fn refuses_truncated_and_high_tags() {
        assert_eq!(Reader::new(&[0x04, 0x05, 0x00]).read_any(), Err(Malformed));
        assert_eq!(Reader::new(&[0x1f, 0x01, 0x00]).read_any(), Err(Malformed));
        assert_eq!(
            Reader::new(&[0x04, 0x85, 0, 0, 0, 0, 1]).read_any(),
            Err(Malformed)
        );
        assert_eq!(Reader::new(&[]).read_any(), Err(Malformed));
    }
}

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

    #[test]
    fn long_form_lengths_take_one_to_four_octets() {
        // X.690 §8.1.3.5: 0x80 alone is the indefinite form, which DER forbids (§10.1),
        // even when 128 octets follow.
        let mut indefinite = vec![0x04, 0x80];
        indefinite.extend_from_slice(&[0u8; 128]);
        assert_eq!(Reader::new(&indefinite).read_any(), Err(Malformed));
        assert_eq!(
            Reader::new(&[0x04, 0x80, 0x00, 0x00]).read_any(),
            Err(Malformed)
        );
        let mut one = vec![0x04, 0x81, 0x80];
        one.extend_from_slice(&[7u8; 128]);
        assert_eq!(Reader::new(&one).read_any(), Ok((0x04, &[7u8; 128][..])));
        let mut two = vec![0x04, 0x82, 0x01, 0x02];
        two.extend_from_slice(&[9u8; 0x102]);
        assert_eq!(Reader::new(&two).read_any(), Ok((0x04, &[9u8; 0x102][..])));
        assert_eq!(
            Reader::new(&[0x04, 0x84, 0, 0, 0, 1, 0xaa]).read_any(),
            Ok((0x04, &[0xaa][..]))
        );
        assert_eq!(
            Reader::new(&[0x04, 0x85, 0, 0, 0, 0, 1, 0xaa]).read_any(),
            Err(Malformed)
        );
        // The reader moves past the whole TLV, whatever the length form.
        let mut r = Reader::new(&[0x04, 0x81, 0x01, 0xaa, 0x05, 0x00]);
        assert_eq!(r.read(OCTET_STRING), Ok(&[0xaa][..]));
        assert_eq!(r.peek_tag(), Some(0x05));
        assert_eq!(r.read(0x05), Ok(&[][..]));
        assert!(r.is_empty());
        assert_eq!(r.peek_tag(), None);
    }

    #[test]
    fn read_checks_the_tag_and_read_optional_leaves_others() {
        let mut r = Reader::new(&[0x02, 0x01, 0x05, 0x04, 0x00]);
        assert_eq!(r.read_optional(BOOLEAN), Ok(None));
        assert_eq!(r.read_optional(INTEGER), Ok(Some(&[0x05][..])));
        assert_eq!(r.clone().read(INTEGER), Err(Malformed));
        assert_eq!(r.read(OCTET_STRING), Ok(&[][..]));
        assert_eq!(r.read_optional(INTEGER), Ok(None));
        assert_eq!(Reader::new(&[0x3f, 0x01, 0x00]).read_any(), Err(Malformed));
        assert_eq!(Reader::new(&[0x04]).read_any(), Err(Malformed));
    }

    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        assert!(content.len() < 0x80);
        [&[tag, content.len() as u8][..], content].concat()
    }

    /// A Certificate whose TBSCertificate holds `tbs` (the signature algorithm and value
    /// are not looked at).
    fn cert(tbs: &[Vec<u8>]) -> Vec<u8> {
        let tbs = tlv(SEQUENCE, &tbs.concat());
        let mut body = tbs;
        body.extend(tlv(SEQUENCE, &[]));
        body.extend(tlv(0x03, &[0]));
        let mut out = vec![SEQUENCE, 0x81, body.len() as u8];
        out.extend(body);
        out
    }

    /// version [0], serial, then signature, issuer, validity, subject and SPKI.
    fn head(version: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        if let Some(ver) = version {
            v.push(tlv(0xa0, &tlv(INTEGER, ver)));
        }
        v.push(tlv(INTEGER, &[0x00, 0x80]));
        for _ in 0..5 {
            v.push(tlv(SEQUENCE, &[]));
        }
        v
    }

    fn ext(oid: &[u8], critical: Option<u8>, value: &[u8]) -> Vec<u8> {
        let mut e = tlv(OID, oid);
        if let Some(c) = critical {
            e.extend(tlv(BOOLEAN, &[c]));
        }
        e.extend(tlv(OCTET_STRING, value));
        tlv(SEQUENCE, &e)
    }

    fn exts(list: &[Vec<u8>]) -> Vec<u8> {
        tlv(0xa3, &tlv(SEQUENCE, &list.concat()))
    }

    #[test]
    fn tbs_view_reads_version_serial_and_extensions() {
        let mut tbs = head(Some(&[2]));
        tbs.push(exts(&[
            ext(oid::BASIC_CONSTRAINTS, Some(0xff), &[0x30, 0x00]),
            ext(oid::SUBJECT_ALT_NAME, None, &[0x30, 0x00]),
            ext(oid::EXT_KEY_USAGE, Some(0x00), &[0x30, 0x00]),
        ]));
        let der = cert(&tbs);
        let v = TbsView::parse(&der).unwrap();
        assert_eq!(v.version, 2);
        assert_eq!(v.serial, &[0x00, 0x80]);
        assert_eq!(v.extensions.len(), 3);
        let bc = v.extension(oid::BASIC_CONSTRAINTS).unwrap();
        assert!(bc.critical);
        assert_eq!(bc.value, &[0x30, 0x00]);
        assert!(!v.extension(oid::SUBJECT_ALT_NAME).unwrap().critical);
        assert!(!v.extension(oid::EXT_KEY_USAGE).unwrap().critical);
        assert!(v.extension(oid::NAME_CONSTRAINTS).is_none());
        // Without [0] the version is v1.
        let der = cert(&head(None));
        let v = TbsView::parse(&der).unwrap();
        assert_eq!((v.version, v.extensions.len()), (0, 0));
    }

    #[test]
    fn tbs_view_skips_unique_ids_in_either_form() {
        // issuerUniqueID [1] and subjectUniqueID [2], primitive or constructed.
        for ids in [
            [tlv(0x81, &[0]), tlv(0xa2, &[])],
            [tlv(0xa1, &[]), tlv(0x82, &[0])],
            [tlv(0xa1, &[]), tlv(0xa2, &[])],
        ] {
            let mut tbs = head(Some(&[2]));
            tbs.extend(ids);
            tbs.push(exts(&[ext(oid::SUBJECT_ALT_NAME, None, &[])]));
            let der = cert(&tbs);
            let v = TbsView::parse(&der).unwrap();
            assert!(v.extension(oid::SUBJECT_ALT_NAME).is_some());
        }
        // A tag that is neither is not skipped.
        let mut tbs = head(Some(&[2]));
        tbs.push(tlv(0x00, &[]));
        assert_eq!(TbsView::parse(&cert(&tbs)).unwrap_err(), Malformed);
    }

    #[test]
    fn tbs_view_refuses_malformed_parts() {
        let bad = |tbs: Vec<Vec<u8>>| TbsView::parse(&cert(&tbs)).unwrap_err();
        // A version of two octets.
        assert_eq!(bad(head(Some(&[0, 2]))), Malformed);
        // A criticality other than 00 or ff (DER, X.690 §11.1).
        let mut tbs = head(Some(&[2]));
        tbs.push(exts(&[ext(oid::BASIC_CONSTRAINTS, Some(0x01), &[])]));
        assert_eq!(bad(tbs), Malformed);
        // Anything after extnValue.
        let mut tbs = head(Some(&[2]));
        let mut e = tlv(OID, oid::BASIC_CONSTRAINTS);
        e.extend(tlv(OCTET_STRING, &[]));
        e.extend(tlv(0x05, &[]));
        tbs.push(exts(&[tlv(SEQUENCE, &e)]));
        assert_eq!(bad(tbs), Malformed);
        // Anything after the extensions.
        let mut tbs = head(Some(&[2]));
        tbs.push(exts(&[]));
        tbs.push(tlv(0x05, &[]));
        assert_eq!(bad(tbs), Malformed);
        // A missing part.
        let mut tbs = head(Some(&[2]));
        tbs.pop();
        assert_eq!(bad(tbs), Malformed);
    }
}

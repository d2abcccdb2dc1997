//! The body of a `206` to several ranges: `multipart/byteranges` (RFC 9110
//! §14.6). It is laid out before it is sent, so that its exact length goes
//! in `Content-Length`; its pieces (each part's head, then its bytes) are
//! made as they are sent, so a few hundred ranges of a large file hold
//! nothing but their list.

use std::fmt::{self, Write};

use bytes::Bytes;
use http::HeaderValue;
use pkgproxy_sides::Piece;

use super::plan::ByteRange;

/// A multipart answer's layout: its boundary, its parts and what each
/// part's head says.
#[derive(Debug)]
pub struct Multipart {
    heads: Heads,
    ranges: Vec<ByteRange>,
}

/// What each part's head is made of.
#[derive(Debug)]
struct Heads {
    boundary: String,
    /// Each part's `Content-Type`: the body's own.
    content_type: String,
    /// The body's whole length, which each part's `Content-Range` names.
    complete: u64,
}

impl Multipart {
    /// The parts `ranges` of a body of `complete` bytes whose type is
    /// `content_type`.
    pub fn new(ranges: Vec<ByteRange>, complete: u64, content_type: &str) -> Multipart {
        let heads = Heads { boundary: boundary_not_in(content_type), content_type: content_type.to_owned(), complete };
        Multipart { heads, ranges }
    }

    /// The answer's own `Content-Type`, which names the boundary.
    pub fn content_type(&self) -> HeaderValue {
        let value = format!("multipart/byteranges; boundary={}", self.heads.boundary);
        HeaderValue::from_str(&value).expect("a boundary of letters, digits and a dash")
    }

    /// The body's exact length: the heads counted as they will be written,
    /// the parts' bytes and the closing delimiter.
    pub fn length(&self) -> u64 {
        let mut counted = Counted(0);
        for (n, range) in self.ranges.iter().enumerate() {
            self.heads.write(&mut counted, n, range).expect("counting does not fail");
        }
        let bytes: u64 = self.ranges.iter().map(ByteRange::len).sum();
        counted.0 + bytes + self.heads.closing().len() as u64
    }

    /// The body, in order: each part's head and its bytes as
    /// [`Piece::File`] (a range of the body), then the closing delimiter.
    pub fn pieces(self) -> impl Iterator<Item = Piece> + Send + 'static {
        let Multipart { heads, ranges } = self;
        let closing = Piece::Bytes(Bytes::from(heads.closing()));
        let parts = ranges.into_iter().enumerate().flat_map(move |(n, range)| {
            let mut head = String::new();
            heads.write(&mut head, n, &range).expect("writing to a string does not fail");
            [Piece::Bytes(Bytes::from(head)), Piece::File { offset: range.start, len: range.len() }]
        });
        parts.chain(std::iter::once(closing))
    }
}

impl Heads {
    /// The delimiter and header fields before part `n`, of `range` (RFC
    /// 2046 §5.1.1: every delimiter but the first begins with a CRLF).
    fn write(&self, out: &mut impl Write, n: usize, range: &ByteRange) -> fmt::Result {
        let before = if n == 0 { "" } else { "\r\n" };
        let Heads { boundary, content_type, complete } = self;
        write!(out, "{before}--{boundary}\r\nContent-Type: {content_type}\r\n")?;
        write!(out, "Content-Range: bytes {}-{}/{complete}\r\n\r\n", range.start, range.end)
    }

    /// The delimiter that ends the body.
    fn closing(&self) -> String {
        format!("\r\n--{}--\r\n", self.boundary)
    }
}

/// A sink that counts what is written to it, so a length is computed by
/// the very code that writes the bytes.
struct Counted(u64);

impl Write for Counted {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0 += s.len() as u64;
        Ok(())
    }
}

/// A boundary no one can predict (a body that held it would end its part
/// early for the client: the system's random numbers, not the body's
/// hash, which an upstream knows) and that is not within `content_type`,
/// the one header text of a part's head that is not pkgproxy's own.
fn boundary_not_in(content_type: &str) -> String {
    loop {
        let boundary = format!("pkgproxy-{}", hex::encode(random_bytes()));
        if !content_type.contains(&boundary) {
            return boundary;
        }
    }
}

fn random_bytes() -> [u8; 12] {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 12];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        // The system's generator failed: still a boundary, less secret.
        bytes.iter_mut().for_each(|byte| *byte = fastrand::u8(..));
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    /// The body `multipart` stands for, its ranges read from `body`.
    fn written(multipart: Multipart, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in multipart.pieces() {
            match piece {
                Piece::Bytes(bytes) => out.extend_from_slice(&bytes),
                Piece::File { offset, len } => out.extend_from_slice(&body[offset as usize..(offset + len) as usize]),
            }
        }
        out
    }

    #[test]
    fn the_body_is_each_part_with_its_head_and_its_length_is_exact() {
        let body: Vec<u8> = (0..1000u32).map(|n| (n % 251) as u8).collect();
        let multipart = Multipart::new(vec![range(500, 509), range(0, 0), range(990, 999)], 1000, "text/plain");
        let boundary = multipart.heads.boundary.clone();
        let length = multipart.length();
        let content_type = multipart.content_type();
        assert_eq!(content_type.to_str().unwrap(), format!("multipart/byteranges; boundary={boundary}"));
        let out = written(multipart, &body);
        assert_eq!(out.len() as u64, length);
        let head = |range: &str| {
            format!("--{boundary}\r\nContent-Type: text/plain\r\nContent-Range: bytes {range}/1000\r\n\r\n")
        };
        let mut expected = head("500-509").into_bytes();
        expected.extend_from_slice(&body[500..510]);
        expected.extend_from_slice(format!("\r\n{}", head("0-0")).as_bytes());
        expected.extend_from_slice(&body[0..1]);
        expected.extend_from_slice(format!("\r\n{}", head("990-999")).as_bytes());
        expected.extend_from_slice(&body[990..1000]);
        expected.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        assert!(out == expected, "{}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn a_thousand_parts_of_a_large_body_are_counted_exactly() {
        let ranges: Vec<ByteRange> = (0..1000u64).map(|n| range(n * 10_000_000, n * 10_000_000 + n)).collect();
        let multipart = Multipart::new(ranges, 20_000_000_000, "application/octet-stream");
        let length = multipart.length();
        let written: u64 = multipart
            .pieces()
            .map(|piece| match piece {
                Piece::Bytes(bytes) => bytes.len() as u64,
                Piece::File { len, .. } => len,
            })
            .sum();
        assert_eq!(written, length);
    }

    #[test]
    fn boundaries_differ_and_are_not_within_the_content_type() {
        let one = boundary_not_in("text/plain");
        let other = boundary_not_in("text/plain");
        assert_ne!(one, other);
        assert!(one.len() > 30 && one.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'), "{one}");
    }
}

//! What a side can add to a fetch: expectations looked up only when a fetch
//! starts, a check made on the bytes as they stream (a digest the store
//! does not compute itself), a last check of the complete body before it
//! is committed, and learning from it afterwards. The cache calls these; it does not know
//! what they mean (the apt side checks `Release` dates and learns
//! `Packages` indexes through them).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;

use crate::blobs::BodyHashes;
use crate::fetch::Expected;

/// A side's hooks into a fetch. Every method runs on a blocking thread
/// except [`Verifier::expected`], which must be quick.
pub trait Verifier: Send + Sync + std::fmt::Debug {
    /// What the body must match, beyond what the request already said
    /// (looked up when the fetch starts, not on every hit).
    fn expected(&self) -> Expected {
        Expected::default()
    }

    /// True when [`Verifier::check`] may refuse a body that is otherwise
    /// sound: clients then wait for the verdict instead of streaming a body
    /// that may be withdrawn (and can be given the cached copy instead).
    fn judges_body(&self) -> bool {
        false
    }

    /// A check fed every byte of the body as it arrives, in order (resumed
    /// parts included), whose verdict comes before [`Verifier::check`]: a
    /// digest of a large body is computed while it streams instead of
    /// reading the body again at its end, which would hold back its last
    /// byte from every client.
    fn streaming_check(&self) -> Option<Box<dyn StreamingCheck>> {
        None
    }

    /// Judges the complete body before it is committed; an `Err` keeps it
    /// out of the cache and fails the fetch for every waiter with the reason.
    fn check(&self, _body: &mut BodyReader<'_>, _hashes: &BodyHashes) -> Result<(), String> {
        Ok(())
    }

    /// Learns from the committed body, off every client's path; called
    /// only for a verifier that says it [`learns`](Verifier::learns).
    fn committed(&self, _body: &mut BodyReader<'_>, _hashes: &BodyHashes) {}

    /// Whether [`Verifier::committed`] learns anything: when it does, it
    /// runs on a blocking thread of its own, so a long read of the body
    /// (a `Packages` index) holds back no one waiting for the commit.
    fn learns(&self) -> bool {
        false
    }
}

/// A check of a body made as its bytes arrive (see
/// [`Verifier::streaming_check`]). Called on the fetch's task: `update`
/// must cost what hashing costs, no more.
pub trait StreamingCheck: Send {
    /// The next bytes of the body.
    fn update(&mut self, bytes: &[u8]);

    /// The verdict on the whole body; an `Err` keeps it out of the cache
    /// and fails the fetch for every waiter with the reason.
    fn verdict(self: Box<Self>) -> Result<(), String>;
}

/// Reads a body from its start with positioned reads, leaving the file's
/// cursor alone.
#[derive(Debug)]
pub struct BodyReader<'a> {
    file: &'a File,
    pos: u64,
}

impl<'a> BodyReader<'a> {
    /// A reader of `file` from its first byte.
    pub fn new(file: &'a File) -> Self {
        BodyReader { file, pos: 0 }
    }
}

impl Read for BodyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Seeking moves only this reader's position (archives are read from the
/// end first).
impl std::io::Seek for BodyReader<'_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let len = self.file.metadata()?.len();
        let target = match to {
            std::io::SeekFrom::Start(at) => Some(at),
            std::io::SeekFrom::End(delta) => len.checked_add_signed(delta),
            std::io::SeekFrom::Current(delta) => self.pos.checked_add_signed(delta),
        };
        let target =
            target.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start"))?;
        self.pos = target;
        Ok(target)
    }
}

impl Expected {
    /// `self`, with what `other` says where `self` says nothing.
    pub fn or(self, other: Expected) -> Expected {
        Expected {
            size: self.size.or(other.size),
            sha256: self.sha256.or(other.sha256),
            sha512: self.sha512.or(other.sha512),
        }
    }

    /// True when nothing is expected.
    pub fn is_empty(&self) -> bool {
        self.size.is_none() && self.sha256.is_none() && self.sha512.is_none()
    }
}

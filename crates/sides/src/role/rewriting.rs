//! The rewriting role: bodies made over for each client at serve time
//! (snap's download URLs, a registry's own URLs in a cargo `config.json`,
//! a PyPI page's and an npm document's file URLs), whole or as they stream,
//! and from a compressed form the side keeps.

use std::sync::Arc;

use bytes::Bytes;

use crate::decision::Rewrite;

/// Bodies made over for each client.
pub trait Rewriting: Send + Sync {
    /// `body`, an answer to a request that asked for `rewrite`, as this
    /// client is to get it; `None`: as it is.
    fn rewrite(&self, rewrite: &Rewrite, body: &[u8]) -> Option<Bytes>;

    /// For answers too large to hold whole (npm's documents run to tens
    /// of megabytes, asked by a hundred clients at once): a rewrite made
    /// as the body streams to the client, in place of
    /// [`Rewriting::rewrite`].
    fn streaming_rewrite(&self, _rewrite: &Rewrite) -> Option<Box<dyn StreamRewriter>> {
        None
    }

    /// For a client that takes gzip: the held body `stored`, served
    /// compressed and rewritten as `rewrite` says, from a compressed form
    /// the side keeps of it (npm's documents: a hundred clients of one are
    /// then sent the stored form, not each a compression of its own).
    /// `None`: served as [`Rewriting::streaming_rewrite`] says (the side
    /// may be making that form meanwhile).
    fn compressed(&self, _rewrite: &Rewrite, _stored: &StoredBody) -> Option<Pieced> {
        None
    }
}

/// A rewrite of a body as it streams to one client: bytes in, bytes out,
/// holding no more than it must.
pub trait StreamRewriter: Send + std::fmt::Debug {
    /// Takes the next bytes of the body, `input`, appending what the client
    /// gets of them to `output`.
    fn feed(&mut self, input: &[u8], output: &mut Vec<u8>);

    /// The body ended: appends what is still held to `output`.
    fn finish(&mut self, output: &mut Vec<u8>);
}

/// A held body, whole, as the cache serves it.
#[derive(Debug, Clone)]
pub struct StoredBody {
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
    /// Its length.
    pub size: u64,
    /// Its file (read it with positioned reads: the file is shared).
    pub file: Arc<std::fs::File>,
}

/// A body sent as ranges of a file with bytes in between, each made as it
/// is sent.
pub struct Pieced {
    /// The file the ranges are of.
    pub file: Arc<std::fs::File>,
    /// The body's whole length.
    pub len: u64,
    /// Its content coding (`gzip`).
    pub encoding: &'static str,
    /// Its pieces, in order.
    pub pieces: Box<dyn Iterator<Item = Piece> + Send>,
}

impl std::fmt::Debug for Pieced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pieced").field("len", &self.len).field("encoding", &self.encoding).finish_non_exhaustive()
    }
}

/// A piece of a [`Pieced`] body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// `len` bytes of the file from `offset`.
    File {
        /// Where they start.
        offset: u64,
        /// How many.
        len: u64,
    },
    /// Bytes of their own.
    Bytes(Bytes),
}

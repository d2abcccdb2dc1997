//! Signing a bundle as it is written: the daemon streams the tar; the
//! signature over its manifest's SHA-256 goes in right after the entry
//! holding that SHA-256, and everything else passes through as it comes.
//! The key never leaves this process: the daemon, which faces the network,
//! never holds it.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pkgproxy_server::bundle::{MANIFEST, MANIFEST_SUM, SIGNATURE};
use pkgproxy_server::signing::SigningKey;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWrite;

/// A tar block.
const BLOCK: usize = 512;

/// Where in the bundle the stream is.
enum Place {
    /// In the header of entry 0 (the manifest) or 1 (its SHA-256).
    Header { entry: usize, header: Vec<u8> },
    /// In the data of entry 0 or 1: `data` bytes of it left, then
    /// `padding` bytes.
    Data { entry: usize, data: u64, padding: u64 },
    /// After the signature: everything passes.
    Passing,
}

/// Writes a bundle to `inner`, the signature by `key` inserted.
pub struct Signing<W> {
    inner: W,
    key: SigningKey,
    place: Place,
    manifest: Sha256,
    sum: Vec<u8>,
    /// When the manifest says it was written: the signature's too.
    mtime: u64,
    /// Bytes taken and not yet written to `inner`, from `sent` on.
    pending: Vec<u8>,
    sent: usize,
}

impl<W: AsyncWrite + Unpin> Signing<W> {
    pub fn new(inner: W, key: SigningKey) -> Self {
        Signing {
            inner,
            key,
            place: Place::Header { entry: 0, header: Vec::with_capacity(BLOCK) },
            manifest: Sha256::new(),
            sum: Vec::new(),
            mtime: 0,
            pending: Vec::new(),
            sent: 0,
        }
    }

    /// The writer, once the bundle passed its signature; an error when it
    /// ended before (the daemon's stream broke off).
    pub fn finish(self) -> io::Result<W> {
        match self.place {
            Place::Passing => Ok(self.inner),
            _ => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the bundle ended before it could be signed")),
        }
    }

    /// Reads `data` as the next bytes of the bundle, adding what goes out
    /// to `pending`.
    fn take(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            match &mut self.place {
                Place::Passing => {
                    self.pending.extend_from_slice(data);
                    return Ok(());
                }
                Place::Header { entry, header } => {
                    let wanted = (BLOCK - header.len()).min(data.len());
                    header.extend_from_slice(&data[..wanted]);
                    data = &data[wanted..];
                    if header.len() == BLOCK {
                        let entry = *entry;
                        let header = std::mem::take(header);
                        self.place = entry_data(entry, &header)?;
                        self.mtime = tar::Header::from_byte_slice(&header).mtime().unwrap_or(0);
                        self.pending.extend_from_slice(&header);
                    }
                }
                Place::Data { entry, data: left, padding } => {
                    let in_data = (*left).min(data.len() as u64) as usize;
                    match entry {
                        0 => self.manifest.update(&data[..in_data]),
                        _ => self.sum.extend_from_slice(&data[..in_data]),
                    }
                    *left -= in_data as u64;
                    let in_padding = (*padding).min((data.len() - in_data) as u64) as usize;
                    *padding -= in_padding as u64;
                    let (entry, done) = (*entry, *left == 0 && *padding == 0);
                    self.pending.extend_from_slice(&data[..in_data + in_padding]);
                    data = &data[in_data + in_padding..];
                    if done {
                        self.next_entry(entry)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Entry `entry` ended: the next header, or the signature.
    fn next_entry(&mut self, entry: usize) -> io::Result<()> {
        if entry == 0 {
            self.place = Place::Header { entry: 1, header: Vec::with_capacity(BLOCK) };
            return Ok(());
        }
        let sha256 = hex::encode(self.manifest.clone().finalize());
        if String::from_utf8_lossy(&self.sum).trim() != sha256 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "the bundle's manifest does not match its SHA-256"));
        }
        let signature = self.key.sign(&sha256);
        let mut header = tar::Header::new_gnu();
        header.set_path(SIGNATURE)?;
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(signature.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(self.mtime);
        header.set_cksum();
        self.pending.extend_from_slice(header.as_bytes());
        self.pending.extend_from_slice(&signature);
        self.pending.resize(self.pending.len() + padding_of(signature.len() as u64) as usize, 0);
        self.place = Place::Passing;
        Ok(())
    }

    /// Writes what is pending; `Pending` until all of it is written.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.pending.len() {
            let written = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.sent..]))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += written;
        }
        self.pending.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

/// What follows the header of entry `entry` (which must be the manifest,
/// then its SHA-256).
fn entry_data(entry: usize, header: &[u8]) -> io::Result<Place> {
    let header = tar::Header::from_byte_slice(header);
    let path = header.path()?;
    let expected = if entry == 0 { MANIFEST } else { MANIFEST_SUM };
    if path.to_str() != Some(expected) {
        let why = format!("the bundle has {} where {expected} belongs", path.display());
        return Err(io::Error::new(io::ErrorKind::InvalidData, why));
    }
    let size = header.entry_size()?;
    if entry == 1 && size > 128 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "the bundle's SHA-256 entry is too large"));
    }
    Ok(Place::Data { entry, data: size, padding: padding_of(size) })
}

/// The padding after `size` bytes of data, to the next block.
fn padding_of(size: u64) -> u64 {
    (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Signing<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.poll_drain(cx))?;
        self.take(data)?;
        // Taken: written out on this call as far as the file takes it, the
        // rest on the next.
        if let Poll::Ready(Err(error)) = self.poll_drain(cx) {
            return Poll::Ready(Err(error));
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkgproxy_server::signing::{generate, signer, PublicKey};
    use tokio::io::AsyncWriteExt;

    use pkgproxy_testkit::tarball::tar_of;

    fn key() -> (tempfile::TempDir, SigningKey, PublicKey) {
        let dir = tempfile::tempdir().unwrap();
        let (pem, public) = generate().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, pem).unwrap();
        let key = SigningKey::read(&path).unwrap();
        (dir, key, public)
    }

    /// `bundle` written through a signer, `chunk` bytes at a time.
    async fn signed(bundle: &[u8], key: SigningKey, chunk: usize) -> io::Result<Vec<u8>> {
        let mut signing = Signing::new(Vec::new(), key);
        for piece in bundle.chunks(chunk) {
            signing.write_all(piece).await?;
        }
        signing.flush().await?;
        signing.finish()
    }

    #[tokio::test]
    async fn the_signature_goes_in_after_the_manifest_s_sum_whatever_the_chunks() {
        let manifest = vec![b'{'; 700];
        let sum = hex::encode(Sha256::digest(&manifest));
        let blob = vec![7u8; 3000];
        let bundle = tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, sum.as_bytes()), ("blobs/x", &blob)]);
        for chunk in [1, 511, 512, 4096, bundle.len()] {
            let (_dir, key, public) = key();
            let written = signed(&bundle, key, chunk).await.unwrap();
            let mut archive = tar::Archive::new(written.as_slice());
            let entries: Vec<(String, Vec<u8>)> = archive
                .entries()
                .unwrap()
                .map(|entry| {
                    let mut entry = entry.unwrap();
                    let name = entry.path().unwrap().to_string_lossy().into_owned();
                    let mut data = Vec::new();
                    io::Read::read_to_end(&mut entry, &mut data).unwrap();
                    (name, data)
                })
                .collect();
            let names: Vec<&str> = entries.iter().map(|(name, _)| name.as_str()).collect();
            assert_eq!(names, [MANIFEST, MANIFEST_SUM, SIGNATURE, "blobs/x"], "chunks of {chunk}");
            assert_eq!(entries[0].1, manifest);
            assert_eq!(entries[3].1, blob);
            assert_eq!(signer(Some(&entries[2].1), &sum, std::slice::from_ref(&public)), Ok(public));
        }
    }

    #[tokio::test]
    async fn a_stream_that_is_not_a_bundle_or_ends_early_is_not_signed() {
        let manifest = b"{}".to_vec();
        let wrong_sum = tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, b"00")]);
        assert!(signed(&wrong_sum, key().1, 100).await.is_err());
        let other = tar_of(&[("etc/passwd", b"x")]);
        assert!(signed(&other, key().1, 100).await.is_err());
        let sum = hex::encode(Sha256::digest(&manifest));
        let whole = tar_of(&[(MANIFEST, &manifest), (MANIFEST_SUM, sum.as_bytes())]);
        assert!(signed(&whole[..700], key().1, 100).await.is_err(), "cut in the sum's entry");
    }
}

//! The index's tables and the rules that keep them agreeing, applied
//! inside one write transaction: an entry, the blob it names and its place
//! in the order of use change together or not at all, so a crash never
//! leaves a count that lies.
//!
//! - `entries`: key → the entry ([`super::record`]).
//! - `blob_holders`: a blob's SHA-256 (its 32 bytes, see [`blob_key`]) →
//!   how many entries name it, and its size: a blob is deleted when its
//!   last entry goes.
//! - `uses`: (use stamp, key): the entries, least recently used first, so
//!   eviction reads the oldest without reading them all.
//! - `totals`: the entry count, their bytes and the blobs' bytes, so none
//!   of it is summed at start (and how many keys `evicted` holds).
//! - `evicted`: key → when eviction removed its entry, and `evicted_at`:
//!   (that time, key), oldest first: so "not cached" can say "evicted",
//!   for the last [`EVICTED_KEPT`] keys; an entry put again clears it.
//! - `hits`: key → how many times its entry was served from the cache,
//!   added with the uses' batched writes, kept while the entry is (a
//!   refetch under the key keeps it), gone with it.

use std::ops::Bound;

use redb::{ReadableTable, StorageError, Table, TableDefinition, WriteTransaction};

use super::record;
use crate::entry::Entry;

pub const ENTRIES: TableDefinition<&str, &[u8]> = TableDefinition::new("entries");
pub const BLOBS: TableDefinition<&[u8], (u64, u64)> = TableDefinition::new("blob_holders");
/// The blobs' table of layouts before 4, keyed by the SHA-256 in hex.
const HEX_BLOBS: TableDefinition<&str, (u64, u64)> = TableDefinition::new("blobs");
pub const USES: TableDefinition<(u64, &str), ()> = TableDefinition::new("uses");
pub const TOTALS: TableDefinition<&str, u64> = TableDefinition::new("totals");
pub const EVICTED: TableDefinition<&str, u64> = TableDefinition::new("evicted");
pub const EVICTED_AT: TableDefinition<(u64, &str), ()> = TableDefinition::new("evicted_at");
pub const HITS: TableDefinition<&str, u64> = TableDefinition::new("hits");

/// How many evicted keys are remembered.
pub(super) const EVICTED_KEPT: u64 = 100_000;

/// The version of the tables beside `entries`. An index written before
/// they existed (or by a later layout) has them built again from the
/// entries when opened. 3: `uses` is ordered by use stamps in nanoseconds
/// (2: whole seconds; its entries are read as such, see
/// [`crate::entry`]). 4: the blobs keyed by their SHA-256's 32 bytes, in
/// `blob_holders` (3 had them by its 64 hex digits, in `blobs`).
const LAYOUT: u64 = 4;

/// How many entries, their bytes, and the bytes of the blobs they name
/// (each once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub entries: u64,
    pub entry_bytes: u64,
    pub blob_bytes: u64,
}

/// The tables, open in one write transaction.
pub struct Tables<'txn> {
    entries: Table<'txn, &'static str, &'static [u8]>,
    blobs: Table<'txn, &'static [u8], (u64, u64)>,
    uses: Table<'txn, (u64, &'static str), ()>,
    totals: Table<'txn, &'static str, u64>,
    evicted: Table<'txn, &'static str, u64>,
    evicted_at: Table<'txn, (u64, &'static str), ()>,
    hits: Table<'txn, &'static str, u64>,
    held: Totals,
    /// The totals as the transaction found them, and whether of this
    /// layout: a transaction that changed nothing writes nothing (a write
    /// on a full disk may fail).
    found: Option<Totals>,
}

impl<'txn> Tables<'txn> {
    /// Opens (creating) every table in `txn`.
    pub fn open(txn: &'txn WriteTransaction) -> Result<Self, Box<redb::Error>> {
        let boxed = |e: redb::TableError| Box::new(redb::Error::from(e));
        let totals = txn.open_table(TOTALS).map_err(boxed)?;
        let held = read_totals(&totals).map_err(|e| Box::new(e.into()))?;
        let layout = totals.get("layout").map_err(|e| Box::new(e.into()))?.map(|layout| layout.value());
        if layout != Some(LAYOUT) {
            // Built again from the entries by `build_if_older`. Deleted, not
            // emptied: emptying a large table and filling it again in one
            // transaction grew an index of 100,000 entries from 0.1 to 1.6 GB.
            txn.delete_table(HEX_BLOBS).map_err(boxed)?;
            txn.delete_table(BLOBS).map_err(boxed)?;
            txn.delete_table(USES).map_err(boxed)?;
        }
        Ok(Tables {
            found: (layout == Some(LAYOUT)).then_some(held),
            entries: txn.open_table(ENTRIES).map_err(boxed)?,
            blobs: txn.open_table(BLOBS).map_err(boxed)?,
            uses: txn.open_table(USES).map_err(boxed)?,
            evicted: txn.open_table(EVICTED).map_err(boxed)?,
            evicted_at: txn.open_table(EVICTED_AT).map_err(boxed)?,
            hits: txn.open_table(HITS).map_err(boxed)?,
            totals,
            held,
        })
    }

    /// Writes the totals back; the caller then commits.
    pub fn close(mut self) -> Result<Totals, StorageError> {
        if self.found == Some(self.held) {
            return Ok(self.held);
        }
        self.totals.insert("entries", self.held.entries)?;
        self.totals.insert("entry_bytes", self.held.entry_bytes)?;
        self.totals.insert("blob_bytes", self.held.blob_bytes)?;
        self.totals.insert("layout", LAYOUT)?;
        Ok(self.held)
    }

    /// The entry under `key`; a record that cannot be decoded counts as
    /// none (it was never counted either).
    pub fn entry(&self, key: &str) -> Result<Option<Entry>, StorageError> {
        Ok(self.entries.get(key)?.and_then(|record| decode(key, record.value())))
    }

    /// Makes `entry` (encoded as `record`) the entry under `key`. Returns
    /// the blob no entry names any more, if the replaced entry's was the
    /// last.
    pub fn put(&mut self, key: &str, entry: &Entry, record: &[u8]) -> Result<Option<String>, StorageError> {
        self.unmark_evicted(key)?;
        let old = self.entry(key)?;
        if let Some(old) = &old {
            self.uses.remove((old.use_order(), key))?;
            self.held.entries -= 1;
            self.held.entry_bytes -= old.size;
        }
        self.entries.insert(key, record)?;
        self.uses.insert((entry.use_order(), key), ())?;
        self.held.entries += 1;
        self.held.entry_bytes += entry.size;
        // Held before the old one is released: the same bytes under the
        // same key stay.
        self.hold(&entry.sha256, entry.size)?;
        match old {
            Some(old) => self.release(&old.sha256),
            None => Ok(None),
        }
    }

    /// Removes `key`'s entry; returns it, and the blob no entry names any
    /// more if it was the last.
    pub fn remove(&mut self, key: &str) -> Result<Option<(Entry, Option<String>)>, StorageError> {
        let old = self.entry(key)?;
        self.entries.remove(key)?;
        self.hits.remove(key)?;
        let Some(old) = old else { return Ok(None) };
        self.uses.remove((old.use_order(), key))?;
        self.held.entries -= 1;
        self.held.entry_bytes -= old.size;
        let freed = self.release(&old.sha256)?;
        Ok(Some((old, freed)))
    }

    /// Remembers that eviction removed `key`'s entry at `at`, forgetting
    /// the oldest key remembered when `kept` are ([`EVICTED_KEPT`]).
    pub fn mark_evicted(&mut self, key: &str, at: u64, kept: u64) -> Result<(), StorageError> {
        let mut count = self.evicted_count()?;
        if let Some(before) = self.evicted.insert(key, at)? {
            self.evicted_at.remove((before.value(), key))?;
            count -= 1;
        }
        self.evicted_at.insert((at, key), ())?;
        count += 1;
        if count > kept {
            let oldest = self.evicted_at.first()?.map(|(when, _)| {
                let (at, key) = when.value();
                (at, key.to_owned())
            });
            if let Some((at, key)) = oldest {
                self.evicted_at.remove((at, key.as_str()))?;
                self.evicted.remove(key.as_str())?;
                count -= 1;
            }
        }
        self.totals.insert("evicted", count)?;
        Ok(())
    }

    /// Forgets that `key` was evicted.
    fn unmark_evicted(&mut self, key: &str) -> Result<(), StorageError> {
        let Some(at) = self.evicted.remove(key)?.map(|at| at.value()) else { return Ok(()) };
        self.evicted_at.remove((at, key))?;
        let count = self.evicted_count()?;
        self.totals.insert("evicted", count.saturating_sub(1))?;
        Ok(())
    }

    fn evicted_count(&self) -> Result<u64, StorageError> {
        Ok(self.totals.get("evicted")?.map_or(0, |count| count.value()))
    }

    /// Records that `key` was used at `at`; returns the entry as written,
    /// or `None` when there is none or it knew of a later use.
    pub fn touch(&mut self, key: &str, at: u64) -> Result<Option<Entry>, StorageError> {
        let Some(mut entry) = self.entry(key)? else { return Ok(None) };
        if entry.last_used_ns >= at {
            return Ok(None);
        }
        let before = entry.use_order();
        entry.last_used_ns = at;
        let Ok(record) = record::encode(&entry) else { return Ok(None) };
        self.entries.insert(key, record.as_slice())?;
        self.uses.remove((before, key))?;
        self.uses.insert((entry.use_order(), key), ())?;
        Ok(Some(entry))
    }

    /// Adds `hits` to the count of `key`'s entry, if there is one.
    pub fn add_hits(&mut self, key: &str, hits: u64) -> Result<(), StorageError> {
        if hits == 0 || self.entries.get(key)?.is_none() {
            return Ok(());
        }
        let counted = self.hits.get(key)?.map_or(0, |counted| counted.value());
        self.hits.insert(key, counted.saturating_add(hits))?;
        Ok(())
    }

    fn hold(&mut self, sha256: &str, size: u64) -> Result<(), StorageError> {
        let key = blob_key(sha256);
        let (count, size) = self.blobs.get(key.as_slice())?.map_or((0, size), |held| held.value());
        if count == 0 {
            self.held.blob_bytes += size;
        }
        self.blobs.insert(key.as_slice(), (count + 1, size))?;
        Ok(())
    }

    fn release(&mut self, sha256: &str) -> Result<Option<String>, StorageError> {
        let key = blob_key(sha256);
        let Some((count, size)) = self.blobs.get(key.as_slice())?.map(|held| held.value()) else { return Ok(None) };
        if count > 1 {
            self.blobs.insert(key.as_slice(), (count - 1, size))?;
            return Ok(None);
        }
        self.blobs.remove(key.as_slice())?;
        self.held.blob_bytes -= size;
        Ok(Some(sha256.to_string()))
    }

    /// Builds the tables beside `entries` again from the entries, unless
    /// they are of this layout. Returns whether it did.
    pub fn build_if_older(&mut self) -> Result<bool, StorageError> {
        if self.found.is_some() {
            return Ok(false);
        }
        self.held = Totals::default();
        let mut after: Option<String> = None;
        loop {
            let (batch, last) = self.entries_after(after.as_deref(), BUILD_BATCH)?;
            let Some(last) = last else { break };
            after = Some(last);
            for (key, entry) in &batch {
                self.uses.insert((entry.use_order(), key.as_str()), ())?;
                self.held.entries += 1;
                self.held.entry_bytes += entry.size;
                self.hold(&entry.sha256, entry.size)?;
            }
        }
        Ok(true)
    }

    /// Up to `limit` records after the key `after`: the readable ones, and
    /// the last key read (`None`: no record is left).
    #[allow(clippy::type_complexity)]
    fn entries_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<(String, Entry)>, Option<String>), StorageError> {
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let (mut batch, mut last) = (Vec::new(), None);
        for row in self.entries.range::<&str>((start, Bound::Unbounded))?.take(limit) {
            let (key, record) = row?;
            if let Some(entry) = decode(key.value(), record.value()) {
                batch.push((key.value().to_string(), entry));
            }
            last = Some(key.value().to_string());
        }
        Ok((batch, last))
    }
}

/// How many entries are read at a time while the tables are built.
const BUILD_BATCH: usize = 10_000;

/// The totals as `table` holds them.
pub fn read_totals(table: &impl ReadableTable<&'static str, u64>) -> Result<Totals, StorageError> {
    let get = |name: &str| -> Result<u64, StorageError> { Ok(table.get(name)?.map_or(0, |value| value.value())) };
    Ok(Totals { entries: get("entries")?, entry_bytes: get("entry_bytes")?, blob_bytes: get("blob_bytes")? })
}

/// A blob's name as the key of `blob_holders`: the 32 bytes of a SHA-256
/// (as the store names every blob), or any other name as its text behind
/// a 0xFF byte (which UTF-8 never holds), and one more after it should
/// that make 32 bytes, so the two never meet.
pub fn blob_key(sha256: &str) -> Vec<u8> {
    if let Some(bytes) = record::digest_bytes(sha256) {
        return bytes.to_vec();
    }
    let mut key = Vec::with_capacity(sha256.len() + 2);
    key.push(TEXT_MARK);
    key.extend_from_slice(sha256.as_bytes());
    if key.len() == 32 {
        key.push(TEXT_MARK);
    }
    key
}

/// The blob's name a key of `blob_holders` stands for.
pub fn blob_name(key: &[u8]) -> String {
    if key.len() == 32 {
        return hex::encode(key);
    }
    let text = key.strip_prefix(&[TEXT_MARK]).unwrap_or(key);
    String::from_utf8_lossy(text.strip_suffix(&[TEXT_MARK]).unwrap_or(text)).into_owned()
}

/// What marks a blob's name kept as text in `blob_holders`.
const TEXT_MARK: u8 = 0xFF;

/// An entry record, or `None` (said in the log) when it cannot be read.
pub fn decode(key: &str, record: &[u8]) -> Option<Entry> {
    match record::decode(record) {
        Ok(entry) => Some(entry),
        Err(error) => {
            tracing::warn!(key, %error, "skipping an unreadable cache index record");
            None
        }
    }
}

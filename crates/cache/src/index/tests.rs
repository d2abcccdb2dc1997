use redb::{TableDefinition, TableHandle};

use super::*;
use crate::entry::{Class, Validators};
use crate::evict::NothingObsolete;

fn entry(sha256: &str, size: u64, last_used_ns: u64) -> Entry {
    Entry {
        sha256: sha256.into(),
        size,
        headers: vec![("content-type".into(), "text/plain".into())],
        validators: Validators::default(),
        fetched_at: 0,
        class: Class::Immutable,
        last_used_ns,
    }
}

fn pick(index: &Index, to_free: u64, obsolete: &dyn Obsolete) -> Vec<String> {
    let mut picker = Picker::new(to_free);
    index.choose(&mut picker, obsolete).unwrap();
    picker.chosen()
}

#[test]
fn counts_follow_writes_replacements_and_removals_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.redb");
    {
        let index = Index::open(&path).unwrap();
        assert_eq!(index.put("a", entry("x", 10, 0)).unwrap().1, None);
        assert_eq!(index.put("b", entry("x", 10, 0)).unwrap().1, None);
        assert_eq!(index.put("a", entry("y", 4, 0)).unwrap().1, None, "b still names x");
        assert_eq!(index.put("a", entry("y", 4, 0)).unwrap().1, None, "the same bytes again");
        assert_eq!((index.totals(), index.blob_bytes()), ((2, 14), 14));
    }
    let index = Index::open(&path).unwrap();
    assert_eq!((index.totals(), index.blob_bytes()), ((2, 14), 14));
    assert_eq!(index.remove("b").unwrap(), Some("x".to_string()), "its last entry gone");
    assert_eq!(index.remove("b").unwrap(), None);
    assert_eq!(index.remove_all(&["a".to_string()], None).unwrap(), ["y"]);
    assert_eq!((index.totals(), index.blob_bytes(), index.counted()), ((0, 0), 0, 0));
}

#[test]
fn an_index_written_before_the_counts_existed_gets_them_built_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.redb");
    {
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(ENTRIES).unwrap();
            for (key, entry) in [("old", entry("s", 7, 5)), ("new", entry("s", 7, 50)), ("mid", entry("m", 3, 20))] {
                table.insert(key, serde_json::to_vec(&entry).unwrap().as_slice()).unwrap();
            }
            table.insert("unreadable", b"{".as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let index = Index::open(&path).unwrap();
    assert_eq!((index.totals(), index.blob_bytes()), ((3, 17), 10));
    assert_eq!(pick(&index, 3, &NothingObsolete), ["old", "mid"], "by last use; old alone frees nothing");
    assert_eq!(pick(&index, 10, &NothingObsolete), ["old", "mid", "new"]);
}

#[test]
fn an_index_of_whole_second_uses_is_read_as_such_and_its_order_rebuilt_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.redb");
    {
        // Layout 2: uses in whole seconds, under `last_used`.
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(ENTRIES).unwrap();
            let record = |sha: &str, fetched: u64, used: u64| {
                format!(
                    r#"{{"sha256":"{sha}","size":1,"headers":[],"validators":{{"etag":null,"last_modified":null}},"fetched_at":{fetched},"class":"immutable","last_used":{used}}}"#
                )
            };
            for (key, json) in [
                ("used-late", record("a", 100, 300)),
                ("fetched-mid", record("b", 200, 0)),
                ("used-early", record("c", 50, 150)),
            ] {
                table.insert(key, json.as_bytes()).unwrap();
            }
            let mut uses = txn.open_table(USES).unwrap();
            for (at, key) in [(300, "used-late"), (200, "fetched-mid"), (150, "used-early")] {
                uses.insert((at, key), ()).unwrap();
            }
            let mut totals = txn.open_table(tables::TOTALS).unwrap();
            totals.insert("layout", 2).unwrap();
        }
        txn.commit().unwrap();
    }
    let index = Index::open(&path).unwrap();
    assert_eq!(index.totals(), (3, 3));
    let (read, _) = index.read("used-late").unwrap().unwrap();
    assert_eq!(read.last_used_ns, 300 * crate::entry::NANOS_PER_SEC, "a second read as its first nanosecond");
    assert_eq!(index.latest_use().unwrap(), 300 * crate::entry::NANOS_PER_SEC);
    assert_eq!(pick(&index, 3, &NothingObsolete), ["used-early", "fetched-mid", "used-late"]);
    // A use within the second the latest old one was written in goes after it.
    index.touch_all(&[("used-early".into(), 300 * crate::entry::NANOS_PER_SEC + 1)]).unwrap();
    assert_eq!(pick(&index, 3, &NothingObsolete), ["fetched-mid", "used-late", "used-early"]);
    let (written, _) = index.read("used-early").unwrap().unwrap();
    let json = serde_json::to_string(&*written).unwrap();
    assert!(json.contains("\"used_ns\":") && !json.contains("\"last_used\""), "{json}");
}

#[test]
fn uses_move_an_entry_in_the_order_of_eviction_and_memory_follows() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(&dir.path().join("index.redb")).unwrap();
    index.put_all(vec![("a".into(), entry("a", 1, 10)), ("b".into(), entry("b", 1, 20))]).unwrap();
    assert_eq!(pick(&index, 1, &NothingObsolete), ["a"]);
    index.touch_all(&[("a".into(), 30), ("gone".into(), 40), ("b".into(), 5)]).unwrap();
    assert_eq!(pick(&index, 1, &NothingObsolete), ["b"], "a was used since; b's older use is ignored");
    assert_eq!(index.held("a").unwrap().last_used_ns, 30);
    let (read, _) = index.read("a").unwrap().unwrap();
    assert_eq!(read.last_used_ns, 30);
    assert_eq!(index.totals(), (2, 2));
}

struct Superseded;

impl Obsolete for Superseded {
    fn prefixes(&self) -> Vec<String> {
        vec!["apt/debian/dists/".into(), "none/".into()]
    }

    fn is_obsolete(&self, key: &str, _: &Entry) -> bool {
        key.ends_with("Packages.old")
    }
}

#[test]
fn what_can_never_be_served_again_goes_first_and_only_its_prefixes_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(&dir.path().join("index.redb")).unwrap();
    index
        .put_all(vec![
            ("apt/debian/dists/main/Packages.old".into(), entry("p1", 1, 90)),
            ("apt/debian/dists/main/Packages".into(), entry("p2", 1, 80)),
            ("apt/debian/pool/a.deb".into(), entry("d", 1, 10)),
            ("apt/other/dists/main/Packages.old".into(), entry("p3", 1, 95)),
        ])
        .unwrap();
    assert_eq!(pick(&index, 2, &Superseded), ["apt/debian/dists/main/Packages.old", "apt/debian/pool/a.deb"]);
    let everything = pick(&index, 100, &Superseded);
    assert_eq!(everything.len(), 4, "each key once: {everything:?}");
    assert_eq!(everything[3], "apt/other/dists/main/Packages.old", "outside the prefixes: by use only");
}

#[test]
fn a_walk_reads_every_page_and_stops_at_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index::open(&dir.path().join("index.redb")).unwrap();
    let records = (0..2_500).map(|n| (format!("k/{n:05}"), entry(&format!("{n}"), 1, 0))).collect();
    index.put_all(records).unwrap();
    index.put("l/after", entry("l", 1, 0)).unwrap();
    let mut keys = Vec::new();
    index.visit("k/", |key, _| keys.push(key.to_string())).unwrap();
    assert_eq!(keys.len(), 2_500);
    assert!(keys.windows(2).all(|pair| pair[0] < pair[1]));
    let mut blobs = 0;
    index.visit_blobs(|_, _| blobs += 1).unwrap();
    assert_eq!(blobs, 2_501);
    assert!(index.names_blob("l").unwrap() && !index.names_blob("nothing").unwrap());
    let naming: HashSet<String> = ["7".to_string(), "l".to_string()].into();
    assert_eq!(index.keys_naming(&naming).unwrap(), ["k/00007", "l/after"]);
}

#[test]
fn the_last_evicted_keys_are_remembered_until_put_again() {
    let dir = tempfile::tempdir().unwrap();
    let index = Index { evicted_kept: 2, ..Index::open(&dir.path().join("index.redb")).unwrap() };
    for (n, key) in ["a", "b", "c", "d"].iter().enumerate() {
        index.put(key, entry(key, 1, 0)).unwrap();
        index.remove_all(&[key.to_string()], Some(100 + n as u64)).unwrap();
    }
    assert_eq!(index.remove_all(&["never".to_string()], Some(200)).unwrap(), Vec::<String>::new());
    let remembered: Vec<Option<u64>> = ["a", "b", "c", "d", "never"].iter().map(|key| index.evicted_at(key)).collect();
    assert_eq!(remembered, [None, None, Some(102), Some(103), None], "the two newest, and only what was held");
    index.put("c", entry("c", 1, 0)).unwrap();
    assert_eq!(index.evicted_at("c"), None, "cached again");
    index.put("e", entry("e", 1, 0)).unwrap();
    index.remove_all(&["e".to_string()], Some(104)).unwrap();
    assert_eq!((index.evicted_at("d"), index.evicted_at("e")), (Some(103), Some(104)), "c's place was freed");
}

#[test]
fn an_older_index_s_json_records_are_read_and_each_is_written_compact_when_its_entry_is_next_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.redb");
    let (used, kept) = (entry(&"ab".repeat(32), 7, 5), entry(&"cd".repeat(32), 3, 6));
    {
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(ENTRIES).unwrap();
            for (key, entry) in [("used", &used), ("kept", &kept)] {
                table.insert(key, serde_json::to_vec(entry).unwrap().as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    {
        let index = Index::open(&path).unwrap();
        assert_eq!(*index.read("kept").unwrap().unwrap().0, kept);
        index.touch_all(&[("used".into(), 9)]).unwrap();
        assert_eq!(index.read("used").unwrap().unwrap().0.last_used_ns, 9);
    }
    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    let table = txn.open_table(ENTRIES).unwrap();
    let first = |key: &str| table.get(key).unwrap().unwrap().value()[0];
    assert_eq!((first("kept"), first("used")), (b'{', 2), "read as it was; written anew when used");
}

#[test]
fn an_index_with_its_blobs_by_hex_gets_them_by_their_bytes_at_open_and_keeps_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.redb");
    let (shared, own) = ("ff".repeat(32), "0a".repeat(32));
    {
        // Layout 3: the blobs keyed by their SHA-256 in hex, under `blobs`.
        let db = Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut entries = txn.open_table(ENTRIES).unwrap();
            let mut uses = txn.open_table(USES).unwrap();
            for (key, entry) in [("a", entry(&shared, 5, 30)), ("b", entry(&shared, 5, 10)), ("c", entry(&own, 2, 20))]
            {
                entries.insert(key, serde_json::to_vec(&entry).unwrap().as_slice()).unwrap();
                uses.insert((entry.last_used_ns, key), ()).unwrap();
            }
            let mut blobs = txn.open_table(TableDefinition::<&str, (u64, u64)>::new("blobs")).unwrap();
            blobs.insert(shared.as_str(), (2, 5)).unwrap();
            blobs.insert(own.as_str(), (1, 2)).unwrap();
            let mut totals = txn.open_table(tables::TOTALS).unwrap();
            for (name, value) in [("entries", 3), ("entry_bytes", 12), ("blob_bytes", 7), ("layout", 3)] {
                totals.insert(name, value).unwrap();
            }
        }
        txn.commit().unwrap();
    }
    {
        let index = Index::open(&path).unwrap();
        assert_eq!((index.totals(), index.blob_bytes()), ((3, 12), 7));
        let mut blobs = Vec::new();
        index.visit_blobs(|sha256, size| blobs.push((sha256.to_string(), size))).unwrap();
        assert_eq!(blobs, [(own.clone(), 2), (shared.clone(), 5)]);
        assert!(index.names_blob(&shared).unwrap() && index.names_blob(&own).unwrap());
        assert_eq!(pick(&index, 2, &NothingObsolete), ["b", "c"], "b alone frees nothing: a names its blob too");
        assert_eq!(index.remove("b").unwrap(), None);
        assert_eq!(index.remove("a").unwrap(), Some(shared.clone()), "its last entry gone");
    }
    let db = Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    let names: Vec<String> = txn.list_tables().unwrap().map(|table| table.name().to_string()).collect();
    assert!(!names.contains(&"blobs".to_string()) && names.contains(&"blob_holders".to_string()), "{names:?}");
}

#[test]
fn a_blob_s_key_is_its_digest_s_bytes_and_any_other_name_comes_back_as_it_was() {
    for name in
        ["ff".repeat(32), "00".repeat(32), "7".into(), "x".repeat(31), "x".repeat(32), "AB".repeat(32), String::new()]
    {
        let key = tables::blob_key(&name);
        assert_eq!(tables::blob_name(&key), name);
        assert_eq!(key.len() == 32, name.len() == 64 && name == name.to_lowercase(), "{name}");
    }
}

#[test]
fn only_a_long_file_saves_its_free_pages_at_each_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.redb");
    assert!(quick_repair_pays(&path), "a file that cannot be measured is taken as long");
    let index = Index::open(&path).unwrap();
    index.put("a", entry("x", 1, 0)).unwrap();
    assert!(!quick_repair_pays(&path), "a new index is walked in a moment after a crash");
    drop(index);
    let long = dir.path().join("long.redb");
    std::fs::File::create(&long).unwrap().set_len(QUICK_REPAIR_FROM).unwrap();
    assert!(quick_repair_pays(&long));
}

//! The history's file in the state directory (`traffic.json`): the
//! stretches of the last hour and day, each side's by its name, so that a
//! restart within the day shows the day's traffic before it. It is
//! written now and then and at a clean stop, whole into a new file that
//! then takes the old one's name; a missing, torn or foreign file is no
//! error: the charts start empty.

use std::collections::BTreeMap;
use std::path::Path;

use pkgproxy_control::Traffic;
use pkgproxy_sides::SideId;
use serde::{Deserialize, Serialize};

use super::{Kept, Stretches};

/// The file's name in the state directory.
pub const FILE_NAME: &str = "traffic.json";

/// The layout written; a file of another is not read.
const VERSION: u32 = 1;

/// The file as written: per stretch number, each side's traffic by name
/// (sides without traffic left out).
#[derive(Debug, Serialize, Deserialize)]
struct OnDisk {
    version: u32,
    minutes: BTreeMap<u64, BTreeMap<String, Traffic>>,
    quarters: BTreeMap<u64, BTreeMap<String, Traffic>>,
}

/// Why the file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the traffic history {path}: {source}")]
pub struct SaveError {
    /// The file.
    path: String,
    /// What went wrong.
    source: std::io::Error,
}

/// Writes `kept` into `dir`'s file, replacing it whole.
pub fn save(dir: &Path, kept: &Kept) -> Result<(), SaveError> {
    let on_disk = OnDisk { version: VERSION, minutes: by_name(&kept.minutes), quarters: by_name(&kept.quarters) };
    let path = dir.join(FILE_NAME);
    let error = |source| SaveError { path: path.display().to_string(), source };
    let text = serde_json::to_vec(&on_disk).map_err(|e| error(e.into()))?;
    let new = dir.join(format!(".{FILE_NAME}.new"));
    std::fs::create_dir_all(dir).map_err(error)?;
    std::fs::write(&new, text).map_err(error)?;
    std::fs::rename(&new, &path).map_err(error)
}

/// What `dir`'s file keeps; nothing when it is missing or cannot be read
/// (said in the log, once, at the start).
pub fn load(dir: &Path) -> Kept {
    let path = dir.join(FILE_NAME);
    let text = match std::fs::read(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Kept::default(),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "the traffic history cannot be read: the charts start empty");
            return Kept::default();
        }
    };
    match serde_json::from_slice::<OnDisk>(&text) {
        Ok(on_disk) if on_disk.version == VERSION => {
            Kept { minutes: by_index(on_disk.minutes), quarters: by_index(on_disk.quarters) }
        }
        Ok(on_disk) => {
            tracing::warn!(path = %path.display(), version = on_disk.version, "a traffic history of another layout: the charts start empty");
            Kept::default()
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "the traffic history is torn: the charts start empty");
            Kept::default()
        }
    }
}

fn by_name(stretches: &Stretches) -> BTreeMap<u64, BTreeMap<String, Traffic>> {
    let named = |sides: &Vec<Traffic>| {
        SideId::ALL
            .iter()
            .zip(sides)
            .filter(|(_, traffic)| **traffic != Traffic::default())
            .map(|(side, traffic)| (side.to_string(), *traffic))
            .collect()
    };
    stretches.iter().map(|(number, sides)| (*number, named(sides))).collect()
}

/// The stretches of the file, each side's at its index; a side this
/// version does not know is left out.
fn by_index(stretches: BTreeMap<u64, BTreeMap<String, Traffic>>) -> Stretches {
    let indexed = |named: BTreeMap<String, Traffic>| {
        let mut sides = vec![Traffic::default(); SideId::ALL.len()];
        for (name, traffic) in named {
            if let Some(side) = SideId::ALL.iter().find(|side| side.to_string() == name) {
                sides[side.index()] = traffic;
            }
        }
        sides
    };
    stretches.into_iter().map(|(number, named)| (number, indexed(named))).collect()
}

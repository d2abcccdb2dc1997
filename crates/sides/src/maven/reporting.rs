//! What the Maven side's keys name, for the cache's page: an artifact's
//! files by `group:artifact` and version, its metadata and checksums under
//! it.

use super::layout::MavenPath;
use super::Maven;
use crate::role::{Named, Reporting};

impl Reporting for Maven {
    fn noun(&self) -> &'static str {
        "artifacts"
    }

    fn others(&self) -> &'static str {
        "group metadata and other repository files"
    }

    fn names(&self, key: &str) -> Named {
        let config = self.config();
        let Some((_, path)) = config.repository_of_key(key) else { return Named::Other };
        let mut laid = MavenPath::parse(path);
        while let Some(MavenPath::Sidecar { of, .. }) = laid {
            laid = Some(*of);
        }
        match laid {
            Some(MavenPath::File(file)) => {
                let version = match &file.build {
                    Some(build) => format!("{} ({build})", file.version),
                    None => file.version,
                };
                Named::File { package: format!("{}:{}", file.group, file.artifact), version }
            }
            Some(MavenPath::Metadata { folder }) => package_of_folder(&folder),
            _ => Named::Other,
        }
    }
}

/// What a metadata folder describes: an artifact (`GROUP/AS/PATH/ARTIFACT`),
/// or a SNAPSHOT version of one (`.../ARTIFACT/1.0-SNAPSHOT`). A group's
/// own metadata (plugin prefixes) names no package.
fn package_of_folder(folder: &str) -> Named {
    let mut segments: Vec<&str> = folder.split('/').collect();
    if segments.last().is_some_and(|last| last.ends_with("-SNAPSHOT")) {
        segments.pop();
    }
    match segments.split_last() {
        Some((artifact, group)) if !group.is_empty() && !folder.ends_with("/plugins") => {
            Named::Metadata { package: format!("{}:{artifact}", group.join(".")) }
        }
        _ => Named::Other,
    }
}

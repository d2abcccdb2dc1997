//! What a JVM build needs, for `pkgproxyctl check maven FILE`: every pom
//! and artifact that Gradle's `gradle/verification-metadata.xml` or
//! `gradle.lockfile`, or the list `mvn dependency:list -DoutputFile=FILE`
//! writes, names ([`super::wanted`]), as the build asks the repository
//! for them (`/maven/central/GROUP/.../FILE`). The files say it all:
//! nothing is left for the daemon to follow. What Maven fetches for
//! itself (its plugins) is in none of them.

use std::path::{Path, PathBuf};

use super::wanted::{self, WantedFile};
use crate::needs::{self, Asked, NeededItem, Needs, NeedsError, NeedsReader};

/// What `check maven` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// The build's list: gradle/verification-metadata.xml, gradle.lockfile,
    /// or the file `mvn dependency:list -DoutputFile=FILE` writes.
    list: PathBuf,
    /// The repository pkgproxy serves them from (`/maven/NAME/`).
    #[arg(long, value_name = "NAME", default_value = "central")]
    repository: String,
}

/// The Maven side's reader of a build's files.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "Maven and Gradle: every pom and artifact a gradle/verification-metadata.xml, a gradle.lockfile \
                     or a `mvn dependency:list -DoutputFile=FILE` list names";
        <Arguments as clap::Args>::augment_args(clap::Command::new("maven")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        let text = needs::read_file(&arguments.list)?;
        let files = read_list(&arguments.list, &text)
            .map_err(|error| NeedsError::new(format!("{}: {error}", arguments.list.display())))?;
        Ok(Asked::Known(Needs::of(items(&arguments.repository, &files))))
    }
}

/// The files the list at `path` names, read as its name says it is.
fn read_list(path: &Path, text: &str) -> Result<Vec<WantedFile>, wanted::WantedError> {
    let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
    if name.ends_with(".xml") {
        wanted::verification_metadata(text)
    } else if name.ends_with(".lockfile") {
        wanted::gradle_lockfile(text)
    } else {
        wanted::dependency_list(text)
    }
}

/// The requests a build makes of `repository` for `files`, each once.
fn items(repository: &str, files: &[WantedFile]) -> Vec<NeededItem> {
    let mut items: Vec<NeededItem> = Vec::new();
    for wanted in files {
        let path = wanted.file.path();
        let url = format!("/maven/{repository}/{path}");
        if items.iter().any(|item| item.url == url) {
            continue;
        }
        let file = &wanted.file;
        let classifier = file.classifier.as_ref().map(|c| format!(" {c}")).unwrap_or_default();
        let label = format!("{}:{}:{}{classifier} .{}", file.group, file.artifact, file.version, file.extension);
        items.push(NeededItem { url, label });
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dependency_list_is_asked_of_the_repository_named() {
        let list = "\nThe following files have been resolved:\n   commons-io:commons-io:jar:2.11.0:compile -- module org.apache.commons.io\n   commons-cli:commons-cli:jar:1.5.0:test\n";
        let files = read_list(Path::new("deps.txt"), list).unwrap();
        let urls: Vec<String> = items("corp", &files).into_iter().map(|item| item.url).collect();
        assert_eq!(
            urls,
            [
                "/maven/corp/commons-io/commons-io/2.11.0/commons-io-2.11.0.pom",
                "/maven/corp/commons-io/commons-io/2.11.0/commons-io-2.11.0.jar",
                "/maven/corp/commons-cli/commons-cli/1.5.0/commons-cli-1.5.0.pom",
                "/maven/corp/commons-cli/commons-cli/1.5.0/commons-cli-1.5.0.jar",
            ]
        );
    }

    #[test]
    fn a_list_that_is_not_what_its_name_says_names_the_line() {
        let error = read_list(Path::new("gradle.lockfile"), "not a lock line\n").unwrap_err().to_string();
        assert!(error.contains("line 1"), "{error}");
    }
}

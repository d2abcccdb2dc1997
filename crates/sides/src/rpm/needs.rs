//! What a machine's packages need, for `pkgproxyctl check rpm FILE` and
//! `warm rpm FILE`: FILE lists packages one a line, either NEVRAs as
//! `rpm -qa --qf '%{NEVRA}\n'` prints them (an image's whole set: each
//! is that build alone) or names (`gcc`: its newest build and what it
//! requires, as `dnf install gcc` would take them). Only the daemon holds
//! the repositories' metadata, so it resolves them (the resolving role);
//! this reads the list.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::nevra::{self, Nevra};
use crate::needs::{self, Asked, NeedsError, NeedsReader};

/// What `check rpm` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// The packages, one a line: NEVRAs as `rpm -qa --qf '%{NEVRA}\n'`
    /// prints them, or names; blank lines and `#` comments are skipped.
    list: PathBuf,
    /// The repository to find them in (`/rpm/NAME/`); again for more.
    /// Default: every repository whose repodata/repomd.xml pkgproxy holds.
    #[arg(long, value_name = "NAME")]
    repository: Vec<String>,
    /// A root of the repository: the folder holding repodata/, as below
    /// /rpm/NAME/ (`releases/41/Everything/x86_64/os`); again for more (a
    /// release and its updates). Default: every root whose repomd.xml
    /// pkgproxy holds, those of other architectures left out; name the
    /// machine's when pkgproxy holds several releases.
    #[arg(long, value_name = "PATH")]
    root: Vec<String>,
    /// The machine's architecture, as rpm names it (default: the list's
    /// NEVRAs', else this machine's).
    #[arg(long, value_name = "ARCH")]
    arch: Option<String>,
}

/// What the daemon resolves: the list, and where to look.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct List {
    /// The repositories named (none: every one with a root held).
    pub repositories: Vec<String>,
    /// The roots named (none: every one held).
    pub roots: Vec<String>,
    /// The machine's architecture.
    pub arch: String,
    /// The builds listed.
    pub nevras: Vec<Nevra>,
    /// The names listed.
    pub names: Vec<String>,
}

/// The RPM side's reader of a list of packages.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "dnf and yum: the packages of a list, one a line: NEVRAs as `rpm -qa --qf '%{NEVRA}\\n'` prints \
                     them, or names (each with what it requires, as dnf would install it), found in the primary \
                     metadata pkgproxy holds; with each repository's repomd.xml and the metadata dnf reads";
        <Arguments as clap::Args>::augment_args(clap::Command::new("rpm")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        let text = needs::read_file(&arguments.list)?;
        let (nevras, names) =
            read_list(&text).map_err(|why| NeedsError::new(format!("{}: {why}", arguments.list.display())))?;
        let arch = arguments.arch.or_else(|| arch_of(&nevras)).unwrap_or_else(nevra::machine_arch);
        let roots = arguments.root.iter().map(|root| root.trim_matches('/').to_owned()).collect();
        needs::resolve(&List { repositories: arguments.repository, roots, arch, nevras, names })
    }
}

/// The NEVRAs and the names a list holds, in its order.
fn read_list(text: &str) -> Result<(Vec<Nevra>, Vec<String>), String> {
    let (mut nevras, mut names) = (Vec::new(), Vec::new());
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        if line.split_whitespace().nth(1).is_some() || line.starts_with('-') {
            return Err(format!("line {}: {line:?}: one package a line, a NEVRA or a name", number + 1));
        }
        // `rpm -qa` lists the keys rpm trusts as packages; no repository has them.
        if line.starts_with("gpg-pubkey-") {
            continue;
        }
        match Nevra::parse(line) {
            Some(nevra) => nevras.push(nevra),
            None => names.push(line.to_owned()),
        }
    }
    if nevras.is_empty() && names.is_empty() {
        return Err("it names no package: one a line, as `rpm -qa --qf '%{NEVRA}\\n'` prints them, or names".into());
    }
    Ok((nevras, names))
}

/// The architecture most of the list's NEVRAs are of (`noarch` aside):
/// the machine the list was taken on.
fn arch_of(nevras: &[Nevra]) -> Option<String> {
    let mut counted: HashMap<&str, usize> = HashMap::new();
    for nevra in nevras.iter().filter(|nevra| nevra::is_machine_arch(&nevra.arch)) {
        *counted.entry(nevra.arch.as_str()).or_default() += 1;
    }
    counted.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0))).map(|(arch, _)| arch.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_holds_nevras_and_names_and_skips_comments_blanks_and_rpm_s_keys() {
        let text = "# the image's packages\n\nbash-5.2.26-3.fc41.x86_64\nperl-Time-HiRes-4:1.9775-511.fc41.x86_64\n\
                    gpg-pubkey-e99d6ad1-64d2612c\n  gcc   # and what it needs\npython3-libs\nglibc-2.40-9.fc41.i686\n";
        let (nevras, names) = read_list(text).unwrap();
        let nevras: Vec<String> = nevras.iter().map(Nevra::to_string).collect();
        assert_eq!(
            nevras,
            ["bash-5.2.26-3.fc41.x86_64", "perl-Time-HiRes-4:1.9775-511.fc41.x86_64", "glibc-2.40-9.fc41.i686"]
        );
        assert_eq!(names, ["gcc", "python3-libs"]);
    }

    #[test]
    fn a_list_that_is_not_one_is_refused_naming_the_line() {
        let error = read_list("bash\nName : Version\n").unwrap_err();
        assert!(error.starts_with("line 2: "), "{error}");
        assert!(read_list("# nothing\n\n").unwrap_err().contains("names no package"));
        assert!(read_list("--all\n").is_err());
    }

    #[test]
    fn the_list_s_architecture_is_that_of_most_of_its_nevras() {
        let (nevras, _) =
            read_list("a-1-1.noarch\nb-1-1.aarch64\nc-1-1.aarch64\nglibc-2-1.i686\nd-1-1.noarch\n").unwrap();
        assert_eq!(arch_of(&nevras).as_deref(), Some("aarch64"));
        assert_eq!(arch_of(&nevras[..1]), None, "noarch says nothing");
    }
}

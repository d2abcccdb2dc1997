//! How rpm names one build of a package: `NAME-[EPOCH:]VERSION-RELEASE.ARCH`
//! as `rpm -qa --qf '%{NEVRA}\n'` prints it (the epoch when the package
//! has one, `0:` included), and as a package's file is named without the
//! epoch (`NAME-VERSION-RELEASE.ARCH.rpm`). A name may hold `-`; the last
//! two split off the version and the release. The architectures are
//! rpm's: a line that does not end with one is a name, not a NEVRA.

use serde::{Deserialize, Serialize};

use super::evr::Evr;
use super::primary::Package;

/// The architectures rpm builds for, as it names them.
const ARCHES: &[&str] = &[
    "noarch",
    "x86_64",
    "x86_64_v2",
    "x86_64_v3",
    "x86_64_v4",
    "i386",
    "i486",
    "i586",
    "i686",
    "athlon",
    "aarch64",
    "armv6hl",
    "armv7hl",
    "armv7hnl",
    "armhfp",
    "ppc",
    "ppc64",
    "ppc64le",
    "ppc64p7",
    "s390",
    "s390x",
    "riscv64",
    "loongarch64",
    "mips64el",
    "sparc64",
    "src",
    "nosrc",
];

/// One build of a package, named.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Nevra {
    /// Its name (`bash`, `perl-Time-HiRes`).
    pub name: String,
    /// Its epoch, where the line gave one (`2` of `2:1.0-1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
    /// Its version.
    pub version: String,
    /// Its release.
    pub release: String,
    /// Its architecture.
    pub arch: String,
}

impl Nevra {
    /// `text` read as a NEVRA (or a package's file name without `.rpm`);
    /// `None` when it does not end with an architecture rpm knows or
    /// lacks a version or a release.
    pub fn parse(text: &str) -> Option<Nevra> {
        let (rest, arch) = text.rsplit_once('.')?;
        if !is_arch(arch) {
            return None;
        }
        let (rest, release) = rest.rsplit_once('-')?;
        let (name, epoch_version) = rest.rsplit_once('-')?;
        let (epoch, version) = match epoch_version.split_once(':') {
            Some((epoch, version)) if !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit()) => {
                (Some(epoch.to_owned()), version)
            }
            Some(_) => return None,
            None => (None, epoch_version),
        };
        if name.is_empty() || version.is_empty() || release.is_empty() {
            return None;
        }
        let owned = |part: &str| part.to_owned();
        Some(Nevra { name: owned(name), epoch, version: owned(version), release: owned(release), arch: owned(arch) })
    }

    /// Whether `package` is this build: the same name, version, release
    /// and architecture, and the same epoch where this one gives one
    /// (rpm's default `%{NVRA}` leaves it out; no epoch is epoch 0).
    pub fn names(&self, package: &Package) -> bool {
        let epoch_agrees = self
            .epoch
            .as_ref()
            .is_none_or(|epoch| Evr::new(epoch, "", "").epoch == Evr::new(&package.epoch, "", "").epoch);
        self.name == package.name
            && self.version == package.version
            && self.release == package.release
            && self.arch == package.arch
            && epoch_agrees
    }
}

impl std::fmt::Display for Nevra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.epoch {
            Some(epoch) => write!(f, "{}-{epoch}:{}-{}.{}", self.name, self.version, self.release, self.arch),
            None => write!(f, "{}-{}-{}.{}", self.name, self.version, self.release, self.arch),
        }
    }
}

/// Whether rpm names an architecture `word`.
pub fn is_arch(word: &str) -> bool {
    ARCHES.contains(&word)
}

/// Whether `word` names a machine's architecture (not `noarch` nor a
/// source package's): a repository's path that holds one is that
/// architecture's.
pub fn is_machine_arch(word: &str) -> bool {
    is_arch(word) && !matches!(word, "noarch" | "src" | "nosrc")
}

/// This machine's architecture as rpm names it (`x86_64`, `aarch64`,
/// `ppc64le`).
pub fn machine_arch() -> String {
    let arch = match std::env::consts::ARCH {
        "x86" => "i686",
        "arm" => "armv7hl",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        other => other,
    };
    arch.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nevra_splits_at_its_last_two_dashes_and_its_architecture() {
        let bash = Nevra::parse("bash-5.2.26-3.fc41.x86_64").unwrap();
        assert_eq!(
            (bash.name.as_str(), bash.epoch, bash.version.as_str(), bash.release.as_str(), bash.arch.as_str()),
            ("bash", None, "5.2.26", "3.fc41", "x86_64")
        );
        let perl = Nevra::parse("perl-Time-HiRes-4:1.9775-511.fc41.x86_64").unwrap();
        assert_eq!((perl.name.as_str(), perl.epoch.as_deref()), ("perl-Time-HiRes", Some("4")));
        assert_eq!(perl.to_string(), "perl-Time-HiRes-4:1.9775-511.fc41.x86_64");
        let zero = Nevra::parse("ez-0:1.0-1.noarch").unwrap();
        assert_eq!(zero.epoch.as_deref(), Some("0"));
        for name in ["gcc", "python3-libs", "perl-Time-HiRes", "glibc-langpack-en", "gpg-pubkey-8d8b756f-6564b2a5"] {
            assert_eq!(Nevra::parse(name), None, "{name} is a name");
        }
        assert_eq!(Nevra::parse("a-x:1-1.noarch"), None, "an epoch is a number");
        assert_eq!(Nevra::parse("-1-1.noarch"), None);
    }

    #[test]
    fn a_nevra_without_an_epoch_names_the_build_whatever_its_epoch() {
        let package = Package {
            name: "ep".into(),
            epoch: "2".into(),
            version: "1.0".into(),
            release: "1".into(),
            arch: "noarch".into(),
            ..Package::default()
        };
        assert!(Nevra::parse("ep-1.0-1.noarch").unwrap().names(&package));
        assert!(Nevra::parse("ep-2:1.0-1.noarch").unwrap().names(&package));
        assert!(!Nevra::parse("ep-1:1.0-1.noarch").unwrap().names(&package));
        assert!(!Nevra::parse("ep-1.0-1.x86_64").unwrap().names(&package));
        let unset = Package { epoch: "0".into(), ..package };
        assert!(Nevra::parse("ep-0:1.0-1.noarch").unwrap().names(&unset), "0: is no epoch");
    }
}

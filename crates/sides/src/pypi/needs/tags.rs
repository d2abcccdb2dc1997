//! Which file of a release an installer takes for one interpreter on one
//! platform: the wheel tags that interpreter supports, best first, in the
//! order pip builds them (`pip install` on the machine, or `pip download
//! --implementation --python-version --abi --platform` for another), the
//! platforms a machine takes besides its own best one (every glibc and musl
//! version up to its own, older macOS releases), and the pick among a
//! release's files: the wheel of the best tag, else the sdist.
//!
//! Pure: what this machine is, is learned elsewhere (`machine`). A
//! [`Target`] comes from anyone who may ask the daemon, so its size is
//! checked ([`Target::check`]) before any list is built from it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// The most platforms and ABIs one target may name: far more than a
/// machine takes (some forty platforms on Linux, a hundred on macOS).
const PLATFORMS_LIMIT: usize = 1_000;
const ABIS_LIMIT: usize = 32;

/// An interpreter on a platform, whose installs are counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The implementation's short name: `cp` (CPython), `pp` (PyPy), `py`
    /// (any), as `pip download --implementation` takes it.
    pub implementation: String,
    /// Its Python version: major, minor.
    pub python: (u32, u32),
    /// Its own ABIs, best first (`cp312`; `pypy310_pp73`); CPython's
    /// `abi3` and `none` are placed by pip's rules wherever they are given.
    pub abis: Vec<String>,
    /// The platforms it takes, best first, each spelled out
    /// (`manylinux_2_36_x86_64`, ..., `linux_x86_64`).
    pub platforms: Vec<String>,
}

impl Target {
    /// Whether the target is small enough to follow, and if not why.
    pub fn check(&self) -> Result<(), String> {
        let too_long = |text: &String| text.len() > 100;
        if self.platforms.len() > PLATFORMS_LIMIT || self.abis.len() > ABIS_LIMIT {
            return Err(format!(
                "a platform of more than {PLATFORMS_LIMIT} platform tags or {ABIS_LIMIT} ABIs is not followed"
            ));
        }
        if self.python.1 > 100
            || too_long(&self.implementation)
            || self.abis.iter().chain(&self.platforms).any(too_long)
        {
            return Err("not a platform: a name or version out of bounds".into());
        }
        Ok(())
    }

    /// Its interpreter's tag (`cp312`).
    pub fn interpreter(&self) -> String {
        format!("{}{}{}", self.implementation, self.python.0, self.python.1)
    }

    /// The wheel tags it supports (`cp312-cp312-manylinux_2_17_x86_64`),
    /// best first, as pip's `get_supported` lists them.
    pub fn supported(&self) -> Vec<String> {
        let mut tags = Vec::new();
        let on_each_platform = |tags: &mut Vec<String>, interpreter: &str, abi: &str| {
            tags.extend(self.platforms.iter().map(|platform| format!("{interpreter}-{abi}-{platform}")));
        };
        let interpreter = self.interpreter();
        let (major, minor) = self.python;
        if self.implementation == "cp" {
            // A free-threaded build's stable ABI is abi3t (PEP 803), not abi3.
            let threaded = self.abis.first().is_some_and(|abi| is_threaded(abi));
            let stable = if threaded { "abi3t" } else { "abi3" };
            let placed = |abi: &&str| *abi == stable || *abi == "none" || *abi == "abi3";
            for abi in self.abis.iter().map(String::as_str).filter(|abi| !placed(abi)) {
                on_each_platform(&mut tags, &interpreter, abi);
            }
            let has_stable = (major, minor) >= (3, 2);
            if has_stable {
                on_each_platform(&mut tags, &interpreter, stable);
            }
            on_each_platform(&mut tags, &interpreter, "none");
            if has_stable {
                for older in (2..minor).rev() {
                    on_each_platform(&mut tags, &format!("cp{major}{older}"), stable);
                }
            }
        } else {
            let mut abis: Vec<&str> = self.abis.iter().map(String::as_str).collect();
            if !abis.contains(&"none") {
                abis.push("none");
            }
            for abi in abis {
                on_each_platform(&mut tags, &interpreter, abi);
            }
        }
        let pythons = python_range(major, minor);
        for python in &pythons {
            on_each_platform(&mut tags, python, "none");
        }
        tags.push(format!("{interpreter}-none-any"));
        tags.extend(pythons.iter().map(|python| format!("{python}-none-any")));
        tags
    }
}

/// Whether a CPython ABI (`cp313t`, `cp313td`) is a free-threaded build's.
fn is_threaded(abi: &str) -> bool {
    abi.strip_prefix("cp").is_some_and(|rest| rest.trim_start_matches(|c: char| c.is_ascii_digit()).contains('t'))
}

/// The generic Python tags a version takes, best first: `py312`, `py3`,
/// `py311`, ..., `py30`.
fn python_range(major: u32, minor: u32) -> Vec<String> {
    let mut pythons = vec![format!("py{major}{minor}"), format!("py{major}")];
    pythons.extend((0..minor).rev().map(|older| format!("py{major}{older}")));
    pythons
}

/// The ABIs of CPython `python`, best first, as pip names them: `cp312`;
/// `cp313t` free-threaded; `cp37m` with pymalloc before 3.8; a debug build
/// `cp312d` and then `cp312`.
pub fn cpython_abis(python: (u32, u32), debug: bool, free_threaded: bool, pymalloc: bool) -> Vec<String> {
    let version = format!("{}{}", python.0, python.1);
    let threading = if free_threaded && python >= (3, 13) { "t" } else { "" };
    let debug = if debug { "d" } else { "" };
    let pymalloc = if python < (3, 8) && pymalloc { "m" } else { "" };
    let mut abis = vec![format!("cp{version}{threading}{debug}{pymalloc}")];
    if python >= (3, 8) && !debug.is_empty() {
        abis.push(format!("cp{version}{threading}"));
    }
    abis
}

/// The glibc versions of the legacy manylinux tags.
const LEGACY_MANYLINUX: [((u32, u32), &str); 3] =
    [((2, 17), "manylinux2014"), ((2, 12), "manylinux2010"), ((2, 5), "manylinux1")];

/// The architectures manylinux wheels are built for.
const MANYLINUX_ARCHES: [&str; 9] =
    ["x86_64", "i686", "aarch64", "armv7l", "ppc64", "ppc64le", "s390x", "loongarch64", "riscv64"];

/// The Linux platforms a machine of `arch` with glibc `glibc` or musl
/// `musl` takes, best first: `linux_ARCH` (a wheel built here: current
/// pips rank it first, older ones last), manylinux down to the oldest
/// glibc its architecture has wheels for, musllinux down to 1.0.
pub fn linux_platforms(arch: &str, glibc: Option<(u32, u32)>, musl: Option<(u32, u32)>) -> Vec<String> {
    let arches: Vec<&str> = if arch == "armv8l" { vec!["armv8l", "armv7l"] } else { vec![arch] };
    let mut platforms: Vec<String> = arches.iter().map(|arch| format!("linux_{arch}")).collect();
    if let Some(glibc) = glibc {
        platforms.extend(arches.iter().flat_map(|arch| manylinux(arch, glibc)));
    }
    if let Some(musl) = musl {
        platforms.extend(arches.iter().flat_map(|arch| musllinux(arch, musl)));
    }
    platforms
}

/// The manylinux platforms of `arch` on glibc `glibc`, best first, each
/// legacy name right after the glibc version it stands for.
fn manylinux(arch: &str, glibc: (u32, u32)) -> Vec<String> {
    if !MANYLINUX_ARCHES.contains(&arch) || glibc.0 != 2 {
        return Vec::new();
    }
    // x86 wheels go back to glibc 2.5, the others' to 2.17.
    let oldest = if matches!(arch, "x86_64" | "i686") { 5 } else { 17 };
    let mut platforms = Vec::new();
    for minor in (oldest..=glibc.1).rev() {
        platforms.push(format!("manylinux_2_{minor}_{arch}"));
        if let Some((_, legacy)) = LEGACY_MANYLINUX.iter().find(|(version, _)| *version == (2, minor)) {
            platforms.push(format!("{legacy}_{arch}"));
        }
    }
    platforms
}

/// The musllinux platforms of `arch` on musl `musl`, best first.
fn musllinux(arch: &str, musl: (u32, u32)) -> Vec<String> {
    (0..=musl.1).rev().map(|minor| format!("musllinux_{}_{minor}_{arch}", musl.0)).collect()
}

/// The macOS platforms a machine of release `version` and `arch` takes,
/// best first: its release and every older one it runs binaries of, in
/// each binary format the architecture runs.
pub fn mac_platforms(version: (u32, u32), arch: &str) -> Vec<String> {
    let mut platforms = Vec::new();
    let mut add = |major: u32, minor: u32, formats: Vec<&str>| {
        platforms.extend(formats.into_iter().map(|format| format!("macosx_{major}_{minor}_{format}")));
    };
    if ((10, 0)..(11, 0)).contains(&version) {
        for minor in (0..=version.1).rev() {
            add(10, minor, mac_formats((10, minor), arch));
        }
    }
    if version >= (11, 0) {
        for major in (11..=version.0).rev() {
            add(major, 0, mac_formats((major, 0), arch));
        }
        // Arm64 came with 11.0: only a universal2 binary is older.
        for minor in (4..=16).rev() {
            let formats = if arch == "x86_64" { mac_formats((10, minor), arch) } else { vec!["universal2"] };
            add(10, minor, formats);
        }
    }
    platforms
}

/// The binary formats a macOS `version` of `arch` runs, best first.
fn mac_formats(version: (u32, u32), arch: &str) -> Vec<&str> {
    let mut formats = vec![arch];
    match arch {
        "x86_64" | "i386" if version < (10, 4) => return Vec::new(),
        "x86_64" => formats.extend(["intel", "fat64", "fat32"]),
        "i386" => formats.extend(["intel", "fat32", "fat"]),
        "ppc64" if !((10, 4)..=(10, 5)).contains(&version) => return Vec::new(),
        "ppc64" => formats.push("fat64"),
        "ppc" if version > (10, 6) => return Vec::new(),
        "ppc" => formats.extend(["fat32", "fat"]),
        _ => {}
    }
    if matches!(arch, "arm64" | "x86_64") {
        formats.push("universal2");
    }
    if matches!(arch, "x86_64" | "i386" | "ppc64" | "ppc" | "intel") {
        formats.push("universal");
    }
    formats
}

/// The platforms a machine whose best platform tag is `platform` (as
/// `--platform` names it) takes, best first: for a manylinux or musllinux
/// tag every older C library version too, for a macOS one every older
/// release, as pip running on that machine would; anything else as it is.
pub fn expand_platform(platform: &str) -> Vec<String> {
    let numbered = |prefix: &str| {
        let rest = platform.strip_prefix(prefix)?;
        let mut parts = rest.splitn(3, '_');
        let major = parts.next()?.parse::<u32>().ok()?;
        let minor = parts.next()?.parse::<u32>().ok()?;
        Some(((major, minor), parts.next().filter(|arch| !arch.is_empty())?))
    };
    if let Some((glibc, arch)) = numbered("manylinux_") {
        return with_itself(platform, manylinux(arch, glibc));
    }
    if let Some((version, legacy)) = LEGACY_MANYLINUX.iter().find(|(_, legacy)| platform.starts_with(legacy)) {
        let arch = platform[legacy.len()..].trim_start_matches('_');
        return with_itself(platform, manylinux(arch, *version));
    }
    if let Some((musl, arch)) = numbered("musllinux_") {
        return with_itself(platform, musllinux(arch, musl));
    }
    if let Some((version, arch)) = numbered("macosx_") {
        return with_itself(platform, mac_platforms(version, arch));
    }
    vec![platform.to_owned()]
}

/// `platforms`, `platform` first whatever they are.
fn with_itself(platform: &str, platforms: Vec<String>) -> Vec<String> {
    let mut all = vec![platform.to_owned()];
    all.extend(platforms.into_iter().filter(|other| other != platform));
    all
}

/// A target's supported tags by their rank (0 the best), and what it
/// picks of a release's files.
pub struct Ranking {
    rank: HashMap<String, usize>,
}

impl Ranking {
    /// The ranking of `target`'s supported tags.
    pub fn of(target: &Target) -> Ranking {
        let mut rank = HashMap::new();
        for (at, tag) in target.supported().into_iter().enumerate() {
            rank.entry(tag).or_insert(at);
        }
        Ranking { rank }
    }

    /// The rank of the wheel `filename`: the best of its tags; `None` when
    /// it is not a wheel, or one the target does not take.
    pub fn wheel(&self, filename: &str) -> Option<usize> {
        wheel_tags(filename)?.iter().filter_map(|tag| self.rank.get(tag).copied()).min()
    }

    /// Which of a release's files (by name, in the page's order) an
    /// installer takes: the wheel of the best tag (the first of equals),
    /// else the first sdist; `None` when neither fits.
    pub fn pick<'n>(&self, filenames: impl IntoIterator<Item = &'n str>) -> Option<usize> {
        let filenames: Vec<&str> = filenames.into_iter().collect();
        let best_wheel = filenames
            .iter()
            .enumerate()
            .filter_map(|(at, filename)| Some((self.wheel(filename)?, at)))
            .min()
            .map(|(_, at)| at);
        best_wheel.or_else(|| filenames.iter().position(|filename| is_sdist(filename)))
    }
}

/// The tags a wheel's name says it is for (`py3-none-any`; a compressed
/// set `cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64` is two),
/// in lower case; `None` when `filename` is no wheel's.
pub fn wheel_tags(filename: &str) -> Option<Vec<String>> {
    let stem = filename.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    if !(5..=6).contains(&parts.len()) {
        return None;
    }
    let [pythons, abis, platforms] = [parts.len() - 3, parts.len() - 2, parts.len() - 1].map(|at| parts[at]);
    let mut tags = Vec::new();
    for python in pythons.split('.') {
        for abi in abis.split('.') {
            for platform in platforms.split('.') {
                tags.push(format!("{python}-{abi}-{platform}").to_ascii_lowercase());
            }
        }
    }
    Some(tags)
}

/// Whether `filename` is a source distribution's.
pub fn is_sdist(filename: &str) -> bool {
    [".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz"].iter().any(|ext| filename.ends_with(ext))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpython(python: (u32, u32), platforms: &[&str]) -> Target {
        Target {
            implementation: "cp".into(),
            python,
            abis: cpython_abis(python, false, false, true),
            platforms: platforms.iter().map(|platform| platform.to_string()).collect(),
        }
    }

    // The lists below are those pip prints with `pip debug --verbose` (and
    // `--platform`, `--python-version`, `--implementation`).
    #[test]
    fn cpython_s_tags_come_in_pip_s_order_its_own_abi_then_abi3_then_none_then_older_abi3_then_pure() {
        let tags = cpython((3, 12), &["manylinux_2_17_x86_64", "linux_x86_64"]).supported();
        let expected = [
            "cp312-cp312-manylinux_2_17_x86_64",
            "cp312-cp312-linux_x86_64",
            "cp312-abi3-manylinux_2_17_x86_64",
            "cp312-abi3-linux_x86_64",
            "cp312-none-manylinux_2_17_x86_64",
            "cp312-none-linux_x86_64",
            "cp311-abi3-manylinux_2_17_x86_64",
            "cp311-abi3-linux_x86_64",
        ];
        assert_eq!(tags[..8], expected);
        let cp32 = tags.iter().position(|tag| tag == "cp32-abi3-linux_x86_64").unwrap();
        assert_eq!(
            tags[cp32 + 1..cp32 + 5],
            [
                "py312-none-manylinux_2_17_x86_64",
                "py312-none-linux_x86_64",
                "py3-none-manylinux_2_17_x86_64",
                "py3-none-linux_x86_64"
            ]
        );
        let any = tags.iter().position(|tag| tag == "cp312-none-any").unwrap();
        assert_eq!(tags[any..any + 4], ["cp312-none-any", "py312-none-any", "py3-none-any", "py311-none-any"]);
        assert_eq!(tags.last().map(String::as_str), Some("py30-none-any"));
        assert_eq!(tags.len(), 2 * (3 + 10 + 14) + 1 + 14);
    }

    #[test]
    fn a_free_threaded_cpython_takes_abi3t_not_abi3_and_an_old_one_its_pymalloc_abi() {
        let threaded = Target { abis: cpython_abis((3, 13), false, true, true), ..cpython((3, 13), &["linux_x86_64"]) };
        assert_eq!(threaded.abis, ["cp313t"]);
        let tags = threaded.supported();
        assert_eq!(
            tags[..4],
            [
                "cp313-cp313t-linux_x86_64",
                "cp313-abi3t-linux_x86_64",
                "cp313-none-linux_x86_64",
                "cp312-abi3t-linux_x86_64"
            ]
        );
        assert!(!tags.iter().any(|tag| tag.contains("abi3-")));
        assert_eq!(cpython_abis((3, 7), false, false, true), ["cp37m"]);
        assert_eq!(cpython_abis((3, 12), true, false, true), ["cp312d", "cp312"]);
    }

    #[test]
    fn pypy_s_tags_are_its_abi_then_none_then_pure() {
        let pypy = Target {
            implementation: "pp".into(),
            python: (3, 10),
            abis: vec!["pypy310_pp73".into()],
            platforms: vec!["linux_x86_64".into()],
        };
        let tags = pypy.supported();
        assert_eq!(
            tags[..3],
            ["pp310-pypy310_pp73-linux_x86_64", "pp310-none-linux_x86_64", "py310-none-linux_x86_64"]
        );
        assert!(tags.contains(&"pp310-none-any".to_owned()));
    }

    #[test]
    fn a_glibc_machine_takes_every_older_manylinux_and_its_legacy_names_in_place() {
        let platforms = linux_platforms("x86_64", Some((2, 36)), None);
        assert_eq!(platforms[..3], ["linux_x86_64", "manylinux_2_36_x86_64", "manylinux_2_35_x86_64"]);
        let at = platforms.iter().position(|platform| platform == "manylinux_2_17_x86_64").unwrap();
        assert_eq!(platforms[at + 1], "manylinux2014_x86_64");
        assert_eq!(platforms[platforms.len() - 2..], ["manylinux_2_5_x86_64", "manylinux1_x86_64"]);
        assert_eq!(platforms.len(), 1 + 32 + 3);
        let arm = linux_platforms("aarch64", Some((2, 31)), None);
        assert_eq!(arm[arm.len() - 2..], ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]);
        let musl = linux_platforms("x86_64", None, Some((1, 2)));
        assert_eq!(musl, ["linux_x86_64", "musllinux_1_2_x86_64", "musllinux_1_1_x86_64", "musllinux_1_0_x86_64"]);
    }

    #[test]
    fn a_mac_takes_its_release_and_older_ones_in_each_format_it_runs() {
        let arm = mac_platforms((14, 2), "arm64");
        assert_eq!(
            arm[..4],
            ["macosx_14_0_arm64", "macosx_14_0_universal2", "macosx_13_0_arm64", "macosx_13_0_universal2"]
        );
        assert_eq!(arm[6..8], ["macosx_11_0_arm64", "macosx_11_0_universal2"]);
        assert_eq!(arm[8], "macosx_10_16_universal2");
        assert_eq!(arm.last().map(String::as_str), Some("macosx_10_4_universal2"));
        let intel = mac_platforms((10, 9), "x86_64");
        assert_eq!(
            intel[..6],
            [
                "macosx_10_9_x86_64",
                "macosx_10_9_intel",
                "macosx_10_9_fat64",
                "macosx_10_9_fat32",
                "macosx_10_9_universal2",
                "macosx_10_9_universal"
            ]
        );
        assert_eq!(intel.len(), 6 * 6, "10.9 down to 10.4");
    }

    #[test]
    fn a_platform_named_on_the_command_line_is_the_machine_it_names() {
        let glibc_2_28 = expand_platform("manylinux_2_28_x86_64");
        assert_eq!(glibc_2_28[0], "manylinux_2_28_x86_64");
        assert!(glibc_2_28.contains(&"manylinux2014_x86_64".to_owned()));
        assert!(!glibc_2_28.iter().any(|platform| platform.contains("2_29")));
        let legacy = expand_platform("manylinux2014_x86_64");
        assert_eq!(legacy[..2], ["manylinux2014_x86_64", "manylinux_2_17_x86_64"]);
        assert!(legacy.contains(&"manylinux1_x86_64".to_owned()));
        assert_eq!(expand_platform("musllinux_1_1_aarch64"), ["musllinux_1_1_aarch64", "musllinux_1_0_aarch64"]);
        assert_eq!(expand_platform("macosx_11_0_arm64")[..2], ["macosx_11_0_arm64", "macosx_11_0_universal2"]);
        assert_eq!(expand_platform("win_amd64"), ["win_amd64"]);
        assert_eq!(expand_platform("manylinux_x_y"), ["manylinux_x_y"]);
    }

    #[test]
    fn of_a_release_pip_takes_the_wheel_of_the_best_tag_else_the_sdist() {
        let ranking = Ranking::of(&cpython(
            (3, 12),
            &expand_platform("manylinux_2_28_x86_64").iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        let files = [
            "numpy-2.0.0.tar.gz",
            "numpy-2.0.0-py3-none-any.whl",
            "numpy-2.0.0-cp312-cp312-win_amd64.whl",
            "numpy-2.0.0-cp312-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "numpy-2.0.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "numpy-2.0.0-cp312-cp312-manylinux_2_31_x86_64.whl",
            "numpy-2.0.0-cp311-cp311-manylinux_2_17_x86_64.whl",
        ];
        assert_eq!(ranking.pick(files), Some(4));
        assert_eq!(ranking.pick(files[..4].iter().copied()), Some(3), "abi3 before pure");
        assert_eq!(ranking.pick(files[..3].iter().copied()), Some(1));
        assert_eq!(ranking.pick(["numpy-2.0.0-cp312-cp312-win_amd64.whl", "numpy-2.0.0.zip"]), Some(1));
        assert_eq!(ranking.pick(["numpy-2.0.0-cp312-cp312-win_amd64.whl"]), None);
        assert_eq!(ranking.wheel("Six-1.0-1build-PY3-none-ANY.whl"), ranking.wheel("six-1.0-py3-none-any.whl"));
        assert_eq!(ranking.wheel("notes.txt"), None);
    }

    #[test]
    fn a_target_too_large_to_follow_is_refused() {
        let mut target = cpython((3, 12), &["linux_x86_64"]);
        assert!(target.check().is_ok());
        target.platforms = vec!["linux_x86_64".into(); PLATFORMS_LIMIT + 1];
        assert!(target.check().is_err());
        let target = Target { python: (3, 1_000_000), ..cpython((3, 12), &[]) };
        assert!(target.check().is_err());
    }
}

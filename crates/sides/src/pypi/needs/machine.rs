//! The interpreter and platform whose installs `check pypi` counts: this
//! machine's, as pip on it sees them, unless `--platform`,
//! `--python-version`, `--implementation` and `--abi` say otherwise (as
//! `pip download` takes them). The machine's Python (`python3`, or the one
//! `--python` names) is asked once, and only for what the options leave
//! open; what it cannot say (the musl version) is read as pip reads it;
//! with no Python here, CPython 3.12 on this machine's platform is
//! assumed, and the label says so.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::Deserialize;

use super::tags::{self, Target};
use crate::needs::NeedsError;

/// The Python version assumed where no Python answers.
const ASSUMED_PYTHON: (u32, u32) = (3, 12);

/// What the Python asked says of itself (the script below).
const ASK: &str = r#"
import json, os, platform, sys, sysconfig
var = sysconfig.get_config_var
try:
    libc = os.confstr("CS_GNU_LIBC_VERSION")
except (AttributeError, ValueError, OSError):
    libc = None
print(json.dumps({
    "name": sys.implementation.name,
    "version": list(sys.version_info[:2]),
    "platform": sysconfig.get_platform(),
    "libc": libc,
    "bits64": sys.maxsize > 2 ** 32,
    "debug": var("Py_DEBUG"),
    "refcount": hasattr(sys, "gettotalrefcount"),
    "gil_disabled": var("Py_GIL_DISABLED"),
    "pymalloc": var("WITH_PYMALLOC"),
    "ext_suffix": var("EXT_SUFFIX"),
    "mac": platform.mac_ver()[0],
    "machine": platform.machine(),
}))
"#;

/// What an interpreter says of itself.
#[derive(Debug, Deserialize)]
struct Said {
    name: String,
    version: (u32, u32),
    platform: String,
    libc: Option<String>,
    bits64: bool,
    debug: Option<serde_json::Value>,
    refcount: bool,
    gil_disabled: Option<serde_json::Value>,
    pymalloc: Option<serde_json::Value>,
    ext_suffix: Option<String>,
    mac: String,
    machine: String,
}

/// The options that choose the target, as `check pypi` takes them.
#[derive(Debug, Default)]
pub struct Chosen<'a> {
    /// `--platform`, each the best tag of a machine.
    pub platforms: &'a [String],
    /// `--python-version`: `3.12`, `312`.
    pub python_version: Option<&'a str>,
    /// `--implementation`: `cp`, `pp`, `py`.
    pub implementation: Option<&'a str>,
    /// `--abi`.
    pub abis: &'a [String],
    /// `--python`: the interpreter to ask; `None`: `python3`, if any.
    pub python: Option<&'a Path>,
}

/// The target the options choose, and how people call it (`cp312 on
/// manylinux_2_36_x86_64`).
pub fn target(chosen: &Chosen<'_>) -> Result<(Target, String), NeedsError> {
    let python_version = chosen.python_version.map(parse_python_version).transpose()?;
    if let Some(implementation) = chosen.implementation {
        if implementation.is_empty() || !implementation.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(NeedsError::new(format!("--implementation {implementation}: not one (cp, pp, py)")));
        }
    }
    let open = chosen.platforms.is_empty() || python_version.is_none() || chosen.implementation.is_none();
    let said = if open { ask(chosen.python)? } else { None };
    let implementation = match (chosen.implementation, &said) {
        (Some(implementation), _) => implementation.to_ascii_lowercase(),
        (None, Some(said)) => short_name(&said.name),
        (None, None) => "cp".to_owned(),
    };
    let python = python_version.or(said.as_ref().map(|said| said.version)).unwrap_or(ASSUMED_PYTHON);
    let platforms = match chosen.platforms {
        [] => match &said {
            Some(said) => platforms_said(said),
            None => platforms_here(),
        },
        named => unique(named.iter().flat_map(|platform| tags::expand_platform(platform))),
    };
    let own = said.as_ref().filter(|said| short_name(&said.name) == implementation && said.version == python);
    let abis = match (chosen.abis, implementation.as_str()) {
        ([], "cp") => {
            let flag = |value: &Option<serde_json::Value>| own.map(|_| truthy(value));
            let debug = own.is_some_and(|said| flag(&said.debug).unwrap_or(Some(said.refcount)) == Some(true));
            let threaded = own.is_some_and(|said| flag(&said.gil_disabled) == Some(Some(true)));
            let pymalloc = own.is_none_or(|said| truthy(&said.pymalloc) != Some(false));
            tags::cpython_abis(python, debug, threaded, pymalloc)
        }
        ([], _) => own.and_then(generic_abi).into_iter().collect(),
        (given, _) => given.to_vec(),
    };
    let target = Target { implementation, python, abis, platforms };
    let on = match chosen.platforms {
        // A machine's first platform is `linux_ARCH`: its C library says more.
        [] => {
            let telling = target.platforms.iter().find(|platform| !platform.starts_with("linux_"));
            telling.or(target.platforms.first()).cloned().unwrap_or_default()
        }
        named => named.join(", "),
    };
    let assumed = if open && said.is_none() { " (assumed: no Python answered here)" } else { "" };
    let label = format!("{} on {on}{assumed}", target.interpreter());
    Ok((target, label))
}

/// `--python-version` as pip reads it: `3.12`, `3.12.1`, or `312`.
fn parse_python_version(text: &str) -> Result<(u32, u32), NeedsError> {
    let wrong = || NeedsError::new(format!("--python-version {text}: not a Python version with its minor (3.12)"));
    let (major, minor) = match text.split_once('.') {
        Some((major, rest)) => (major, rest.split('.').next().unwrap_or_default()),
        None if text.len() > 1 && text.is_char_boundary(1) => text.split_at(1),
        None => return Err(wrong()),
    };
    Ok((major.parse().map_err(|_| wrong())?, minor.parse().map_err(|_| wrong())?))
}

/// What the interpreter `python` (else `python3`, if there is one) says of
/// itself; `None` when no `python3` is here. A `--python` that does not
/// answer is an error.
fn ask(python: Option<&Path>) -> Result<Option<Said>, NeedsError> {
    let program = python.unwrap_or(Path::new("python3"));
    let output = Command::new(program).args(["-I", "-c", ASK]).stdin(Stdio::null()).output();
    let failed = |why: String| match python {
        Some(python) => Err(NeedsError::new(format!("--python {}: {why}", python.display()))),
        None => Ok(None),
    };
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => return failed(String::from_utf8_lossy(&output.stderr).trim().to_owned()),
        Err(error) => return failed(error.to_string()),
    };
    match serde_json::from_slice(&output.stdout) {
        Ok(said) => Ok(Some(said)),
        Err(error) => failed(format!("not what a Python says: {error}")),
    }
}

/// An implementation's short name, as tags spell it (`cpython`: `cp`).
fn short_name(name: &str) -> String {
    match name {
        "cpython" => "cp".into(),
        "pypy" => "pp".into(),
        "python" => "py".into(),
        "ironpython" => "ip".into(),
        "jython" => "jy".into(),
        other => other.to_owned(),
    }
}

/// A configuration variable as a flag: `None` when unset.
fn truthy(value: &Option<serde_json::Value>) -> Option<bool> {
    match value.as_ref()? {
        serde_json::Value::Bool(flag) => Some(*flag),
        serde_json::Value::Number(number) => Some(number.as_i64() != Some(0)),
        serde_json::Value::Null => None,
        _ => Some(true),
    }
}

/// A non-CPython interpreter's own ABI, from its extension modules'
/// suffix (`.pypy310-pp73-x86_64-linux-gnu.so`: `pypy310_pp73`).
fn generic_abi(said: &Said) -> Option<String> {
    let soabi = said.ext_suffix.as_deref()?.split('.').nth(1)?;
    let parts: Vec<&str> = soabi.split('-').collect();
    let abi = match parts.first()? {
        first if first.starts_with("pypy") => parts.get(..2)?.join("-"),
        first if first.starts_with("graalpy") => parts.get(..3)?.join("-"),
        _ => soabi.to_owned(),
    };
    Some(normalized(&abi))
}

/// A name with `-`, `.` and spaces as `_`, as tags spell it.
fn normalized(text: &str) -> String {
    text.replace(['-', '.', ' '], "_")
}

/// The platforms an interpreter that said `said` takes, best first.
fn platforms_said(said: &Said) -> Vec<String> {
    let platform = normalized(&said.platform);
    if let Some(arch) = platform.strip_prefix("linux_") {
        let arch = match (said.bits64, arch) {
            (false, "x86_64") => "i686",
            (false, "aarch64") => "armv8l",
            (_, arch) => arch,
        };
        let glibc = said.libc.as_deref().and_then(|libc| version_after(libc, "glibc "));
        let musl = if glibc.is_none() { musl_version(arch) } else { None };
        return tags::linux_platforms(arch, glibc, musl);
    }
    if platform.starts_with("macosx_") {
        let release = version_after(&said.mac, "").unwrap_or((11, 0));
        let arch = match (said.bits64, said.machine.as_str()) {
            (false, machine) if machine.starts_with("ppc") => "ppc",
            (false, _) => "i386",
            (true, machine) => machine,
        };
        return tags::mac_platforms(release, arch);
    }
    vec![platform]
}

/// The platforms of this machine with no Python to ask, best first.
fn platforms_here() -> Vec<String> {
    let arch = match std::env::consts::ARCH {
        "x86" => "i686",
        "arm" => "armv7l",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "powerpc64" => "ppc64",
        arch => arch,
    };
    match std::env::consts::OS {
        "linux" => {
            let glibc = said_by("getconf", &["GNU_LIBC_VERSION"]).and_then(|said| version_after(&said, "glibc "));
            let musl = if glibc.is_none() { musl_version(arch) } else { None };
            tags::linux_platforms(arch, glibc, musl)
        }
        "macos" => {
            let release = said_by("sw_vers", &["-productVersion"]).and_then(|said| version_after(&said, ""));
            let arch = if arch == "aarch64" { "arm64" } else { arch };
            tags::mac_platforms(release.unwrap_or((11, 0)), arch)
        }
        "windows" => vec![match arch {
            "x86_64" => "win_amd64".to_owned(),
            "aarch64" => "win_arm64".to_owned(),
            _ => "win32".to_owned(),
        }],
        os => vec![format!("{os}_{arch}")],
    }
}

/// The musl version of this machine, from its dynamic loader
/// (`/lib/ld-musl-ARCH.so.1` says `Version 1.2.4`), as pip reads it.
fn musl_version(arch: &str) -> Option<(u32, u32)> {
    let loader = format!("/lib/ld-musl-{arch}.so.1");
    let output = Command::new(&loader).stdin(Stdio::null()).output().ok()?;
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    said.lines().find_map(|line| version_after(line.trim(), "Version "))
}

/// What `program ARGS` prints, when it succeeds.
fn said_by(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).stdin(Stdio::null()).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The `MAJOR.MINOR` right after `prefix` in `text`.
fn version_after(text: &str, prefix: &str) -> Option<(u32, u32)> {
    let mut numbers = text.strip_prefix(prefix)?.trim().split(['.', '-']);
    let major = numbers.next()?.parse().ok()?;
    let minor = numbers.next().and_then(|minor| minor.parse().ok()).unwrap_or(0);
    Some((major, minor))
}

/// `items` with each kept once, where it first comes.
fn unique(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items.filter(|item| seen.insert(item.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_version_is_read_as_pip_reads_it() {
        assert_eq!(parse_python_version("3.12").unwrap(), (3, 12));
        assert_eq!(parse_python_version("312").unwrap(), (3, 12));
        assert_eq!(parse_python_version("3.9.18").unwrap(), (3, 9));
        for wrong in ["3", "three", "3.x", ""] {
            assert!(parse_python_version(wrong).is_err(), "{wrong}");
        }
    }

    #[test]
    fn a_target_named_whole_asks_no_python_and_expands_each_platform() {
        let platforms = ["manylinux_2_28_aarch64".to_owned(), "win_amd64".to_owned()];
        let chosen = Chosen {
            platforms: &platforms,
            python_version: Some("3.11"),
            implementation: Some("cp"),
            python: Some(Path::new("/nonexistent/python")),
            ..Chosen::default()
        };
        let (target, label) = target(&chosen).unwrap();
        assert_eq!(label, "cp311 on manylinux_2_28_aarch64, win_amd64");
        assert_eq!(target.abis, ["cp311"]);
        assert_eq!(target.platforms.first().map(String::as_str), Some("manylinux_2_28_aarch64"));
        assert!(target.platforms.contains(&"manylinux2014_aarch64".to_owned()));
        assert_eq!(target.platforms.last().map(String::as_str), Some("win_amd64"));
    }

    #[test]
    fn a_python_named_that_does_not_answer_is_an_error_and_no_python3_is_an_assumption() {
        let chosen = Chosen { python: Some(Path::new("/nonexistent/python")), ..Chosen::default() };
        let failed = target(&chosen).unwrap_err();
        assert!(failed.to_string().starts_with("--python /nonexistent/python: "), "{failed}");
        assert_eq!(ask(None).ok().map(|_| ()), Some(()), "a missing python3 is no error");
    }

    #[test]
    fn pypy_s_abi_is_read_from_its_extension_suffix() {
        let said = |suffix: &str| Said {
            name: "pypy".into(),
            version: (3, 10),
            platform: "linux-x86_64".into(),
            libc: Some("glibc 2.36".into()),
            bits64: true,
            debug: None,
            refcount: false,
            gil_disabled: None,
            pymalloc: None,
            ext_suffix: Some(suffix.into()),
            mac: String::new(),
            machine: "x86_64".into(),
        };
        assert_eq!(generic_abi(&said(".pypy310-pp73-x86_64-linux-gnu.so")).as_deref(), Some("pypy310_pp73"));
        let platforms = platforms_said(&said(".so"));
        assert_eq!(platforms[..2], ["linux_x86_64", "manylinux_2_36_x86_64"]);
    }

    /// The test tools' Python (`test.sh` installs it with a current pip).
    fn test_python() -> std::path::PathBuf {
        let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools/python/bin/python");
        assert!(python.exists(), "{} is missing: test.sh installs it", python.display());
        python
    }

    #[test]
    fn this_machine_s_tags_are_the_ones_pip_on_it_lists_in_pip_s_order() {
        let python = test_python();
        let debug = Command::new(&python).args(["-m", "pip", "debug", "--verbose"]).output().unwrap();
        let printed = String::from_utf8_lossy(&debug.stdout);
        let listed = printed.lines().skip_while(|line| !line.starts_with("Compatible tags:")).skip(1);
        let pips: Vec<&str> = listed.take_while(|line| line.starts_with("  ")).map(str::trim).collect();
        assert!(pips.len() > 10, "{printed}");
        let (target, label) = target(&Chosen { python: Some(&python), ..Chosen::default() }).unwrap();
        assert!(!label.contains("assumed"), "{label}");
        assert_eq!(target.supported(), pips);
    }

    #[test]
    fn another_platform_s_tags_are_the_ones_pip_download_lists_for_it() {
        let python = test_python();
        let targets = [
            ("win_amd64", "3.11", "cp", None),
            ("macosx_11_0_arm64", "312", "cp", None),
            ("manylinux2014_x86_64", "3.10", "pp", Some("pypy310_pp73")),
        ];
        for (platform, version, implementation, abi) in targets {
            let mut args =
                vec!["--platform", platform, "--python-version", version, "--implementation", implementation];
            args.extend(abi.iter().flat_map(|abi| ["--abi", abi]));
            let debug = Command::new(&python).args(["-m", "pip", "debug", "--verbose"]).args(&args).output().unwrap();
            let printed = String::from_utf8_lossy(&debug.stdout);
            let listed = printed.lines().skip_while(|line| !line.starts_with("Compatible tags:")).skip(1);
            let pips: Vec<&str> = listed.take_while(|line| line.starts_with("  ")).map(str::trim).collect();
            assert!(pips.len() > 10, "{printed}");
            let (platforms, abis) = ([platform.to_owned()], abi.map(str::to_owned).into_iter().collect::<Vec<_>>());
            let chosen = Chosen {
                platforms: &platforms,
                python_version: Some(version),
                implementation: Some(implementation),
                abis: &abis,
                ..Chosen::default()
            };
            let ours = target(&chosen).unwrap().0.supported();
            // pip download takes no older manylinux_2_X than a platform's own
            // legacy names; pkgproxy counts what a machine of it takes.
            let ours: Vec<&str> = ours.iter().map(String::as_str).filter(|tag| pips.contains(tag)).collect();
            assert_eq!(ours, pips, "{platform}");
        }
    }
}

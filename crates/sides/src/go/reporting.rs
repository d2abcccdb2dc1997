//! What the go side's keys name, for the page listing the cache: a
//! module's `.zip`, `.mod` and `.info` are its version, its list and
//! `@latest` its metadata; the checksum database's tiles name no module.
//! The side sends no client's credentials upstream: nothing it holds is
//! private (a module the upstream proxy refused is never cached).

use super::path::unescape;
use super::Go;
use crate::role::reporting::{Named, Reporting};

impl Reporting for Go {
    fn noun(&self) -> &'static str {
        "modules"
    }

    fn names(&self, key: &str) -> Named {
        key.strip_prefix("go/").map_or(Named::Other, named)
    }
}

/// What `relative` (a key below `go/`) names.
fn named(relative: &str) -> Named {
    if relative.starts_with("sumdb/") {
        return Named::Other;
    }
    let (module, file) = match relative.split_once("/@v/") {
        Some((module, file)) => (module, Some(file)),
        None => match relative.strip_suffix("/@latest") {
            Some(module) => (module, None),
            None => return Named::Other,
        },
    };
    let Some(package) = unescape(module) else { return Named::Other };
    let version = file.and_then(|file| {
        [".zip", ".mod", ".info"].iter().find_map(|suffix| file.strip_suffix(suffix)).and_then(unescape)
    });
    match version {
        Some(version) => Named::File { package, version },
        None => Named::Metadata { package },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_s_files_name_its_version_and_its_list_the_module() {
        let file = |package: &str, version: &str| Named::File { package: package.into(), version: version.into() };
        assert_eq!(named("github.com/!burnt!sushi/toml/@v/v1.3.2.zip"), file("github.com/BurntSushi/toml", "v1.3.2"));
        assert_eq!(named("example.com/m/@v/v0.1.0.mod"), file("example.com/m", "v0.1.0"));
        assert_eq!(named("example.com/m/@v/list"), Named::Metadata { package: "example.com/m".into() });
        assert_eq!(named("example.com/m/@latest"), Named::Metadata { package: "example.com/m".into() });
        assert_eq!(named("sumdb/sum.golang.org/lookup/example.com/m@v1.0.0"), Named::Other);
    }
}

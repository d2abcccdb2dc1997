//! What a go module needs, for `pkgproxyctl check go`: the module versions
//! its `go.sum` lists, as the go command asks a module proxy for them
//! (`/go/<module>/@v/<version>.zip`, case-encoded), and with its `go.mod`,
//! the `@v/list` of each module it requires. The files say it all: nothing
//! is left for the daemon to follow.

use std::path::PathBuf;

use super::path::escape;
use crate::needs::{self, Asked, NeededItem, Needs, NeedsError, NeedsReader};

/// What `check go` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// The module's go.sum.
    go_sum: PathBuf,
    /// Its go.mod: each module it requires also needs its `@v/list`.
    #[arg(long, value_name = "GO.MOD")]
    go_mod: Option<PathBuf>,
}

/// go's reader of a build's files.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "Go modules: every module version a go.sum lists (`.info`, `.mod`, `.zip`; `.mod` alone for a \
                     `/go.mod` line)";
        <Arguments as clap::Args>::augment_args(clap::Command::new("go")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        let go_mod = arguments.go_mod.as_deref().map(needs::read_file).transpose()?;
        Ok(Asked::Known(Needs::of(items(&needs::read_file(&arguments.go_sum)?, go_mod.as_deref()))))
    }
}

/// The requests `go mod download` makes for `go_sum`, and the lists of the
/// modules `go_mod` requires.
fn items(go_sum: &str, go_mod: Option<&str>) -> Vec<NeededItem> {
    let mut items = Vec::new();
    for line in go_sum.lines() {
        let mut words = line.split_whitespace();
        let (Some(module), Some(version)) = (words.next(), words.next()) else { continue };
        let (version, files): (&str, &[&str]) = match version.strip_suffix("/go.mod") {
            Some(version) => (version, &["mod"]),
            None => (version, &["info", "mod", "zip"]),
        };
        for file in files {
            items.push(NeededItem {
                url: format!("/go/{}/@v/{}.{file}", escape(module), escape(version)),
                label: format!("{module} {version} .{file}"),
            });
        }
    }
    for module in go_mod.map(required).unwrap_or_default() {
        items.push(NeededItem { url: format!("/go/{}/@v/list", escape(&module)), label: format!("{module} versions") });
    }
    items
}

/// The modules a `go.mod` requires (both forms: `require m v` and a
/// `require ( ... )` block).
fn required(go_mod: &str) -> Vec<String> {
    let mut modules = Vec::new();
    let mut in_block = false;
    for line in go_mod.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        let listed = match (in_block, line) {
            (true, ")") => {
                in_block = false;
                None
            }
            (true, line) => Some(line),
            (false, "require (") => {
                in_block = true;
                None
            }
            (false, line) => line.strip_prefix("require "),
        };
        if let Some(module) = listed.and_then(|entry| entry.split_whitespace().next()) {
            modules.push(module.trim_matches('"').to_owned());
        }
    }
    modules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_go_sum_needs_each_version_s_files_and_a_go_mod_the_lists() {
        let go_sum = "example.com/HelloCaps v0.1.0 h1:abc=\nexample.com/HelloCaps v0.1.0/go.mod h1:def=\n\
                      example.com/hello v1.0.0/go.mod h1:ghi=\n";
        let go_mod = "module example.com/app\n\nrequire example.com/HelloCaps v0.1.0\nrequire (\n\texample.com/hello v1.0.0 // indirect\n)\n";
        let urls: Vec<String> = items(go_sum, Some(go_mod)).into_iter().map(|item| item.url).collect();
        assert_eq!(
            urls,
            [
                "/go/example.com/!hello!caps/@v/v0.1.0.info",
                "/go/example.com/!hello!caps/@v/v0.1.0.mod",
                "/go/example.com/!hello!caps/@v/v0.1.0.zip",
                "/go/example.com/!hello!caps/@v/v0.1.0.mod",
                "/go/example.com/hello/@v/v1.0.0.mod",
                "/go/example.com/!hello!caps/@v/list",
                "/go/example.com/hello/@v/list",
            ]
        );
    }
}

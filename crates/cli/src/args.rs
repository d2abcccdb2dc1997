//! The original pkgproxy spells its flags with one dash (`-addr :3142`, Go
//! style); clap wants two. Both spellings are accepted by rewriting
//! `-name[=value]` to `--name[=value]` before clap sees the arguments.

use std::ffi::OsString;

/// Rewrites single-dash long flags to double-dash ones. Single-letter flags
/// (`-h`), values that follow a flag, and everything after `--` are left
/// alone.
pub fn normalise(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut rest_is_positional = false;
    for arg in args {
        let text = arg.to_string_lossy();
        if rest_is_positional || out.is_empty() {
            out.push(arg);
            continue;
        }
        if text == "--" {
            rest_is_positional = true;
            out.push(arg);
            continue;
        }
        let name = text.strip_prefix('-').unwrap_or("");
        let is_single_dash_long = !name.is_empty()
            && !name.starts_with('-')
            && name.split('=').next().is_some_and(|n| n.len() > 1 && n.starts_with(|c: char| c.is_ascii_alphabetic()));
        if is_single_dash_long {
            let mut double = OsString::from("-");
            double.push(&arg);
            out.push(double);
        } else {
            out.push(arg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Vec<String> {
        normalise(args.iter().map(OsString::from)).into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn single_dash_long_flags_get_a_second_dash() {
        assert_eq!(
            run(&["pkgproxy", "-addr", ":3142", "-cache-dir=/x", "--config", "c", "-h", "-help"]),
            ["pkgproxy", "--addr", ":3142", "--cache-dir=/x", "--config", "c", "-h", "--help"]
        );
    }

    #[test]
    fn values_and_positionals_are_left_alone() {
        assert_eq!(
            run(&["pkgproxyctl", "offline", "-json", "--", "-x"]),
            ["pkgproxyctl", "offline", "--json", "--", "-x"]
        );
        assert_eq!(run(&["pkgproxy", "-addr", "-1"]), ["pkgproxy", "--addr", "-1"]);
    }
}

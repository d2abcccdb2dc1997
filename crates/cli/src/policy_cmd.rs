//! `pkgproxyctl policy`: the fleet's policy in force and what it refused,
//! and `policy why SIDE NAME VERSION`: whether a release is served now and
//! why, as the daemon judges a client's request of it.

use std::process::ExitCode;

use http::Method;
use pkgproxy_control::{ControlClient, PolicyReport, PolicyWhy, POLICY_PATH, POLICY_WHY_PATH};

/// What `pkgproxyctl policy` does besides listing the rules.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Say whether a release is served now, and why: the rule that refuses
    /// it and until when, the allow entry that lets it through, or that no
    /// rule refuses it. Its publish time is learnt as a client's request
    /// of it would learn it. Exits 1 when it is refused.
    Why {
        /// The side: npm, pypi, cargo or go.
        side: String,
        /// The package, as its ecosystem writes it (`@scope/name`,
        /// `Django`, `serde`, `golang.org/x/text`).
        name: String,
        /// The version (`1.3.1`, `v0.14.0` for go).
        version: String,
        /// Print the daemon's JSON answer as it is.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `policy` (the rules and the refusals) or `policy why`, asking the
/// stats socket.
pub async fn run(command: Option<PolicyCommand>, json: bool, stats: &ControlClient) -> anyhow::Result<ExitCode> {
    match command {
        None => {
            let report: PolicyReport = stats.json(Method::GET, POLICY_PATH, None).await?;
            match json {
                true => println!("{}", serde_json::to_string_pretty(&report)?),
                false => print!("{}", render_report(&report)),
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(PolicyCommand::Why { side, name, version, json }) => {
            let query = [("side", &side), ("name", &name), ("version", &version)]
                .map(|(key, value)| format!("{key}={}", encoded(value)))
                .join("&");
            let told: PolicyWhy = stats.json(Method::GET, &format!("{POLICY_WHY_PATH}?{query}"), None).await?;
            match json {
                true => println!("{}", serde_json::to_string_pretty(&told)?),
                false => print!("{}", render_why(&told)),
            }
            Ok(if told.served { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}

fn encoded(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The rules, one per line, then the refusals by side and rule and the
/// last releases refused.
fn render_report(report: &PolicyReport) -> String {
    if !report.in_force {
        return "no policy is in force: every release is served as its registry gives it \
                ([policy] in the configuration file sets one)\n"
            .to_owned();
    }
    let mut out = String::from("rules in force:\n");
    for rule in &report.rules {
        out.push_str(&format!("  {rule}\n"));
    }
    if report.rules.is_empty() {
        out.push_str("  none: every release is served\n");
    }
    match report.blocked.is_empty() {
        true => out.push_str("refused since start: nothing\n"),
        false => {
            out.push_str("refused since start:\n");
            for count in &report.blocked {
                out.push_str(&format!("  {:<6} {:<13} {}\n", count.side, count.rule, count.count));
            }
        }
    }
    if !report.recent.is_empty() {
        out.push_str("last refused:\n");
        for refused in &report.recent {
            let at = pkgproxy_control::utc_minute(refused.at);
            out.push_str(&format!("  {at}  {}: {}\n", refused.release, refused.because));
        }
    }
    out
}

/// The verdict, then what it read.
fn render_why(told: &PolicyWhy) -> String {
    let mut out = format!("{}: {}\n", told.release, told.why);
    if let Some(published) = told.published {
        out.push_str(&format!("  published: {}\n", pkgproxy_control::utc_minute(published)));
    }
    if let Some(until) = told.until {
        out.push_str(&format!("  served from: {}\n", pkgproxy_control::utc_minute(until)));
    }
    if let Some(line) = &told.line {
        out.push_str(&format!("  a client is told: {line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkgproxy_control::{BlockedCount, BlockedRelease};

    #[test]
    fn the_report_lists_the_rules_then_what_they_refused() {
        assert!(render_report(&PolicyReport::default()).starts_with("no policy is in force"));
        let report = PolicyReport {
            in_force: true,
            rules: vec!["min_age 3d: a release published less than 3d ago is not served".into()],
            blocked: vec![BlockedCount { side: "npm".into(), rule: "min_age".into(), count: 2 }],
            recent: vec![BlockedRelease {
                at: 1_800_000_000,
                side: "npm".into(),
                release: "npm:x@1.0.1".into(),
                rule: "min_age".into(),
                because: "published 2027-01-14T08:00Z, min_age 3d; allowed from 2027-01-17T08:00Z".into(),
            }],
        };
        let text = render_report(&report);
        assert!(text.starts_with("rules in force:\n  min_age 3d: "), "{text}");
        assert!(text.contains("\n  npm    min_age       2\n"), "{text}");
        assert!(text.contains("2027-01-15 08:00 UTC  npm:x@1.0.1: published"), "{text}");
    }
}

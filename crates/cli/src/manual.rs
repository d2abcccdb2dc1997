//! The manual pages, in roff: clap's title, synopsis and options, then the
//! sections a man page reader looks for, written here: the configuration
//! file as an example (never refilled into broken lines), ENVIRONMENT,
//! FILES, SIGNALS, EXIT STATUS; and for pkgproxyctl every command with its
//! own options in the one page (no page named that is not shipped).

use std::io::Write;

use clap::Command;

/// pkgproxy(8).
pub fn pkgproxy(out: &mut dyn Write) -> std::io::Result<()> {
    let command = crate::daemon::command();
    let man = clap_mangen::Man::new(command.clone()).section("8");
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    section(out, "CLIENTS")?;
    let clients: Vec<&str> = pkgproxy_sides::setup_clients().map(|client| client.name).collect();
    paragraph(
        out,
        &format!(
            "Point a client at pkgproxy on the client: pkgproxyctl setup CLIENT --addr HOST:3142, CLIENT one of {} \
             (see pkgproxyctl(1)). The status page, http://HOST:3142/, shows the same lines.",
            clients.join(", ")
        ),
    )?;
    section(out, "CONFIGURATION")?;
    paragraph(out, "The configuration file (TOML) holds what flags cannot say well; unknown keys are errors. It is read at start and again on SIGHUP (pkgproxyctl reload); a file that cannot be used is refused and the settings in use stay. Every key, with its default or a typical value:")?;
    example(out, pkgproxy_server::config::EXAMPLE)?;
    section(out, "ENVIRONMENT")?;
    for arg in command.get_arguments().filter(|arg| !arg.is_hide_set()) {
        if let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) {
            item(out, &env.to_string_lossy(), &format!("As --{long}; the flag wins over the variable."))?;
        }
    }
    item(out, "CACHE_DIRECTORY, STATE_DIRECTORY, RUNTIME_DIRECTORY, LOGS_DIRECTORY", "Set by systemd for the unit's folders: the cache, the state (the listener's certificate) and the control sockets go there by default.")?;
    item(out, "CONFIGURATION_DIRECTORY, CREDENTIALS_DIRECTORY", "Set by systemd: pkgproxy.toml is read from the credentials folder (a file root's only, handed over with LoadCredential=), else from the configuration folder.")?;
    item(
        out,
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION",
        "The cluster store's credentials and region, when [cluster] does not give them.",
    )?;
    item(
        out,
        "PKGPROXY_CLUSTER_PEER_SECRET",
        "What the nodes of a cluster sign their requests to each other with, when [cluster] peer_secret is not set.",
    )?;
    item(
        out,
        "HTTP_PROXY, HTTPS_PROXY, NO_PROXY",
        "A corporate proxy for upstream requests, when [upstream] proxy names no parent pkgproxy.",
    )?;
    item(out, "RUST_LOG", "The log filter, when --log-level is not given.")?;
    section(out, "FILES")?;
    item(
        out,
        "/etc/pkgproxy/pkgproxy.toml",
        "The configuration file, read by default when it exists (as root, or under systemd).",
    )?;
    item(
        out,
        "/etc/default/pkgproxy",
        "PKGPROXY_* variables for the systemd unit, read by systemd as root: it may be 0600 and hold secrets.",
    )?;
    item(
        out,
        "/var/cache/pkgproxy",
        "The cache: bodies, named by their hash, and its index. It may be cleared while pkgproxy is stopped.",
    )?;
    item(
        out,
        "/var/lib/pkgproxy/tls/",
        "The listener's TLS certificate and key, made at first start; LXD clients pin the certificate.",
    )?;
    item(out, "/var/log/pkgproxy/", "The access log, when --access-log names a file there.")?;
    item(
        out,
        "/run/pkgproxy/stats.sock",
        "The read-only control socket (any local user): info, check, explain, policy, /metrics.",
    )?;
    item(
        out,
        "/run/pkgproxy/admin.sock",
        "The read-write control socket (root only): offline, cache, warm, export, import, reload.",
    )?;
    section(out, "SIGNALS")?;
    item(out, "SIGHUP", "Read the configuration file again, and reopen the access log.")?;
    item(out, "SIGUSR1", "Reopen the access log, and nothing else (log rotation).")?;
    item(
        out,
        "SIGTERM, SIGINT",
        "Stop: requests in flight and their downloads finish for --shutdown-grace; a second signal exits at once.",
    )?;
    section(out, "EXIT STATUS")?;
    item(out, "0", "Stopped as asked.")?;
    item(
        out,
        "1",
        "Could not start serving (a listener, the cache, the cluster store refused), or stopped on an error.",
    )?;
    item(out, "2", "A flag, variable or the configuration file cannot be used; nothing was started.")?;
    section(out, "SEE ALSO")?;
    paragraph(out, "pkgproxyctl(1), systemd.exec(5)")?;
    Ok(())
}

/// pkgproxyctl(1): every command and its options in the one page.
pub fn pkgproxyctl(command: Command, out: &mut dyn Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(command.clone()).section("1");
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    section(out, "COMMANDS")?;
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        commands(out, &format!("pkgproxyctl {}", sub.get_name()), sub)?;
    }
    if let Some(examples) = command.get_after_help() {
        section(out, "EXAMPLES")?;
        example(out, examples.to_string().trim_start_matches("Examples:\n"))?;
    }
    section(out, "FILES")?;
    item(out, "/run/pkgproxy/stats.sock", "Asked by default (or this user's own pkgproxy's, when it has one).")?;
    item(out, "/run/pkgproxy/admin.sock", "Asked by default for what changes pkgproxy: root's.")?;
    section(out, "EXIT STATUS")?;
    item(out, "0", "Done; for check, everything is ready; for import, every item was taken in.")?;
    item(
        out,
        "1",
        "Failed, or (check, warm, import) not everything is ready or taken in: what is not is said; check, warm or \
         export of files that name nothing; cache rm of a pattern that matches nothing; explain of a request that \
         would be refused.",
    )?;
    item(out, "2", "The command line cannot be used.")?;
    section(out, "SEE ALSO")?;
    paragraph(out, "pkgproxy(8)")?;
    Ok(())
}

/// `sub`'s usage, what it does and its options, then its own commands'.
fn commands(out: &mut dyn Write, name: &str, sub: &Command) -> std::io::Result<()> {
    let mut usage = sub.clone().bin_name(name);
    writeln!(out, ".SS \"{}\"", escape(usage.render_usage().to_string().trim_start_matches("Usage: ")))?;
    let about = sub.get_long_about().or(sub.get_about()).map(ToString::to_string).unwrap_or_default();
    paragraph(out, &about)?;
    for arg in sub.get_arguments().filter(|arg| !arg.is_hide_set() && !arg.is_global_set()) {
        let help = arg.get_long_help().or(arg.get_help()).map(ToString::to_string).unwrap_or_default();
        let values: Vec<String> = match arg.get_action().takes_values() {
            true => arg.get_possible_values().iter().map(|value| value.get_name().to_owned()).collect(),
            false => Vec::new(),
        };
        let help = match values.is_empty() {
            true => help,
            false => format!("{help} (one of: {})", values.join(", ")),
        };
        let label = match (arg.get_long(), arg.get_short()) {
            (Some(long), Some(short)) => format!("-{short}, --{long}"),
            (Some(long), None) => format!("--{long}"),
            _ => arg
                .get_value_names()
                .and_then(|names| names.first())
                .map_or_else(|| arg.get_id().to_string().to_uppercase(), |name| name.to_string()),
        };
        item(out, &label, &help)?;
    }
    for inner in sub.get_subcommands().filter(|inner| !inner.is_hide_set() && inner.get_name() != "help") {
        commands(out, &format!("{name} {}", inner.get_name()), inner)?;
    }
    Ok(())
}

fn section(out: &mut dyn Write, title: &str) -> std::io::Result<()> {
    writeln!(out, ".SH {title}")
}

fn paragraph(out: &mut dyn Write, text: &str) -> std::io::Result<()> {
    writeln!(out, ".PP")?;
    writeln!(out, "{}", escape(text))
}

/// A tagged paragraph: `tag`, then `text` indented under it.
fn item(out: &mut dyn Write, tag: &str, text: &str) -> std::io::Result<()> {
    writeln!(out, ".TP")?;
    writeln!(out, "\\fB{}\\fR", escape(tag))?;
    writeln!(out, "{}", escape(text))
}

/// `text` as it is, line for line: never filled or adjusted.
fn example(out: &mut dyn Write, text: &str) -> std::io::Result<()> {
    writeln!(out, ".PP")?;
    writeln!(out, ".EX")?;
    for line in text.lines() {
        writeln!(out, "{}", escape(line))?;
    }
    writeln!(out, ".EE")
}

/// `text` safe in roff: backslashes written as such, and a line that
/// would start a request (`.`, `'`) kept as text.
fn escape(text: &str) -> String {
    let text = text.replace('\\', "\\e").replace('-', "\\-");
    text.lines()
        .map(|line| match line.starts_with('.') || line.starts_with('\'') {
            true => format!("\\&{line}"),
            false => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_have_the_sections_readers_look_for_and_name_no_page_not_shipped() {
        let mut daemon = Vec::new();
        pkgproxy(&mut daemon).unwrap();
        let daemon = String::from_utf8(daemon).unwrap();
        for section in ["CONFIGURATION", "ENVIRONMENT", "FILES", "SIGNALS", "EXIT STATUS", "SEE ALSO"] {
            assert!(daemon.contains(&format!(".SH {section}\n")), "{section}");
        }
        let config = &daemon[daemon.find(".EX\n").unwrap()..daemon.find(".EE\n").unwrap()];
        assert!(config.contains("[cluster]") && config.contains("peer_secret"), "every key, as it is: {config}");
        assert!(daemon.contains("PKGPROXY_CACHE_DIR") && daemon.contains("SIGUSR1"));
        let mut ctl = Vec::new();
        pkgproxyctl(<crate::ctl::Flags as clap::CommandFactory>::command(), &mut ctl).unwrap();
        let ctl = String::from_utf8(ctl).unwrap();
        assert!(!ctl.contains("pkgproxyctl-"), "no page of a command, which is not shipped");
        assert!(ctl.contains(".SS \"pkgproxyctl setup") && ctl.contains(r"\-\-apply"), "the commands' options");
        assert!(ctl.contains(".SH EXAMPLES"));
    }

    #[test]
    fn text_never_starts_a_request_and_backslashes_stay() {
        assert_eq!(escape(".not a request\n'nor this"), "\\&.not a request\n\\&'nor this");
        assert_eq!(escape("a\\b --c"), "a\\eb \\-\\-c");
    }
}

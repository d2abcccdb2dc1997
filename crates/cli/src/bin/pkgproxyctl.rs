//! pkgproxyctl: the command-line front end of a running pkgproxy.

fn main() -> std::process::ExitCode {
    pkgproxy_cli::ctl::main()
}

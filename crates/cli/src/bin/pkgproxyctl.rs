//! pkgproxyctl: the command-line front end of a running pkgproxy.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    pkgproxy_cli::ctl::main()
}

//! The pkgproxy daemon.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    pkgproxy_cli::daemon::main()
}

//! The pkgproxy daemon.

fn main() -> std::process::ExitCode {
    pkgproxy_cli::daemon::main()
}

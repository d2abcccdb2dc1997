//! Where the daemon finds its configuration and keeps what is not cache,
//! as a packaged install relies on: the file systemd's folders name is read
//! by default and the log says which; the listener's certificate lives in
//! the state folder, so a cleared cache leaves it (and LXD clients' pins)
//! as it was, and one an earlier version kept in the cache folder moves
//! there; `SIGUSR1` reopens the access log and nothing else.

use pkgproxy_testkit::client::get;
use pkgproxy_testkit::{eventually, Daemon};

use crate::common::PKGPROXY;

#[tokio::test(flavor = "multi_thread")]
async fn the_certificate_lives_in_the_state_folder_and_outlives_a_cleared_cache() {
    let mut daemon = Daemon::start(PKGPROXY, None).await;
    let pem = daemon.info().await.certificate_pem;
    let state = daemon.cache_dir().parent().unwrap().join("state");
    assert_eq!(std::fs::read_to_string(state.join("tls/cert.pem")).unwrap(), pem);
    assert!(!daemon.cache_dir().join("tls").exists(), "not in the cache");

    daemon.stop();
    std::fs::remove_dir_all(daemon.cache_dir()).unwrap();
    daemon.start_again().await;
    assert_eq!(daemon.info().await.certificate_pem, pem, "the cache cleared, the certificate the same");

    // As an earlier version left it: in the cache folder.
    daemon.stop();
    std::fs::rename(state.join("tls"), daemon.cache_dir().join("tls")).unwrap();
    daemon.start_again().await;
    assert_eq!(daemon.info().await.certificate_pem, pem, "the same certificate");
    assert!(state.join("tls/cert.pem").is_file() && !daemon.cache_dir().join("tls/cert.pem").exists());
    assert!(daemon.log().contains("moved the listener's TLS certificate out of the cache"), "{}", daemon.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_file_in_systemd_s_folders_is_read_by_default_and_the_log_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (configuration, credentials) = (dir.path().join("etc"), dir.path().join("credentials"));
    for folder in [&configuration, &credentials] {
        std::fs::create_dir(folder).unwrap();
    }
    std::fs::write(configuration.join("pkgproxy.toml"), "[status]\npage = false\n").unwrap();
    let env = [("CONFIGURATION_DIRECTORY", configuration.to_str().unwrap())];
    let daemon = Daemon::start_with_env(PKGPROXY, None, &[], &env).await;
    assert_eq!(get(daemon.proxy_addr(), "/").await.status, 404, "the file's status page = false was read");
    let named = format!("file={}", configuration.join("pkgproxy.toml").display());
    assert!(daemon.log().contains("configuration read") && daemon.log().contains(&named), "{}", daemon.log());

    // A copy systemd hands the service (a file with secrets, root's only)
    // wins over the folder's.
    std::fs::write(credentials.join("pkgproxy.toml"), "[status]\npage = true\n").unwrap();
    let env = [
        ("CONFIGURATION_DIRECTORY", configuration.to_str().unwrap()),
        ("CREDENTIALS_DIRECTORY", credentials.to_str().unwrap()),
    ];
    let daemon = Daemon::start_with_env(PKGPROXY, None, &[], &env).await;
    assert_eq!(get(daemon.proxy_addr(), "/").await.status, 200);

    let alone = Daemon::start(PKGPROXY, None).await;
    assert!(alone.log().contains("configuration read") && alone.log().contains("file=/dev/null"), "{}", alone.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn sigusr1_reopens_the_access_log_and_reads_no_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let mut daemon = Daemon::start_with(PKGPROXY, Some(""), &["-access-log", log.to_str().unwrap()]).await;
    get(daemon.proxy_addr(), "/pkgproxy/v1/status").await;
    eventually("a line in the log", || async { std::fs::metadata(&log).is_ok_and(|m| m.len() > 0).then_some(()) })
        .await;
    std::fs::rename(&log, dir.path().join("access.log.1")).unwrap();
    // A configuration it could not use: SIGUSR1 must not read it.
    daemon.rewrite_config("[cache]\nmax_size = \"lots\"\n");
    daemon.signal(libc::SIGUSR1);
    eventually("the log reopened", || async { daemon.log().contains("access log reopened").then_some(()) }).await;
    get(daemon.proxy_addr(), "/pkgproxy/v1/status").await;
    eventually("a line in the new log", || async { std::fs::metadata(&log).is_ok_and(|m| m.len() > 0).then_some(()) })
        .await;
    assert!(!daemon.log().contains("configuration not reloaded"), "{}", daemon.log());
}

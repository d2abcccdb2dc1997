//! `check pypi` and `warm pypi` count what pip and uv on a platform fetch:
//! of a compiled project's release (a wheel per platform and Python, an
//! abi3 and a pure wheel, the sdist) the one wheel pip takes there, and the
//! JSON page; the real pip and uv of the test tools install through
//! pkgproxy against a fake index on 127.0.0.1.

use std::path::Path;
use std::process::Command;

use pkgproxy_testkit::{project_with_a_dependency, python_tool, Daemon, Distribution, FakePypi};

use crate::common::PKGPROXY;
use crate::readiness::ctl;

/// The test tools' Python's version as a tag spells it (`312`).
fn python_nodot() -> String {
    let asked = Command::new(python_tool("python"))
        .args(["-c", "import sys; print('%d%d' % sys.version_info[:2])"])
        .output()
        .unwrap();
    String::from_utf8(asked.stdout).unwrap().trim().to_owned()
}

/// `native` 1.0's files, the one pip on this glibc machine takes first,
/// then the others: other platforms', another Python's, an abi3 and a
/// pure wheel (which it takes too, but ranks lower), the sdist.
fn native_release(nodot: &str) -> Vec<Distribution> {
    let arch = std::env::consts::ARCH;
    let (cp, older) = (format!("cp{nodot}"), format!("cp{}", nodot.parse::<u32>().unwrap() - 1));
    let tags = [
        format!("{cp}-{cp}-manylinux_2_17_{arch}.manylinux2014_{arch}"),
        format!("{cp}-{cp}-musllinux_1_1_{arch}"),
        format!("{cp}-{cp}-win_amd64"),
        format!("{cp}-{cp}-macosx_11_0_arm64"),
        format!("{older}-{older}-manylinux_2_17_{arch}.manylinux2014_{arch}"),
        format!("cp38-abi3-manylinux_2_17_{arch}.manylinux2014_{arch}"),
        "py3-none-any".to_owned(),
    ];
    let mut files: Vec<Distribution> =
        tags.iter().map(|tag| Distribution::wheel_tagged("native", "1.0", tag, &[], 4_000)).collect();
    files.push(Distribution::sdist("native", "1.0"));
    files
}

/// A fake index of `native` 1.0 and `leaf.pkg`, and a pinned
/// requirements file of `native==1.0` and `leaf.pkg==1.1` in `dir`.
async fn index_and_requirements(dir: &Path) -> (FakePypi, Vec<Distribution>, String) {
    let native = native_release(&python_nodot());
    let mut files = native.clone();
    files.extend(project_with_a_dependency());
    let fake = FakePypi::start(&files).await;
    let requirements = dir.join("requirements.txt");
    std::fs::write(&requirements, "native==1.0\nleaf.pkg==1.1\n").unwrap();
    (fake, native, requirements.to_str().unwrap().to_owned())
}

async fn pkgproxy_of(fake: &FakePypi) -> Daemon {
    let config = format!("[pypi]\nmirrors = [\"{}\"]\n[upstream]\ntrust = [\"{}\"]\n", fake.url(), fake.files_url());
    Daemon::start(PKGPROXY, Some(&config)).await
}

/// `TOOL ARGS` against pkgproxy's index, with no configuration of the
/// user's and a new cache; whether it succeeded and what it said.
fn python_tool_through(daemon: &Daemon, tool: &str, args: &[&str]) -> (bool, String) {
    let index = format!("http://{}/pypi/simple/", daemon.proxy_addr());
    let cache = tempfile::tempdir().unwrap();
    let mut command = Command::new(python_tool(tool));
    command.args(args).args(["--index-url", &index, "--cache-dir"]).arg(cache.path());
    if tool == "uv" {
        command.args(["--python", python_tool("python").to_str().unwrap()]);
    }
    let output = command.env("PIP_CONFIG_FILE", "/dev/null").env("UV_NO_CONFIG", "1").output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said)
}

/// The `pip`'s or `uv`'s arguments installing `requirements` into `target`.
fn install_args<'a>(tool: &str, requirements: &'a str, target: &'a str) -> Vec<&'a str> {
    let mut args = match tool {
        "uv" => vec!["pip", "install"],
        _ => vec!["install", "--no-input", "--disable-pip-version-check"],
    };
    args.extend(["-r", requirements, "--target", target]);
    args
}

#[tokio::test(flavor = "multi_thread")]
async fn after_pip_or_uv_installed_a_pinned_set_check_says_all_ready_and_a_warm_fetches_only_this_platform_s_wheel() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, native, requirements) = index_and_requirements(dir.path()).await;
    let python = python_tool("python");
    let counted = ["--python", python.to_str().unwrap()];
    let check = [&["check", "pypi", requirements.as_str()][..], &counted].concat();
    for tool in ["pip", "uv"] {
        let daemon = pkgproxy_of(&fake).await;
        let target = tempfile::tempdir().unwrap();
        let (installed, said) =
            python_tool_through(&daemon, tool, &install_args(tool, &requirements, target.path().to_str().unwrap()));
        assert!(installed, "{tool}: {said}");
        let (ready, printed) = ctl(&daemon, &check);
        assert!(ready, "right after {tool} installed the set: {printed}");
        assert!(printed.contains(&format!("ready    {}", native[0].filename)), "{printed}");
        assert!(printed.contains("note     left out: 7 files of the pinned versions"), "{printed}");
        assert!(!printed.contains("(html)"), "{printed}");
    }

    fake.clear_requests();
    let fresh = pkgproxy_of(&fake).await;
    let (warmed, printed) = ctl(&fresh, &[&["warm", "pypi", requirements.as_str()][..], &counted].concat());
    assert!(warmed, "{printed}");
    assert!(fake.count(&native[0].filename) >= 1, "{:#?}", fake.requests());
    for other in &native[1..] {
        assert_eq!(fake.count(&other.filename), 0, "only this platform's wheel is fetched: {:#?}", fake.requests());
    }
    // What it fetched is what pip here installs, offline.
    assert!(ctl(&fresh, &["offline", "offline"]).0);
    fake.clear_requests();
    let target = tempfile::tempdir().unwrap();
    let (installed, said) =
        python_tool_through(&fresh, "pip", &install_args("pip", &requirements, target.path().to_str().unwrap()));
    assert!(installed, "{said}");
    assert!(fake.requests().is_empty(), "{:#?}", fake.requests());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_warm_for_another_platform_fetches_the_wheel_pip_download_for_it_takes() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, native, requirements) = index_and_requirements(dir.path()).await;
    let nodot = python_nodot();
    let version = format!("{}.{}", &nodot[..1], &nodot[1..]);
    let daemon = pkgproxy_of(&fake).await;
    let windows = ["--platform", "win_amd64", "--python-version", &version, "--implementation", "cp"];
    let (ready, printed) = ctl(&daemon, &[&["check", "pypi", requirements.as_str()][..], &windows].concat());
    assert!(!ready, "{printed}");
    assert!(printed.contains(&format!("note     counted for cp{nodot} on win_amd64: ")), "{printed}");
    let (warmed, printed) = ctl(&daemon, &[&["warm", "pypi", requirements.as_str()][..], &windows].concat());
    assert!(warmed, "{printed}");
    let fetched: Vec<&str> =
        native.iter().map(|file| file.filename.as_str()).filter(|name| fake.count(name) > 0).collect();
    assert_eq!(fetched, [native[2].filename.as_str()], "the Windows wheel alone");

    // A Mac of a later release takes the macOS 11 wheel.
    let mac = ["--platform", "macosx_14_0_arm64", "--python-version", &version, "--implementation", "cp"];
    let (warmed, printed) = ctl(&daemon, &[&["warm", "pypi", requirements.as_str()][..], &mac].concat());
    assert!(warmed, "{printed}");
    assert!(fake.count(&native[3].filename) > 0, "{printed}");

    // pip download for Windows finds all it needs with the network gone.
    assert!(ctl(&daemon, &["offline", "offline"]).0);
    let into = tempfile::tempdir().unwrap();
    let download = [
        &["download", "--no-input", "--disable-pip-version-check", "--only-binary=:all:", "-r", &requirements][..],
        &windows,
        &["-d", into.path().to_str().unwrap()],
    ]
    .concat();
    let (downloaded, said) = python_tool_through(&daemon, "pip", &download);
    assert!(downloaded, "{said}");
    assert!(into.path().join(&native[2].filename).exists(), "{said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_uv_lock_listing_every_platform_s_wheels_is_warmed_with_this_platform_s_alone_and_synced_offline() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, native, _) = index_and_requirements(dir.path()).await;
    let daemon = pkgproxy_of(&fake).await;
    let project = dir.path().join("app");
    std::fs::create_dir(&project).unwrap();
    let pyproject = "[project]\nname = \"app\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\n\
                     dependencies = [\"native==1.0\"]\n";
    std::fs::write(project.join("pyproject.toml"), pyproject).unwrap();
    let uv = |args: &[&str]| {
        let all = [&["--directory", project.to_str().unwrap()][..], args].concat();
        python_tool_through(&daemon, "uv", &all)
    };
    let (locked, said) = uv(&["lock"]);
    assert!(locked, "{said}");
    let lock = project.join("uv.lock");
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(native.iter().all(|file| text.contains(&file.filename)), "the lock lists every file: {text}");
    let lock = lock.to_str().unwrap();

    let python = python_tool("python");
    let counted = ["--python", python.to_str().unwrap()];
    let fetched = |filename: &str| fake.requests().iter().filter(|asked| asked.path.ends_with(filename)).count();
    fake.clear_requests();
    let (warmed, printed) = ctl(&daemon, &[&["warm", "pypi", lock][..], &counted].concat());
    assert!(warmed, "{printed}");
    assert!(printed.contains("note     left out: 7 files"), "{printed}");
    assert_eq!(fetched(&native[0].filename), 1, "{:#?}", fake.requests());
    for other in &native[1..] {
        assert_eq!(fetched(&other.filename), 0, "{}: {:#?}", other.filename, fake.requests());
    }

    assert!(ctl(&daemon, &["offline", "offline"]).0);
    fake.clear_requests();
    let (synced, said) = uv(&["sync", "--frozen"]);
    assert!(synced, "{said}");
    assert!(fake.requests().is_empty(), "nothing asked while offline: {:#?}", fake.requests());
}

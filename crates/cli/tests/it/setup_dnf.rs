//! `pkgproxyctl setup dnf`, printed and run with `sh` and done with
//! `--apply`, on machines under a folder standing for `/` (Fedora 41 with
//! Docker's repository, Rocky Linux 9 with EPEL, CentOS Stream 9,
//! AlmaLinux 9), their `/etc/yum.repos.d` holding the files the
//! distributions ship: dnf itself (Debian's 4.14) then reads every
//! repository of a distribution at pkgproxy, with no metalink or mirror
//! list, and a third party's as it was (its Python API, reading the files
//! with dnf's own parser), and the real `dnf repoinfo` fetches the enabled
//! ones' metadata from a stand-in for pkgproxy on 127.0.0.1, at pkgproxy's
//! paths, and from nowhere else. Running either twice changes nothing;
//! `--undo`, and its script, give every file back byte for byte.

use std::path::Path;
use std::process::Command;

use pkgproxy_testkit::origin::Origin;

use crate::setup_block::{said, Machine};

/// A machine of a distribution, and what dnf reads there once it is set
/// up.
struct Distribution {
    /// The files in its `/etc/yum.repos.d`, as shipped.
    files: &'static [&'static str],
    /// Its `/etc/dnf/vars`.
    vars: &'static [(&'static str, &'static str)],
    /// `$releasever`.
    releasever: &'static str,
    /// Each repository then at pkgproxy: its id, its path below `/rpm/`
    /// as dnf expands it (x86_64), and whether it is enabled.
    through: &'static [(&'static str, &'static str, bool)],
    /// The repositories left to dnf, by id.
    left: &'static [&'static str],
}

const FEDORA: Distribution = Distribution {
    files: &["fedora.repo", "fedora-updates.repo", "docker-ce.repo"],
    vars: &[],
    releasever: "41",
    through: &[
        ("fedora", "fedora/releases/41/Everything/x86_64/os/", true),
        ("fedora-debuginfo", "fedora/releases/41/Everything/x86_64/debug/tree/", false),
        ("fedora-source", "fedora/releases/41/Everything/source/tree/", false),
        ("updates", "fedora/updates/41/Everything/x86_64/", true),
        ("updates-debuginfo", "fedora/updates/41/Everything/x86_64/debug/", false),
        ("updates-source", "fedora/updates/41/Everything/source/tree/", false),
    ],
    left: &[
        "docker-ce-stable",
        "docker-ce-stable-debuginfo",
        "docker-ce-stable-source",
        "docker-ce-test",
        "docker-ce-test-debuginfo",
        "docker-ce-test-source",
    ],
};

const ROCKY_WITH_EPEL: Distribution = Distribution {
    files: &["rocky.repo", "epel.repo"],
    vars: &[("contentdir", "pub/rocky"), ("rltype", "")],
    releasever: "9",
    through: &[
        ("appstream", "rocky/9/AppStream/x86_64/os/", true),
        ("appstream-debuginfo", "rocky/9/AppStream/x86_64/debug/tree/", false),
        ("appstream-source", "rocky/9/AppStream/source/tree/", false),
        ("baseos", "rocky/9/BaseOS/x86_64/os/", true),
        ("baseos-debuginfo", "rocky/9/BaseOS/x86_64/debug/tree/", false),
        ("baseos-source", "rocky/9/BaseOS/source/tree/", false),
        ("crb", "rocky/9/CRB/x86_64/os/", false),
        ("crb-debuginfo", "rocky/9/CRB/x86_64/debug/tree/", false),
        ("crb-source", "rocky/9/CRB/source/tree/", false),
        ("epel", "epel/9/Everything/x86_64/", true),
        ("epel-debuginfo", "epel/9/Everything/x86_64/debug/", false),
        ("epel-source", "epel/9/Everything/source/tree/", false),
    ],
    left: &[],
};

const CENTOS_STREAM: Distribution = Distribution {
    files: &["centos.repo"],
    vars: &[("stream", "9-stream")],
    releasever: "9",
    through: &[
        ("appstream", "centos-stream/9-stream/AppStream/x86_64/os/", true),
        ("baseos", "centos-stream/9-stream/BaseOS/x86_64/os/", true),
        ("crb", "centos-stream/9-stream/CRB/x86_64/os/", false),
    ],
    left: &[
        "appstream-debuginfo",
        "appstream-source",
        "baseos-debuginfo",
        "baseos-source",
        "crb-debuginfo",
        "crb-source",
    ],
};

const ALMALINUX: Distribution = Distribution {
    files: &["almalinux-baseos.repo"],
    vars: &[],
    releasever: "9",
    through: &[("baseos", "almalinux/9/BaseOS/x86_64/os/", true)],
    left: &["baseos-debuginfo", "baseos-source"],
};

/// A file as its distribution ships it (beside the setup's unit tests).
fn shipped(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sides/src/rpm/setup/shipped").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Where a shipped file is on a machine.
fn repo_path(name: &str) -> String {
    format!("/etc/yum.repos.d/{name}")
}

/// A machine of `distribution`, its clients set up for pkgproxy at `addr`.
fn machine(distribution: &Distribution, addr: &str) -> Machine {
    let machine = Machine::new().at(addr);
    for name in distribution.files {
        machine.write(&repo_path(name), &shipped(name));
    }
    for (name, value) in distribution.vars {
        machine.write(&format!("/etc/dnf/vars/{name}"), &format!("{value}\n"));
    }
    machine
}

/// The machine's repository files, by name, with their text.
fn files(machine: &Machine, distribution: &Distribution) -> Vec<(String, String)> {
    distribution.files.iter().map(|name| (name.to_string(), machine.read(&repo_path(name)))).collect()
}

/// What dnf's Python API reads of the machine's repositories (dnf's own
/// parser, its variables expanded, nothing fetched): a line per
/// repository, by id.
const DNF_READS: &str = r#"
import sys
import dnf
root, releasever = sys.argv[1], sys.argv[2]
base = dnf.Base()
conf = base.conf
conf.reposdir = [root + "/etc/yum.repos.d"]
conf.substitutions["releasever"] = releasever
conf.substitutions["basearch"] = "x86_64"
conf.substitutions.update_from_etc(root, varsdir=("/etc/dnf/vars/",))
base.read_all_repos()
for repo in sorted(base.repos.all(), key=lambda repo: repo.id):
    state = "enabled" if repo.enabled else "disabled"
    print(repo.id, state, "baseurl=" + ",".join(repo.baseurl), "metalink=" + (repo.metalink or ""),
          "mirrorlist=" + (repo.mirrorlist or ""))
"#;

/// What dnf reads of the repositories on `machine` ([`DNF_READS`]).
fn dnf_reads(machine: &Machine, releasever: &str) -> Vec<String> {
    let output = Command::new("/usr/bin/python3")
        .args(["-c", DNF_READS])
        .arg(machine.root.path())
        .arg(releasever)
        .output()
        .expect("python3 is installed, with dnf's Python API (Debian's python3-dnf)");
    assert!(output.status.success(), "dnf's Python API: {}", said(&output));
    String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect()
}

/// What dnf should read once `distribution` is set up for pkgproxy at
/// `base`: its repositories at pkgproxy, and those left to dnf as dnf read
/// them `before`.
fn expected(distribution: &Distribution, base: &str, before: &[String]) -> Vec<String> {
    let through = distribution.through.iter().map(|(id, path, enabled)| {
        let state = if *enabled { "enabled" } else { "disabled" };
        format!("{id} {state} baseurl={base}/rpm/{path} metalink= mirrorlist=")
    });
    let left = before.iter().filter(|line| distribution.left.iter().any(|id| line.starts_with(&format!("{id} "))));
    let mut expected: Vec<String> = through.chain(left.cloned()).collect();
    expected.sort();
    expected
}

/// A folder of empty repositories (made by createrepo_c) at the paths of
/// `distribution`'s enabled repositories below `/rpm/`: what the stand-in
/// for pkgproxy serves.
fn empty_repositories(distribution: &Distribution) -> tempfile::TempDir {
    let served = tempfile::tempdir().unwrap();
    let empty = served.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let made = Command::new("createrepo_c").arg("-q").arg(&empty).output().expect("createrepo_c is installed");
    assert!(made.status.success(), "createrepo_c: {}", said(&made));
    for (_, path, _) in distribution.through.iter().filter(|(_, _, enabled)| *enabled) {
        let repodata = served.path().join("rpm").join(path).join("repodata");
        std::fs::create_dir_all(&repodata).unwrap();
        for file in std::fs::read_dir(empty.join("repodata")).unwrap() {
            let file = file.unwrap();
            std::fs::copy(file.path(), repodata.join(file.file_name())).unwrap();
        }
    }
    served
}

/// The real `dnf repoinfo` on `machine` (its repository files and
/// variables, an install root and cache of its own), the repositories
/// left to dnf disabled (they are a third party's, on the network): what
/// it printed.
fn dnf_repoinfo(machine: &Machine, distribution: &Distribution) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let conf = scratch.path().join("dnf.conf");
    std::fs::write(&conf, "[main]\n").unwrap();
    let at = |path: &str| machine.file(path).display().to_string();
    let mut dnf = Command::new("dnf");
    dnf.arg("-c")
        .arg(&conf)
        .arg(format!("--installroot={}", scratch.path().join("root").display()))
        .arg(format!("--releasever={}", distribution.releasever))
        .arg(format!("--setopt=reposdir={}", at("/etc/yum.repos.d")))
        .arg(format!("--setopt=varsdir={}", at("/etc/dnf/vars")))
        .arg(format!("--setopt=cachedir={}", scratch.path().join("cache").display()))
        .arg("--forcearch=x86_64");
    for id in distribution.left {
        dnf.arg(format!("--disablerepo={id}"));
    }
    let output = dnf.arg("repoinfo").output().expect("dnf is installed (Debian's dnf)");
    let told = said(&output);
    assert!(output.status.success(), "dnf repoinfo: {told}");
    told
}

/// Sets `distribution` up both ways, twice each, checks what dnf reads
/// and fetches, and takes it back.
async fn set_up_and_back(distribution: Distribution) {
    let served = empty_repositories(&distribution);
    let origin = Origin::serve(served.path()).await;
    let addr = origin.addr().to_string();
    let base = format!("http://{addr}");
    let mut set_up_by = Vec::new();
    for how in ["the script", "--apply"] {
        let machine = machine(&distribution, &addr);
        let shipped = files(&machine, &distribution);
        let before = dnf_reads(&machine, distribution.releasever);
        let first = machine.done(how, "dnf", &[], false);
        assert!(first.status.success(), "{how}: {}", said(&first));
        let set_up = files(&machine, &distribution);
        let second = machine.done(how, "dnf", &[], false);
        assert!(second.status.success() && said(&second).contains("is as it should be"), "{how}: {}", said(&second));
        assert_eq!(files(&machine, &distribution), set_up, "{how}: a second run changes nothing");
        let read = dnf_reads(&machine, distribution.releasever);
        assert_eq!(read, expected(&distribution, &base, &before), "{how}: what dnf reads");
        for ((name, text), (_, was)) in set_up.iter().zip(&shipped) {
            let left = distribution.through.iter().all(|(id, _, _)| !was.contains(&format!("[{id}]")));
            if left {
                assert_eq!(text, was, "{how}: {name}, a third party's, is left byte for byte");
            }
        }
        if how == "--apply" {
            eprintln!("dnf's Python API on the machine set up:\n{}", read.join("\n"));
            origin.clear_requests();
            let printed = dnf_repoinfo(&machine, &distribution);
            eprintln!("dnf repoinfo on the machine set up:\n{printed}");
            let mut asked: Vec<String> = origin.requests().into_iter().map(|request| request.path).collect();
            asked.retain(|path| path.ends_with("/repomd.xml"));
            asked.sort();
            let mut enabled: Vec<String> = distribution
                .through
                .iter()
                .filter(|(_, _, enabled)| *enabled)
                .map(|(_, path, _)| format!("/rpm/{path}repodata/repomd.xml"))
                .collect();
            enabled.sort();
            assert_eq!(asked, enabled, "dnf fetched each enabled repository's metadata at pkgproxy's paths");
            for (id, path, enabled) in distribution.through {
                let line = format!("Repo-baseurl       : {base}/rpm/{path}");
                assert_eq!(printed.contains(&line), *enabled, "{id}: {printed}");
            }
        }
        for run in ["first", "second"] {
            let undone = machine.done(how, "dnf", &[], true);
            assert!(undone.status.success(), "{how}, {run} undo: {}", said(&undone));
            assert_eq!(files(&machine, &distribution), shipped, "{how}, {run} undo: every file byte for byte");
        }
        assert_eq!(dnf_reads(&machine, distribution.releasever), before, "{how}: dnf reads what it read before");
        set_up_by.push(set_up);
    }
    assert_eq!(set_up_by[0], set_up_by[1], "the script writes what --apply writes");
}

#[tokio::test(flavor = "multi_thread")]
async fn fedora_s_repositories_are_read_at_pkgproxy_and_docker_s_is_left_as_it_was() {
    set_up_and_back(FEDORA).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rocky_s_and_epel_s_repositories_are_read_at_pkgproxy() {
    set_up_and_back(ROCKY_WITH_EPEL).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn centos_stream_s_repositories_are_read_at_pkgproxy_by_their_metalinks() {
    set_up_and_back(CENTOS_STREAM).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn almalinux_s_repository_is_read_at_pkgproxy() {
    set_up_and_back(ALMALINUX).await;
}

/// A file dnf refuses beside one it reads.
#[test]
fn a_file_dnf_cannot_read_is_left_as_it_is_and_said() {
    let broken =
        "[epel]\nbaseurl=https://dl.fedoraproject.org/pub/epel/9/Everything/x86_64/\n\n  https://mirror.example/\n";
    for how in ["the script", "--apply"] {
        let machine = Machine::new();
        machine.write("/etc/yum.repos.d/fedora.repo", &shipped("fedora.repo"));
        machine.write("/etc/yum.repos.d/broken.repo", broken);
        let output = machine.done(how, "dnf", &[], false);
        let told = said(&output);
        assert!(!output.status.success(), "{how}: {told}");
        assert!(
            told.contains(
                "/etc/yum.repos.d/broken.repo cannot be read by dnf (line 4: Illegal continuation line): left as it is"
            ),
            "{how}: {told}"
        );
        assert_eq!(machine.read("/etc/yum.repos.d/broken.repo"), broken, "{how}");
        assert!(
            machine.read("/etc/yum.repos.d/fedora.repo").contains("baseurl=http://10.0.0.5:3142/rpm/fedora/"),
            "{how}: the others are set up"
        );
    }
}

/// A file edited between the printing of the script and its running.
#[test]
fn the_script_leaves_a_file_edited_since_it_was_printed() {
    let machine = Machine::new();
    machine.write("/etc/yum.repos.d/fedora.repo", &shipped("fedora.repo"));
    let script = machine.script("dnf");
    let edited = shipped("fedora.repo").replace("enabled=1", "enabled=0");
    machine.write("/etc/yum.repos.d/fedora.repo", &edited);
    let output = machine.sh(&script);
    assert!(!output.status.success(), "{}", said(&output));
    assert!(
        said(&output).contains("is not as it was when this script was printed: left as it is"),
        "{}",
        said(&output)
    );
    assert_eq!(machine.read("/etc/yum.repos.d/fedora.repo"), edited);
}

//! The setup on the repository files the distributions ship, as they
//! ship them (`shipped/`), and on files of other shapes dnf reads.

use super::marks;
use super::plan::{planned, Planned, Unread};
use crate::setup::{Ini, IniError, IniFault};

const BASE: &str = "http://10.0.0.5:3142";

/// The marker line opening pkgproxy's block.
const BEGIN: &str = "# >>> pkgproxy (Written by pkgproxyctl setup: downloads go through pkgproxy)\n";

/// Fedora 41's `fedora.repo`.
const FEDORA: &str = include_str!("shipped/fedora.repo");

/// Fedora 41's `fedora-updates.repo`.
const FEDORA_UPDATES: &str = include_str!("shipped/fedora-updates.repo");

/// EPEL 9's `epel.repo`.
const EPEL: &str = include_str!("shipped/epel.repo");

/// Rocky Linux 9's `rocky.repo`.
const ROCKY: &str = include_str!("shipped/rocky.repo");

/// AlmaLinux 9's `almalinux-baseos.repo`.
const ALMALINUX_BASEOS: &str = include_str!("shipped/almalinux-baseos.repo");

/// CentOS Stream 9's `centos.repo`.
const CENTOS: &str = include_str!("shipped/centos.repo");

/// Docker's `docker-ce.repo` for Fedora: a third party's.
const DOCKER_CE: &str = include_str!("shipped/docker-ce.repo");

/// The setup of `text`, with no `$contentdir` of the machine's.
fn plan(text: &str) -> Planned {
    planned(text.as_bytes(), BASE, None).unwrap_or_else(|why| panic!("{why}:\n{text}"))
}

/// A repository as dnf reads it: its id, `baseurl`, `metalink` and
/// `mirrorlist`.
type Read = (String, Option<String>, Option<String>, Option<String>);

/// What dnf reads in `text`: each repository.
fn read(text: &str) -> Vec<Read> {
    let ini = Ini::read(text).unwrap_or_else(|error| panic!("{error}:\n{text}"));
    let get = |section: &crate::setup::Section, key: &str| section.get(key).map(str::to_owned);
    let read = ini
        .sections()
        .into_iter()
        .map(|s| (s.name.clone(), get(&s, "baseurl"), get(&s, "metalink"), get(&s, "mirrorlist")));
    read.collect()
}

/// The repository `id` pointed at `baseurl`, no list left.
fn at(id: &str, baseurl: &str) -> Read {
    (id.to_owned(), Some(baseurl.to_owned()), None, None)
}

/// What dnf reads of every option but the locations in `text`.
fn others(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let ini = Ini::read(text).unwrap();
    let kept = |section: &crate::setup::Section| {
        let options =
            section.options.iter().filter(|(key, _, _)| !["baseurl", "metalink", "mirrorlist"].contains(&key.as_str()));
        options.map(|(key, value, _)| (key.clone(), value.clone())).collect()
    };
    ini.sections().iter().map(|section| (section.name.clone(), kept(section))).collect()
}

/// That `text` set up is set up again to the same, taken back to the
/// same bytes, and its other settings are read as they were.
fn settles(text: &str) -> Planned {
    let planned = plan(text);
    assert_eq!(planned.now, text);
    assert_eq!(planned.outside, text);
    let again = plan(&planned.wanted);
    assert_eq!(again.wanted, planned.wanted, "a second run changes nothing");
    assert_eq!(again.outside, text, "taken back byte for byte");
    assert_eq!(marks::outside(&planned.wanted).unwrap(), text);
    assert_eq!(others(&planned.wanted), others(text), "the other settings are read as they were");
    planned
}

#[test]
fn fedora_s_repositories_are_at_pkgproxy_by_their_commented_baseurl() {
    let planned = settles(FEDORA);
    assert_eq!(
        read(&planned.wanted),
        [
            at("fedora", "http://10.0.0.5:3142/rpm/fedora/releases/$releasever/Everything/$basearch/os/"),
            at(
                "fedora-debuginfo",
                "http://10.0.0.5:3142/rpm/fedora/releases/$releasever/Everything/$basearch/debug/tree/"
            ),
            at("fedora-source", "http://10.0.0.5:3142/rpm/fedora/releases/$releasever/Everything/source/tree/"),
        ]
    );
    let expected = FEDORA.replacen(
        "#baseurl=http://download.example/pub/fedora/linux/releases/$releasever/Everything/$basearch/os/\nmetalink=",
        &format!(
            "{BEGIN}baseurl=http://10.0.0.5:3142/rpm/fedora/releases/$releasever/Everything/$basearch/os/\n# <<< pkgproxy\n\
             #baseurl=http://download.example/pub/fedora/linux/releases/$releasever/Everything/$basearch/os/\n#pkgproxy-off: metalink="
        ),
        1,
    );
    assert!(planned.wanted.starts_with(&expected[..expected.find("enabled=1").unwrap()]), "{}", planned.wanted);
    assert!(planned.unserved.is_empty(), "{:?}", planned.unserved);
    let names: Vec<_> = planned.through.iter().map(|(id, name)| (id.as_str(), *name)).collect();
    assert_eq!(names, [("fedora", "fedora"), ("fedora-debuginfo", "fedora"), ("fedora-source", "fedora")]);
}

#[test]
fn fedora_s_updates_are_at_pkgproxy() {
    assert_eq!(
        read(&settles(FEDORA_UPDATES).wanted),
        [
            at("updates", "http://10.0.0.5:3142/rpm/fedora/updates/$releasever/Everything/$basearch/"),
            at("updates-debuginfo", "http://10.0.0.5:3142/rpm/fedora/updates/$releasever/Everything/$basearch/debug/"),
            at("updates-source", "http://10.0.0.5:3142/rpm/fedora/updates/$releasever/Everything/source/tree/"),
        ]
    );
}

#[test]
fn epel_s_repositories_are_at_pkgproxy() {
    assert_eq!(
        read(&settles(EPEL).wanted),
        [
            at("epel", "http://10.0.0.5:3142/rpm/epel/$releasever/Everything/$basearch/"),
            at("epel-debuginfo", "http://10.0.0.5:3142/rpm/epel/$releasever/Everything/$basearch/debug/"),
            at("epel-source", "http://10.0.0.5:3142/rpm/epel/$releasever/Everything/source/tree/"),
        ]
    );
}

#[test]
fn rocky_s_repositories_are_at_pkgproxy_its_contentdir_read_as_dnf_reads_it() {
    let expected: Vec<_> = ["BaseOS", "AppStream", "CRB"]
        .into_iter()
        .flat_map(|section| {
            let id = section.to_lowercase();
            let rocky = "http://10.0.0.5:3142/rpm/rocky/$releasever";
            [
                at(&id, &format!("{rocky}/{section}/$basearch/os/")),
                at(&format!("{id}-debuginfo"), &format!("{rocky}/{section}/$basearch/debug/tree/")),
                at(&format!("{id}-source"), &format!("{rocky}/{section}/source/tree/")),
            ]
        })
        .collect();
    assert_eq!(read(&settles(ROCKY).wanted), expected, "Rocky's folder by its host");
    let machine_s = planned(ROCKY.as_bytes(), BASE, Some("pub/rocky")).unwrap();
    assert_eq!(read(&machine_s.wanted), expected, "the machine's /etc/dnf/vars/contentdir");
    let elsewhere = planned(ROCKY.as_bytes(), BASE, Some("vault/rocky")).unwrap();
    assert_eq!(elsewhere.wanted, ROCKY, "a folder of the host no built-in repository is");
    // The mirror list goes; the block is before it, where the commented
    // baseurl follows.
    let wanted = &settles(ROCKY).wanted;
    assert!(
        wanted.contains(&format!(
            "name=Rocky Linux $releasever - BaseOS\n{BEGIN}baseurl=http://10.0.0.5:3142/rpm/rocky/$releasever/BaseOS/$basearch/os/\n# <<< pkgproxy\n#pkgproxy-off: mirrorlist=https://mirrors.rockylinux.org/mirrorlist?arch=$basearch&repo=BaseOS-$releasever$rltype\n#baseurl=http://dl.rockylinux.org/"
        )),
        "{wanted}"
    );
}

#[test]
fn almalinux_s_repository_is_at_pkgproxy_and_its_vault_ones_are_left() {
    let planned = settles(ALMALINUX_BASEOS);
    assert_eq!(
        read(&planned.wanted),
        [
            at("baseos", "http://10.0.0.5:3142/rpm/almalinux/$releasever/BaseOS/$basearch/os/"),
            (
                "baseos-debuginfo".to_owned(),
                None,
                None,
                Some("https://mirrors.almalinux.org/mirrorlist/$releasever/baseos-debug".to_owned())
            ),
            (
                "baseos-source".to_owned(),
                None,
                None,
                Some("https://mirrors.almalinux.org/mirrorlist/$releasever/baseos-source".to_owned())
            ),
        ]
    );
    let left: Vec<_> = planned.unserved.iter().map(|repository| (repository.id.as_str(), repository.enabled)).collect();
    assert_eq!(left, [("baseos-debuginfo", false), ("baseos-source", false)]);
}

#[test]
fn centos_stream_s_repositories_are_at_pkgproxy_by_their_metalinks() {
    let planned = settles(CENTOS);
    let metalink = |repo: &str, arch: &str| {
        let url =
            format!("https://mirrors.centos.org/metalink?repo=centos-{repo}-$stream&arch={arch}&protocol=https,http");
        Some(url)
    };
    let expected: Vec<_> = ["BaseOS", "AppStream", "CRB"]
        .into_iter()
        .flat_map(|section| {
            let id = section.to_lowercase();
            [
                at(&id, &format!("http://10.0.0.5:3142/rpm/centos-stream/$stream/{section}/$basearch/os/")),
                (format!("{id}-debuginfo"), None, metalink(&format!("{id}-debug"), "$basearch"), None),
                (format!("{id}-source"), None, metalink(&format!("{id}-source"), "source"), None),
            ]
        })
        .collect();
    assert_eq!(read(&planned.wanted), expected);
    assert_eq!(planned.unserved.len(), 6, "their debuginfo and sources: no metalink rule names them");
    assert!(planned.wanted.starts_with(&format!(
        "[baseos]\nname=CentOS Stream $releasever - BaseOS\n{BEGIN}baseurl=http://10.0.0.5:3142/rpm/centos-stream/$stream/BaseOS/$basearch/os/\n# <<< pkgproxy\n#pkgproxy-off: metalink=https://mirrors.centos.org/"
    )));
}

#[test]
fn a_third_party_s_repositories_are_left_byte_for_byte_and_named() {
    let planned = plan(DOCKER_CE);
    assert_eq!(planned.wanted, DOCKER_CE);
    assert!(planned.through.is_empty());
    let left: Vec<_> = planned.unserved.iter().map(|repository| (repository.id.as_str(), repository.enabled)).collect();
    assert_eq!(
        left,
        [
            ("docker-ce-stable", true),
            ("docker-ce-stable-debuginfo", false),
            ("docker-ce-stable-source", false),
            ("docker-ce-test", false),
            ("docker-ce-test-debuginfo", false),
            ("docker-ce-test-source", false),
        ]
    );
    let told = super::told::told(BASE, &[("/etc/yum.repos.d/docker-ce.repo", &planned.unserved)]);
    assert!(told.contains("  [[rpm.repository]]\n  name = \"docker-ce-stable\"\n  mirrors = [\"https://download.docker.com/linux/fedora\"]\n"), "{told}");
    assert!(
        told.contains(
            "  [docker-ce-stable] baseurl=http://10.0.0.5:3142/rpm/docker-ce-stable/$releasever/$basearch/stable\n"
        ),
        "{told}"
    );
}

#[test]
fn a_baseurl_of_a_built_in_is_replaced_and_one_of_a_mirror_of_the_admin_s_choosing_is_left() {
    let own = "[fedora]\nname=Fedora\nbaseurl = https://dl.fedoraproject.org/pub/fedora/linux/releases/$releasever/Everything/$basearch/os/ , https://other/\n\
               metalink=https://mirrors.fedoraproject.org/metalink?repo=fedora-$releasever&arch=$basearch\nenabled=1\n";
    let planned = settles(own);
    assert_eq!(
        read(&planned.wanted),
        [at("fedora", "http://10.0.0.5:3142/rpm/fedora/releases/$releasever/Everything/$basearch/os/")]
    );
    let corp = "[fedora]\nbaseurl=https://mirror.corp.example/fedora/releases/$releasever/Everything/$basearch/os/\n\
                #baseurl=http://download.example/pub/fedora/linux/releases/$releasever/Everything/$basearch/os/\n";
    let planned = plan(corp);
    assert_eq!((planned.wanted.as_str(), planned.unserved.len()), (corp, 1), "the admin's mirror is kept");
    let by_hand = "[fedora]\nbaseurl=http://10.0.0.5:3142/rpm/fedora/releases/41/Everything/x86_64/os/\n";
    let planned = plan(by_hand);
    assert_eq!((planned.wanted.as_str(), planned.unserved.len()), (by_hand, 0), "at pkgproxy already, by hand");
}

#[test]
fn continuation_lines_of_a_location_are_commented_out_with_it() {
    // A whitespace-only line goes on with a value; an empty one ends it.
    let own = "[epel]\nname=EPEL\nbaseurl=https://dl.fedoraproject.org/pub/epel/9/Everything/x86_64/\n  https://mirror.example/epel/9/Everything/x86_64/\n \n\
               \t,https://other.example/\nmirrorlist=https://mirrors.example/list\n  ?more\n\nenabled=1\n";
    let planned = settles(own);
    assert_eq!(read(&planned.wanted), [at("epel", "http://10.0.0.5:3142/rpm/epel/9/Everything/x86_64/")]);
    assert_eq!(
        planned.wanted,
        format!(
            "[epel]\nname=EPEL\n{BEGIN}baseurl=http://10.0.0.5:3142/rpm/epel/9/Everything/x86_64/\n# <<< pkgproxy\n\
             #pkgproxy-off: baseurl=https://dl.fedoraproject.org/pub/epel/9/Everything/x86_64/\n\
             #pkgproxy-off:   https://mirror.example/epel/9/Everything/x86_64/\n#pkgproxy-off:  \n\
             #pkgproxy-off: \t,https://other.example/\n#pkgproxy-off: mirrorlist=https://mirrors.example/list\n\
             #pkgproxy-off:   ?more\n\nenabled=1\n"
        )
    );
}

#[test]
fn comments_opening_with_a_semicolon_spaces_around_equals_and_crlf_lines_are_read_as_dnf_reads_them() {
    let own = "; the corp's copy of the distribution's file\r\n[fedora]\r\nname = Fedora\r\n;baseurl = http://download.example/pub/fedora/linux/releases/$releasever/Everything/$basearch/os/\r\n\
               metalink =\thttps://mirrors.fedoraproject.org/metalink?repo=fedora-$releasever&arch=$basearch\r\nenabled = 1\r\n";
    let planned = settles(own);
    assert_eq!(
        read(&planned.wanted),
        [at("fedora", "http://10.0.0.5:3142/rpm/fedora/releases/$releasever/Everything/$basearch/os/")]
    );
    assert!(planned.wanted.contains("\n#pkgproxy-off: metalink =\thttps://"), "{}", planned.wanted);
}

#[test]
fn a_last_line_without_its_line_break_is_kept_so() {
    let own = "[updates]\nname=Updates\nmetalink=https://mirrors.fedoraproject.org/metalink?repo=updates-released-f$releasever&arch=$basearch";
    let planned = settles(own);
    assert!(planned.wanted.ends_with("\n#pkgproxy-off: metalink=https://mirrors.fedoraproject.org/metalink?repo=updates-released-f$releasever&arch=$basearch"));
}

#[test]
fn a_section_given_twice_is_one_repository_as_dnf_merges_them() {
    let own = "[epel]\nmetalink=https://mirrors.fedoraproject.org/metalink?repo=epel-$releasever&arch=$basearch\n\n[other]\nname=x\nbaseurl=file:///srv/x/\n\n[epel]\nmirrorlist=https://m/\n";
    let planned = settles(own);
    assert_eq!(
        read(&planned.wanted),
        [
            at("epel", "http://10.0.0.5:3142/rpm/epel/$releasever/Everything/$basearch/"),
            ("other".to_owned(), Some("file:///srv/x/".to_owned()), None, None)
        ]
    );
    assert!(planned.wanted.ends_with("[epel]\n#pkgproxy-off: mirrorlist=https://m/\n"), "{}", planned.wanted);
}

#[test]
fn running_it_twice_changes_nothing_and_another_pkgproxy_replaces_the_first() {
    for text in [FEDORA, FEDORA_UPDATES, EPEL, ROCKY, ALMALINUX_BASEOS, CENTOS, DOCKER_CE] {
        let once = plan(text).wanted;
        let twice = plan(&once);
        assert_eq!((twice.now.as_str(), twice.wanted.as_str()), (once.as_str(), once.as_str()));
        let moved = planned(once.as_bytes(), "http://cache.lan:3142", None).unwrap();
        assert_eq!(moved.outside, text);
        assert_eq!(moved.wanted, once.replace("http://10.0.0.5:3142/", "http://cache.lan:3142/"));
    }
}

#[test]
fn a_file_dnf_cannot_read_is_left_as_it_is() {
    let illegal =
        "[epel]\nbaseurl=https://dl.fedoraproject.org/pub/epel/9/Everything/x86_64/\n\n  https://mirror.example/\n";
    assert_eq!(
        planned(illegal.as_bytes(), BASE, None),
        Err(Unread::Dnf(IniError { line: 4, fault: IniFault::IllegalContinuationLine }))
    );
    assert_eq!(planned(b"[fedora]\nname=F\xe9dora\n", BASE, None), Err(Unread::NotText));
    let edited = plan(FEDORA).wanted.replacen("# <<< pkgproxy\n", "", 1);
    assert!(matches!(planned(edited.as_bytes(), BASE, None), Err(Unread::Marks(_))));
}

#[test]
fn the_main_section_of_a_repository_file_is_no_repository() {
    let planned = plan("[main]\nbaseurl=https://example/\n");
    assert!(planned.unserved.is_empty() && planned.through.is_empty());
}

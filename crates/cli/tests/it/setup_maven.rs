//! `pkgproxyctl setup maven` and `setup gradle`, printed and run with `sh`
//! and done with `--apply`, on a machine under a folder standing for `/`
//! (its user's home `/home/dev`): pkgproxy's mirrors go into the user's own
//! `settings.xml`, inside its `<mirrors>`, and the real Maven takes them;
//! a `settings.xml` whose own mirror takes Central, or that Maven cannot
//! read, is left byte for byte, the user told what to add by hand; Gradle's
//! init script is pkgproxy's own file, and the real Gradle (Debian's 4.4)
//! reads every built-in repository's URL as pkgproxy's. Running either
//! twice changes nothing; `--undo` gives the user's file back byte for
//! byte.

use std::path::Path;
use std::process::Command;

use crate::setup_block::{said, walk, Machine, MARKER};

/// The user's own `settings.xml`: a mirror of a corp repository, a
/// profile reading Google's repository (a built-in), the corp one and
/// another at a URL no mirror takes.
const USERS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- The team's settings. -->
<settings>
  <localRepository>/home/dev/m2</localRepository>
  <mirrors>
    <mirror>
      <id>corp</id>
      <mirrorOf>corp-releases</mirrorOf>
      <url>https://nexus.corp.example/releases</url>
    </mirror>
  </mirrors>
  <profiles>
    <profile>
      <id>android</id>
      <repositories>
        <repository>
          <id>google</id>
          <url>https://dl.google.com/dl/android/maven2/</url>
        </repository>
        <repository>
          <id>corp-releases</id>
          <url>https://nexus.corp.example/releases</url>
        </repository>
        <repository>
          <id>snapshots</id>
          <url>https://snapshots.corp.example/maven</url>
        </repository>
      </repositories>
    </profile>
  </profiles>
  <activeProfiles>
    <activeProfile>android</activeProfile>
  </activeProfiles>
</settings>
"#;

/// pkgproxy's block in [`USERS`], just before its `</mirrors>`.
const USERS_BLOCK: &str = "<!-- >>> pkgproxy (Written by pkgproxyctl setup: downloads go through pkgproxy) -->
    <mirror>
      <id>pkgproxy-central</id>
      <name>central through pkgproxy</name>
      <mirrorOf>central</mirrorOf>
      <url>http://10.0.0.5:3142/maven/central/</url>
    </mirror>
    <mirror>
      <id>pkgproxy-google</id>
      <name>google through pkgproxy</name>
      <mirrorOf>google</mirrorOf>
      <url>http://10.0.0.5:3142/maven/google/</url>
    </mirror>
<!-- <<< pkgproxy -->
";

/// Debian's `/etc/maven/settings.xml`, shortened: a mirror in a comment
/// inside `<mirrors>`, then Maven's own blocking plain HTTP.
const DEBIANS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<settings xmlns="http://maven.apache.org/SETTINGS/1.2.0"
          xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
          xsi:schemaLocation="http://maven.apache.org/SETTINGS/1.2.0 https://maven.apache.org/xsd/settings-1.2.0.xsd">
  <mirrors>
    <!-- mirror
    <mirror>
      <id>mirrorId</id>
      <mirrorOf>repositoryId</mirrorOf>
      <url>http://my.repository.com/repo/path</url>
    </mirror>
     -->
    <mirror>
      <id>maven-default-http-blocker</id>
      <mirrorOf>external:http:*</mirrorOf>
      <name>Pseudo repository to mirror external repositories initially using HTTP.</name>
      <url>http://0.0.0.0/</url>
      <blocked>true</blocked>
    </mirror>
  </mirrors>
</settings>
"#;

const USERS_SETTINGS: &str = "/home/dev/.m2/settings.xml";

/// The mirrors the real Maven uses, as `mvn -X` says them ("Using mirror
/// M (URL) for R (URL)."), building a project of nothing offline with the
/// user's settings `user` and the machine's `global` (Maven's own when
/// `None`).
fn mirrors_maven_uses(user: &Path, global: Option<&Path>) -> Vec<String> {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("pom.xml"),
        "<project><modelVersion>4.0.0</modelVersion><groupId>org.example</groupId><artifactId>nothing</artifactId>\
         <version>1</version><packaging>pom</packaging></project>\n",
    )
    .unwrap();
    let mut mvn = Command::new("mvn");
    mvn.current_dir(project.path()).args(["-B", "-o", "-X", "validate", "-s"]).arg(user);
    if let Some(global) = global {
        mvn.arg("-gs").arg(global);
    }
    let output = mvn.arg(format!("-Dmaven.repo.local={}", project.path().join("repository").display())).output();
    let output = output.expect("mvn is installed (Debian's maven)");
    let told = said(&output);
    assert!(output.status.success(), "mvn: {told}");
    let used = told.lines().filter_map(|line| line.strip_prefix("[DEBUG] Using mirror "));
    let mut used: Vec<String> = used.map(str::to_owned).collect();
    used.sort();
    used
}

#[test]
fn maven_s_mirrors_go_into_the_user_s_own_mirrors_maven_takes_them_and_undo_restores_the_file_byte_for_byte() {
    let at = USERS.find("  </mirrors>").unwrap();
    let expected = format!("{}{USERS_BLOCK}{}", &USERS[..at], &USERS[at..]);
    for how in ["the script", "--apply"] {
        let machine = Machine::new();
        machine.write(USERS_SETTINGS, USERS);
        for run in ["first", "second"] {
            let output = machine.done(how, "maven", &[], false);
            assert!(output.status.success(), "{how}, {run} run: {}", said(&output));
            assert_eq!(machine.read(USERS_SETTINGS), expected, "{how}, {run} run");
            if run == "second" {
                assert!(said(&output).contains("is as it should be"), "{how}: {}", said(&output));
            }
        }
        assert_eq!(
            mirrors_maven_uses(&machine.file(USERS_SETTINGS), None),
            [
                "corp (https://nexus.corp.example/releases) for corp-releases (https://nexus.corp.example/releases).",
                "pkgproxy-central (http://10.0.0.5:3142/maven/central/) for central (https://repo.maven.apache.org/maven2).",
                "pkgproxy-google (http://10.0.0.5:3142/maven/google/) for google (https://dl.google.com/dl/android/maven2/).",
            ],
            "{how}"
        );
        let undone = machine.done(how, "maven", &[], true);
        assert!(undone.status.success(), "{how}: {}", said(&undone));
        assert_eq!(machine.read(USERS_SETTINGS), USERS, "{how}: taken out byte for byte");
    }
}

#[test]
fn maven_s_setup_tells_how_a_repository_at_another_url_goes_through_pkgproxy() {
    let machine = Machine::new();
    machine.write(USERS_SETTINGS, USERS);
    let script = machine.script("maven");
    let comments: Vec<&str> = script.lines().filter_map(|line| line.strip_prefix("# ")).collect();
    let applied = machine.apply("maven");
    let printed = String::from_utf8_lossy(&applied.stdout).into_owned();
    for line in [
        "Maven reads the repository snapshots (profile android) itself, at",
        "  name = \"snapshots\"",
        "  mirrors = [\"https://snapshots.corp.example/maven\"]",
        "  <mirror><id>pkgproxy-snapshots</id><mirrorOf>snapshots</mirrorOf><url>http://10.0.0.5:3142/maven/snapshots/</url></mirror>",
    ] {
        assert!(comments.contains(&line), "the script says {line:?}: {script}");
        assert!(printed.lines().any(|said| said == line), "--apply says {line:?}: {printed}");
    }
    assert!(!printed.contains("corp-releases"), "a repository the user's own mirror takes: {printed}");
}

#[test]
fn maven_s_settings_are_written_whole_where_there_are_none_and_taken_back_whole() {
    for how in ["the script", "--apply"] {
        let machine = Machine::new();
        for run in ["first", "second"] {
            let output = machine.done(how, "maven", &[], false);
            assert!(output.status.success(), "{how}, {run} run: {}", said(&output));
        }
        let written = machine.read(USERS_SETTINGS);
        assert!(written.starts_with("<!-- >>> pkgproxy") && written.ends_with("<!-- <<< pkgproxy -->\n"), "{written}");
        assert_eq!(walk(machine.root.path()), [USERS_SETTINGS], "{how}: that file only");
        assert_eq!(
            mirrors_maven_uses(&machine.file(USERS_SETTINGS), None),
            ["pkgproxy-central (http://10.0.0.5:3142/maven/central/) for central (https://repo.maven.apache.org/maven2)."],
            "{how}"
        );
        let undone = machine.done(how, "maven", &[], true);
        assert!(undone.status.success(), "{how}: {}", said(&undone));
        assert!(walk(machine.root.path()).is_empty(), "{how}: nothing of pkgproxy's is left");
    }
}

#[test]
fn maven_s_block_stays_out_of_settings_mirroring_central_themselves_or_maven_cannot_read() {
    let mirror_of = |of: &str| {
        format!("<settings>\n  <mirrors>\n    <mirror>\n      <id>nexus</id>\n      <mirrorOf>{of}</mirrorOf>\n      <url>https://nexus.corp.example/all</url>\n    </mirror>\n  </mirrors>\n</settings>\n")
    };
    let faults: Vec<String> = [
        (mirror_of("*"), "sets a mirror of central (nexus) itself"),
        (mirror_of("external:*,!corp"), "sets a mirror of central (nexus) itself"),
        (mirror_of("corp,central"), "sets a mirror of central (nexus) itself"),
        ("<settings>\n  <mirrors>\n</settings>\n".to_owned(), "cannot be read by maven (XML: line 3: "),
        ("<project>\n</project>\n".to_owned(), "its root is <project>, not <settings>"),
    ]
    .iter()
    .flat_map(|(own, why)| faults_leaving(own, why))
    .collect();
    assert!(faults.is_empty(), "{}", faults.join("\n---\n"));
}

/// What is wrong when the user's `settings.xml` holds `own`, which the
/// script and `--apply` should each leave byte for byte, failing, saying
/// `why` and what to add by hand.
fn faults_leaving(own: &str, why: &str) -> Vec<String> {
    let machine = Machine::new();
    let mut faults = Vec::new();
    for how in ["the script", "--apply"] {
        machine.write(USERS_SETTINGS, own);
        let output = match how {
            "the script" => machine.sh(&machine.script("maven")),
            _ => machine.apply("maven"),
        };
        let told = said(&output);
        if output.status.success() || machine.read(USERS_SETTINGS) != own {
            faults.push(format!("{own:?}: {how} wrote:\n{}", machine.read(USERS_SETTINGS)));
        } else if !told.contains("left as it is") || !told.contains(why) {
            faults.push(format!("{own:?}: {how} did not say it {why}: {told}"));
        } else if !told.contains("<url>http://10.0.0.5:3142/maven/central/</url>") || told.contains(MARKER) {
            faults.push(format!("{own:?}: {how} did not say what to add by hand: {told}"));
        }
    }
    faults
}

#[test]
fn maven_system_puts_the_mirrors_after_debian_s_own_and_maven_takes_them_as_the_machine_s() {
    for how in ["the script", "--apply"] {
        let machine = Machine::new();
        machine.write("/etc/maven/settings.xml", DEBIANS);
        let output = machine.done(how, "maven", &["--system"], false);
        assert!(output.status.success(), "{how}: {}", said(&output));
        let written = machine.read("/etc/maven/settings.xml");
        let at = DEBIANS.find("  </mirrors>").unwrap();
        assert!(written.starts_with(&DEBIANS[..at]) && written.ends_with(&DEBIANS[at..]), "{how}: {written}");
        assert_eq!(walk(machine.root.path()), ["/etc/maven/settings.xml"], "{how}: that file only");
        machine.write("/home/dev/empty.xml", "<settings/>\n");
        let global = machine.file("/etc/maven/settings.xml");
        assert_eq!(
            mirrors_maven_uses(&machine.file("/home/dev/empty.xml"), Some(&global)),
            ["pkgproxy-central (http://10.0.0.5:3142/maven/central/) for central (https://repo.maven.apache.org/maven2)."],
            "{how}"
        );
        let undone = machine.done(how, "maven", &["--system"], true);
        assert!(undone.status.success(), "{how}: {}", said(&undone));
        assert_eq!(machine.read("/etc/maven/settings.xml"), DEBIANS, "{how}: taken out byte for byte");
    }
}

/// The init script's place with `GRADLE_USER_HOME` unset.
const GRADLE_SCRIPT: &str = "/home/dev/.gradle/init.d/pkgproxy.gradle";

#[test]
fn gradle_s_init_script_is_pkgproxy_s_own_file_written_once_and_taken_back() {
    for how in ["the script", "--apply"] {
        let machine = Machine::new();
        let mut once = String::new();
        for run in ["first", "second"] {
            let output = machine.done(how, "gradle", &[], false);
            assert!(output.status.success(), "{how}, {run} run: {}", said(&output));
            let written = machine.read(GRADLE_SCRIPT);
            assert!(written.starts_with(&format!("// {MARKER}")), "{how}: {written}");
            if run == "first" {
                once = written;
            } else {
                assert_eq!(written, once, "{how}: a second run changes nothing");
            }
        }
        assert_eq!(walk(machine.root.path()), [GRADLE_SCRIPT], "{how}: that file only");
        let undone = machine.done(how, "gradle", &[], true);
        assert!(undone.status.success(), "{how}: {}", said(&undone));
        assert!(walk(machine.root.path()).is_empty(), "{how}: taken back");
    }
    // Where GRADLE_USER_HOME says, and never over a script of the user's.
    let machine = Machine::new().with("GRADLE_USER_HOME", "/srv/gradle");
    let output = machine.sh(&machine.script("gradle"));
    assert!(output.status.success(), "{}", said(&output));
    assert!(machine.read("/srv/gradle/init.d/pkgproxy.gradle").contains("/maven/central/"));
    let own = "allprojects { repositories { mavenCentral() } }\n";
    for how in ["the script", "--apply", "--undo"] {
        machine.write("/srv/gradle/init.d/pkgproxy.gradle", own);
        let output = match how {
            "the script" => machine.sh(&machine.script("gradle")),
            flag => machine.setup("gradle", &[flag]),
        };
        assert!(!output.status.success() && said(&output).contains("not pkgproxy's"), "{how}: {}", said(&output));
        assert_eq!(machine.read("/srv/gradle/init.d/pkgproxy.gradle"), own, "{how}: left as it is");
    }
    let system = machine.setup("gradle", &["--system"]);
    assert!(said(&system).contains("gradle is set up per user only"), "{}", said(&system));
}

#[test]
fn the_real_gradle_reads_every_built_in_repository_s_url_as_pkgproxy_s_and_leaves_the_others() {
    let machine = Machine::new();
    let output = machine.done("--apply", "gradle", &[], false);
    assert!(output.status.success(), "{}", said(&output));
    let user_home = machine.file("/home/dev/.gradle");
    // A script of the test's own, read after pkgproxy's, says what the
    // settings' plugin repositories are once evaluated.
    std::fs::write(
        user_home.join("init.d/zz-show.gradle"),
        "gradle.settingsEvaluated { s -> s.pluginManagement.repositories.each { println \"plugins ${it.url}\" } }\n",
    )
    .unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("settings.gradle"),
        "pluginManagement { repositories { gradlePluginPortal(); maven { url 'https://plugins.corp.example/m2' } } }\n\
         rootProject.name = 'shown'\n",
    )
    .unwrap();
    std::fs::write(
        project.path().join("build.gradle"),
        "buildscript { repositories { mavenCentral() } }\n\
         repositories {\n  mavenCentral()\n  google()\n  maven { url 'https://repo1.maven.org/maven2/' }\n  \
         maven { url 'https://plugins.gradle.org/m2' }\n  maven { url 'https://nexus.corp.example/maven2/' }\n}\n\
         task show { doLast {\n  buildscript.repositories.each { println \"buildscript ${it.url}\" }\n  \
         repositories.each { println \"project ${it.url}\" }\n} }\n",
    )
    .unwrap();
    let output = Command::new("gradle")
        .args(["--offline", "--no-daemon", "-q", "show"])
        .current_dir(project.path())
        .env("GRADLE_USER_HOME", &user_home)
        .output()
        .expect("gradle is installed (test.sh installs Debian's)");
    let told = said(&output);
    assert!(output.status.success(), "gradle: {told}");
    let shown: Vec<&str> = told
        .lines()
        .filter(|line| ["plugins ", "buildscript ", "project "].iter().any(|start| line.starts_with(start)))
        .collect();
    assert_eq!(
        shown,
        [
            "plugins http://10.0.0.5:3142/maven/gradle-plugins/",
            "plugins https://plugins.corp.example/m2",
            "buildscript http://10.0.0.5:3142/maven/central/",
            "project http://10.0.0.5:3142/maven/central/",
            "project http://10.0.0.5:3142/maven/google/",
            "project http://10.0.0.5:3142/maven/central/",
            "project http://10.0.0.5:3142/maven/gradle-plugins/",
            "project https://nexus.corp.example/maven2/",
        ],
        "{told}"
    );
}

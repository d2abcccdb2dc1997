use serde_json::{json, Value};

use super::{mirror_of, mirrors, repository_name, unserved, SETTINGS_XML};
use crate::setup::{Fit, Format};

const BASE: &str = "http://10.0.0.5:3142";

/// Central's mirror, as the block holds it.
const CENTRAL: &str = "    <mirror>\n      <id>pkgproxy-central</id>\n      <name>central through pkgproxy</name>\n      \
                       <mirrorOf>central</mirrorOf>\n      <url>http://10.0.0.5:3142/maven/central/</url>\n    </mirror>\n";

/// `own` as Maven reads it; `Null` when it cannot.
fn read(own: &str) -> Value {
    Format::SettingsXml.read(own).unwrap_or(Value::Null)
}

/// The block for `own`.
fn block(own: &str) -> String {
    mirrors(BASE, &read(own))
}

/// What `own` makes of its block.
fn fit(own: &str) -> Fit {
    SETTINGS_XML.fit("maven", own, &block(own))
}

/// `own` with its block in it, and the mirrors Maven then reads, by id
/// and `mirrorOf`.
fn written(own: &str) -> (String, Vec<(String, String)>) {
    let placed = SETTINGS_XML.placed(own, &block(own));
    let text = SETTINGS_XML.joined(own, &placed);
    let read = Format::SettingsXml.read(&text).unwrap_or_else(|why| panic!("{why}:\n{text}"));
    let mirrors = read["mirrors"].as_array().cloned().unwrap_or_default();
    let of =
        |mirror: &Value| (mirror["id"].as_str().unwrap().to_owned(), mirror["mirrorOf"].as_str().unwrap().to_owned());
    (text, mirrors.iter().map(of).collect())
}

fn pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(id, of)| (id.to_string(), of.to_string())).collect()
}

#[test]
fn with_no_settings_the_block_is_a_whole_settings_file_of_central_s_mirror() {
    assert_eq!(block(""), CENTRAL);
    assert_eq!(fit(""), Fit::Fits);
    let (text, read) = written("");
    assert!(text.starts_with("<!-- >>> pkgproxy (Written by pkgproxyctl setup: downloads go through pkgproxy) -->\n<settings xmlns=\"http://maven.apache.org/SETTINGS/1.0.0\""), "{text}");
    assert!(
        text.ends_with(&format!("  <mirrors>\n{CENTRAL}  </mirrors>\n</settings>\n<!-- <<< pkgproxy -->\n")),
        "{text}"
    );
    assert_eq!(read, pairs(&[("pkgproxy-central", "central")]));
}

#[test]
fn settings_without_mirrors_get_a_whole_mirrors_element_before_their_end_tag() {
    let own = "<?xml version=\"1.0\"?>\n<settings>\n  <localRepository>/srv/m2</localRepository>\n  <!-- <mirrors> are not set -->\n</settings>\n";
    assert_eq!(fit(own), Fit::Fits);
    let (text, read) = written(own);
    let at = own.find("</settings>").unwrap();
    assert_eq!(
        text,
        format!(
            "{}<!-- >>> pkgproxy (Written by pkgproxyctl setup: downloads go through pkgproxy) -->\n  <mirrors>\n{CENTRAL}  </mirrors>\n<!-- <<< pkgproxy -->\n{}",
            &own[..at],
            &own[at..]
        )
    );
    assert_eq!(read, pairs(&[("pkgproxy-central", "central")]));
    assert_eq!(read_of(&text)["localRepository"], "/srv/m2");
}

fn read_of(text: &str) -> Value {
    Format::SettingsXml.read(text).unwrap()
}

#[test]
fn settings_mirroring_other_repositories_get_central_s_mirror_after_theirs() {
    let own = "<settings>\n  <mirrors>\n    <mirror>\n      <id>corp</id>\n      <mirrorOf>corp-releases,!central</mirrorOf>\n      <url>https://nexus.corp.example/</url>\n    </mirror>\n    <!-- <mirror><mirrorOf>*</mirrorOf></mirror> -->\n  </mirrors>\n</settings>\n";
    assert_eq!(fit(own), Fit::Fits);
    let (text, read) = written(own);
    let at = own.find("  </mirrors>").unwrap();
    assert_eq!(&text[..at], &own[..at]);
    assert!(text[at..].starts_with("<!-- >>> pkgproxy"), "{text}");
    assert_eq!(read, pairs(&[("corp", "corp-releases,!central"), ("pkgproxy-central", "central")]));
}

#[test]
fn settings_with_a_mirror_taking_central_are_left_to_it() {
    for pattern in ["central", "*", "external:*", "corp-releases, central", "*,!corp-releases"] {
        let own = format!("<settings><mirrors><mirror><id>corp</id><mirrorOf>{pattern}</mirrorOf><url>https://nexus.corp.example/</url></mirror></mirrors></settings>\n");
        let what = "a mirror of central (corp)".to_owned();
        // Central's own mirror is replaced; a pattern's is kept beside
        // pkgproxy's, which Maven takes for Central first.
        let own_is = if pattern == "central" { Fit::SetsItself(what) } else { Fit::ListsItself(what) };
        assert_eq!(fit(&own), own_is, "{pattern}");
    }
    for pattern in ["*,!central", "external:http:*", "centrals", "!central"] {
        assert!(!mirror_of(pattern, "central"), "{pattern}");
    }
    let own = "<settings>\n<mirrors>\n<mirror><id>pkgproxy-central</id><mirrorOf>other</mirrorOf></mirror>\n</mirrors>\n</settings>\n";
    assert_eq!(fit(own), Fit::SetsItself("a mirror with the id pkgproxy-central".to_owned()));
    let own = "<settings><profiles><profile><id>corp</id><repositories><repository><id>central</id><url>https://nexus.corp.example/central</url></repository></repositories></profile></profiles></settings>";
    assert_eq!(
        fit(own),
        Fit::SetsItself("repository central at https://nexus.corp.example/central (profile corp)".to_owned())
    );
}

#[test]
fn a_mirror_in_a_comment_or_cdata_fools_no_one() {
    // A naive reader would see a mirror of `*` and the end of <mirrors>
    // in the comment, and an end of the root in the CDATA.
    let own = "<settings>\n  <mirrors>\n    <!--\n    <mirror><id>all</id><mirrorOf>*</mirrorOf></mirror>\n  </mirrors>\n    -->\n    <mirror>\n      <id>corp</id>\n      <mirrorOf><![CDATA[corp</mirrorOf></mirror></mirrors></settings>]]></mirrorOf>\n      <url>https://nexus.corp.example/</url>\n    </mirror>\n  </mirrors>\n</settings>\n";
    assert_eq!(fit(own), Fit::Fits);
    let (text, read) = written(own);
    assert_eq!(
        read,
        pairs(&[("corp", "corp</mirrorOf></mirror></mirrors></settings>"), ("pkgproxy-central", "central")])
    );
    let at = own.rfind("  </mirrors>").unwrap();
    assert!(text[at..].starts_with("<!-- >>> pkgproxy"), "after the real last mirror: {text}");
}

#[test]
fn a_profile_s_repositories_at_built_in_urls_are_mirrored_and_others_told() {
    let own = r#"<settings>
  <profiles>
    <profile>
      <id>android</id>
      <repositories>
        <repository><id>google</id><url>https://dl.google.com/dl/android/maven2/</url></repository>
        <repository><id>corp</id><url>https://nexus.corp.example/releases</url></repository>
        <repository><id>apache</id><url>https://repo.maven.apache.org/maven2</url></repository>
      </repositories>
      <pluginRepositories>
        <pluginRepository><id>plugins</id><url>https://plugins.gradle.org/m2</url></pluginRepository>
      </pluginRepositories>
    </profile>
  </profiles>
</settings>
"#;
    assert_eq!(fit(own), Fit::Fits);
    let (text, read) = written(own);
    assert_eq!(
        read,
        pairs(&[
            ("pkgproxy-central", "central"),
            ("pkgproxy-google", "google"),
            ("pkgproxy-apache", "apache"),
            ("pkgproxy-plugins", "plugins"),
        ])
    );
    for url in ["/maven/central/", "/maven/google/", "/maven/gradle-plugins/"] {
        assert!(text.contains(&format!("<url>http://10.0.0.5:3142{url}</url>")), "{url}: {text}");
    }
    let told = unserved(BASE, &read_of(own));
    for line in [
        "Maven reads the repository corp (profile android) itself, at",
        "https://nexus.corp.example/releases: pkgproxy serves the",
        "  [[maven.repository]]",
        "  name = \"corp\"",
        "  mirrors = [\"https://nexus.corp.example/releases\"]",
        "  <mirror><id>pkgproxy-corp</id><mirrorOf>corp</mirrorOf><url>http://10.0.0.5:3142/maven/corp/</url></mirror>",
    ] {
        assert!(told.lines().any(|said| said == line), "{line}\n{told}");
    }
    assert!(!told.contains("google"), "{told}");
    // Once a mirror of the user's own takes it, nothing is told.
    let mirrored = own.replace(
        "<settings>\n",
        "<settings>\n<mirrors><mirror><id>mine</id><mirrorOf>corp</mirrorOf><url>http://h/</url></mirror></mirrors>\n",
    );
    assert_eq!(unserved(BASE, &read_of(&mirrored)), "");
}

#[test]
fn an_id_declared_at_two_urls_is_not_mirrored() {
    let own = "<settings><profiles>\
               <profile><id>a</id><repositories><repository><id>google</id><url>https://dl.google.com/dl/android/maven2</url></repository></repositories></profile>\
               <profile><id>b</id><repositories><repository><id>google</id><url>https://mirror.corp.example/google</url></repository></repositories></profile>\
               </profiles></settings>";
    assert_eq!(block(own), CENTRAL);
    assert!(unserved(BASE, &read_of(own)).contains("the repository google (profile a)"));
    assert_eq!(repository_name("Corp.Releases"), "corp-releases");
    assert_eq!(repository_name("..."), "repository");
}

#[test]
fn settings_maven_cannot_read_or_of_another_root_get_no_block() {
    for (own, why) in [
        ("<settings>\n  <mirrors>\n</settings>\n", "XML: line 3: "),
        ("<settings><mirrors/><mirrors/></settings>", "XML: line 1: Duplicated tag: 'mirrors'"),
        ("<project>\n</project>\n", "XML: line 1: its root is <project>, not <settings>"),
        ("<settings>&nbsp;</settings>", "the entity &nbsp; is not defined"),
    ] {
        match fit(own) {
            Fit::Unreadable(said) => assert!(said.starts_with(why) || said.contains(why), "{own}: {said}"),
            other => panic!("{own}: {other:?}"),
        }
    }
    assert_eq!(block("<settings>\n  <mirrors>\n</settings>\n"), CENTRAL, "by hand, Central's mirror");
}

#[test]
fn a_mirrors_element_with_no_line_of_its_own_for_the_block_gets_none() {
    for own in ["<settings>\n  <mirrors/>\n</settings>\n", "<settings><mirrors></mirrors></settings>"] {
        let placed = SETTINGS_XML.placed(own, &block(own));
        assert_eq!(placed.within.as_deref(), Some("its <mirrors>"), "{own}");
        assert_eq!(placed.lines, CENTRAL, "what to add by hand: {own}");
        assert!(matches!(fit(own), Fit::WouldBreak(_)), "{own}: {:?}", fit(own));
    }
    let one_line = "<settings><localRepository>/srv/m2</localRepository></settings>";
    assert!(matches!(fit(one_line), Fit::WouldBreak(_)), "{:?}", fit(one_line));
    assert_eq!(read(one_line), json!({"localRepository": "/srv/m2"}));
}

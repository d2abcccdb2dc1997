use serde_json::json;

use super::{ends, read, Ends};

/// Debian's `/etc/maven/settings.xml`, shortened: a commented mirror
/// inside `<mirrors>`, then Maven's own blocking one.
const DEBIAN: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<settings xmlns="http://maven.apache.org/SETTINGS/1.2.0"
          xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
          xsi:schemaLocation="http://maven.apache.org/SETTINGS/1.2.0 https://maven.apache.org/xsd/settings-1.2.0.xsd">
  <pluginGroups>
  </pluginGroups>
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
      <url>http://0.0.0.0/</url>
      <blocked>true</blocked>
    </mirror>
  </mirrors>
  <profiles>
  </profiles>
</settings>
"#;

#[test]
fn a_mirror_in_a_comment_is_no_mirror_and_lists_read_as_their_items() {
    assert_eq!(
        read(DEBIAN).unwrap(),
        json!({
            "pluginGroups": [],
            "mirrors": [{
                "id": "maven-default-http-blocker",
                "mirrorOf": "external:http:*",
                "url": "http://0.0.0.0/",
                "blocked": "true",
            }],
            "profiles": [],
        })
    );
    let at = DEBIAN.find("  </mirrors>").unwrap();
    let root = DEBIAN.find("</settings>").unwrap();
    assert_eq!(ends(DEBIAN, "mirrors"), Some(Ends { list: Some(Some(at)), root: Some(root) }));
    assert_eq!(ends(DEBIAN, "servers"), Some(Ends { list: None, root: Some(root) }));
}

#[test]
fn values_are_trimmed_with_their_references_and_cdata_and_a_cdata_end_tag_is_text() {
    let text = "<settings>\n<mirrors>\n<mirror>\n<id> a&amp;b&#x21; </id>\n<mirrorOf><![CDATA[central</mirrors>]]></mirrorOf>\n<url>http://h/<!-- not --></url>\n</mirror>\n</mirrors>\n</settings>\n";
    assert_eq!(
        read(text).unwrap(),
        json!({"mirrors": [{"id": "a&b!", "mirrorOf": "central</mirrors>", "url": "http://h/"}]})
    );
    let at = text.find("</mirrors>\n</settings>").unwrap();
    assert_eq!(ends(text, "mirrors").unwrap().list, Some(Some(at)), "the real end tag's line");
}

#[test]
fn a_list_with_no_line_of_its_own_to_end_on_is_told() {
    for text in [
        "<settings>\n  <mirrors/>\n</settings>\n",
        "<settings>\n  <mirrors></mirrors>\n</settings>\n",
        "<settings>\n  <mirrors>\n    <mirror><id>a</id></mirror></mirrors>\n</settings>\n",
    ] {
        let ends = ends(text, "mirrors").unwrap();
        assert_eq!(ends, Ends { list: Some(None), root: text.find("</settings>") }, "{text}");
    }
    assert_eq!(ends("<settings><mirrors/></settings>", "mirrors"), Some(Ends { list: Some(None), root: None }));
    assert_eq!(read("<settings>\n  <mirrors/>\n</settings>\n").unwrap(), json!({"mirrors": []}));
}

#[test]
fn an_element_maven_reads_once_given_twice_is_refused_as_maven_does() {
    let twice = "<settings>\n  <mirrors/>\n  <mirrors/>\n</settings>\n";
    assert_eq!(read(twice).unwrap_err(), "line 3: Duplicated tag: 'mirrors'");
    let properties = "<settings><profiles><profile><id>p</id><properties><a>1</a><a>2</a></properties></profile></profiles></settings>";
    assert_eq!(read(properties).unwrap(), json!({"profiles": [{"id": "p", "properties": {"a": "2"}}]}));
}

#[test]
fn a_file_of_blanks_is_empty_and_what_maven_refuses_is_an_error_saying_why() {
    assert_eq!(read("").unwrap(), json!({}));
    assert_eq!(read(" \n\n").unwrap(), json!({}));
    assert_eq!(ends("", "mirrors"), None);
    assert_eq!(read("\u{feff}<settings/>").unwrap(), json!({}));
    for (text, said) in [
        ("<settings>\n  <mirrors>\n</settings>\n", "line 3:"),
        ("<settings>\n  <mirrors>\n", "not closed"),
        ("<project>\n</project>\n", "its root is <project>, not <settings>"),
        ("<s:settings xmlns:s=\"http://maven.apache.org/SETTINGS/1.0.0\"/>", "its root is <s:settings>"),
        ("<settings/>\n<settings/>\n", "line 2: a second root element"),
        ("<settings/>\nmirrors\n", "text outside the root element"),
        ("<settings><localRepository>&home;</localRepository></settings>", "&home; is not defined"),
        ("<settings><!-- a -- b --></settings>", "line 1:"),
        ("<settings a=\"1\" a=\"2\"/>", "line 1:"),
        ("\n<?xml version=\"1.0\"?><settings/>", "an XML declaration after the file's start"),
        ("<!-- only a comment -->\n", "it has no <settings> element"),
    ] {
        let error = read(text).unwrap_err();
        assert!(error.contains(said), "{text:?}: {error}");
        assert_eq!(ends(text, "mirrors"), None, "{text:?}");
    }
}

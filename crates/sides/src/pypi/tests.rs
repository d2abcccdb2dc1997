use super::*;

#[test]
fn names_normalise_as_pep_503_says() {
    for (name, normal) in [("Django", "django"), ("zope.interface", "zope-interface"), ("A__b-.C", "a-b-c")] {
        assert_eq!(normalize(name), normal, "{name}");
    }
}

#[test]
fn paths_are_pages_files_or_the_root() {
    assert_eq!(parse("/simple/Zope.Interface/").unwrap(), (String::new(), Asked::Page("zope-interface".into())));
    assert_eq!(parse("/simple/six").unwrap().1, Asked::Page("six".into()));
    assert_eq!(parse("/simple/").unwrap().1, Asked::Root);
    assert_eq!(parse("/corp/simple/x/").unwrap().0, "/corp");
    assert!(parse("/simple/a b/").is_err() && parse("/packages/x").is_err() && parse("/json").is_err());
}

fn side() -> (Pypi, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    (Pypi::new(Config::new(&Options::default()).unwrap(), cache), dir)
}

/// `page` as the side streams it to a client of `http://cache.lan:3142`,
/// fed `chunk` bytes at a time.
fn streamed(side: &Pypi, page: &str, chunk: usize) -> String {
    let served_at = crate::decision::ServedAt { base: "http://cache.lan:3142/pypi".into() };
    let mut rewriter = side.streaming_rewrite(&Rewrite::at(served_at)).expect("pages are rewritten as they stream");
    let mut output = Vec::new();
    for part in page.as_bytes().chunks(chunk) {
        rewriter.feed(part, &mut output);
    }
    rewriter.finish(&mut output);
    String::from_utf8(output).unwrap()
}

const B2: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const SHA: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

#[test]
fn a_json_page_streams_to_its_client_byte_for_byte_but_its_file_urls() {
    // An index's own layout: keys in its order, its spacing, fields
    // pkgproxy does not know, a URL after the name and one before it.
    let page = format!(
        "{{\n  \"meta\": {{\"api-version\": \"1.1\", \"_last-serial\": 7}},\n  \"name\": \"demo\",\n  \
         \"files\": [\n    {{\"filename\": \"demo-1.0-py3-none-any.whl\", \"url\": \"https://files.example/packages/01/23/{rest}/demo-1.0-py3-none-any.whl\", \
         \"hashes\": {{\"sha256\": \"{SHA}\"}}, \"upload-time\": \"2024-01-02T03:04:05.678901Z\", \"size\": 1.0e3, \"provenance\": null, \"x-\\u00e9\": \"\\\"url\\\"\"}},\n    \
         {{\"url\": \"../../x/demo-1.0.tar.gz#sha256={SHA}\", \"hashes\": {{\"sha256\": \"{SHA}\"}}, \"filename\": \"demo-1.0.tar.gz\", \"yanked\": \"bad\"}},\n    \
         {{\"url\": \"https://files.example/nohash/demo-0.9.tar.gz\", \"filename\": \"demo-0.9.tar.gz\", \"hashes\": {{}}}}\n  ],\n  \
         \"versions\": [\"0.9\", \"1.0\"], \"url\": \"https://files.example/not-a-file\"\n}}\n",
        rest = &B2[4..]
    );
    let expected = page
        .replace(
            &format!("https://files.example/packages/01/23/{}/demo-1.0-py3-none-any.whl", &B2[4..]),
            &format!("http://cache.lan:3142/pypi/packages/01/23/{}/demo-1.0-py3-none-any.whl", &B2[4..]),
        )
        .replace(
            &format!("../../x/demo-1.0.tar.gz#sha256={SHA}"),
            &format!("http://cache.lan:3142/pypi/packages/fe/dc/{}/demo-1.0.tar.gz", &SHA[4..]),
        );
    let (side, _dir) = side();
    for chunk in [1, 2, 3, 7, 64, page.len()] {
        assert_eq!(streamed(&side, &page, chunk), expected, "chunks of {chunk}");
    }
}

#[test]
fn an_html_page_streams_to_its_client_byte_for_byte_but_its_hrefs() {
    let page = format!(
        "<!DOCTYPE html>\n<html><body><h1>Links for demo</h1>\n\
         <a href=\"https://files.example/packages/01/23/{rest}/demo-1.0-py3-none-any.whl#sha256={SHA}\" data-requires-python=\"&gt;=3.8\">demo-1.0-py3-none-any.whl</a><br />\n\
         <A\tdata-x='a > b' HREF='../x/demo-1.0.tar.gz#sha256={SHA}'>demo-1.0.tar.gz</A>\n<abbr>a</abbr><a\n\
         href=\"https://files.example/demo-0.9.tar.gz\">demo-0.9.tar.gz</a>\n</body></html>\n<!--SERIAL 42-->\n",
        rest = &B2[4..]
    );
    let expected = page
        .replace(
            &format!("https://files.example/packages/01/23/{}/", &B2[4..]),
            &format!("http://cache.lan:3142/pypi/packages/01/23/{}/", &B2[4..]),
        )
        .replace(
            "../x/demo-1.0.tar.gz",
            &format!("http://cache.lan:3142/pypi/packages/fe/dc/{}/demo-1.0.tar.gz", &SHA[4..]),
        );
    let (side, _dir) = side();
    for chunk in [1, 2, 3, 7, 64, page.len()] {
        assert_eq!(streamed(&side, &page, chunk), expected, "chunks of {chunk}");
    }
}

#[test]
fn a_relative_link_is_made_absolute_against_its_page() {
    let page = "https://corp.example/simple/six/";
    assert_eq!(absolute("../../packages/a/six.whl", page), "https://corp.example/packages/a/six.whl");
    assert_eq!(absolute("/files/six.whl", page), "https://corp.example/files/six.whl");
    assert_eq!(absolute("six.whl", page), "https://corp.example/simple/six/six.whl");
    assert_eq!(absolute("https://files.example/x.whl", page), "https://files.example/x.whl");
}

#[test]
fn a_file_on_an_index_instance_s_host_goes_with_that_instance_s_credentials_and_elsewhere_with_none() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    let options: Options =
        toml::from_str("[[index]]\nname = \"corp\"\nmirrors = [\"http://u:TOKEN@127.0.0.1:9/simple\"]\n").unwrap();
    let pypi = Pypi::new(Config::new(&options).unwrap(), cache);
    let sha256 = "ab".repeat(32);
    let (a, b, rest) = (&sha256[..2], &sha256[2..4], &sha256[4..]);
    let wheel = "six-1.0-py3-none-any.whl";
    let key = format!("pypi/corp/packages/{a}/{b}/{rest}/{wheel}");
    let origin = Origin { pool: "pypi corp".into(), instances: vec![], path: String::new() };
    let request = CachedRequest::new(SideId::Pypi, key, origin, Class::Immutable);
    let located = |url: &str| {
        let page = format!(r#"{{"files":[{{"filename":"{wheel}","url":"{url}","hashes":{{"sha256":"{sha256}"}}}}]}}"#);
        pypi.located(&request, &[Bytes::from(page)]).unwrap()
    };
    let beside = located(&format!("http://127.0.0.1:9/packages/{a}/{b}/{rest}/{wheel}"));
    assert_eq!(beside.origin.instances, ["http://u:TOKEN@127.0.0.1:9"], "that instance's credentials");
    assert_eq!(beside.origin.path, format!("/packages/{a}/{b}/{rest}/{wheel}"));
    let elsewhere = located(&format!("http://127.0.0.1:10/packages/{a}/{b}/{rest}/{wheel}"));
    assert_eq!(elsewhere.origin.instances, ["http://127.0.0.1:10"], "another port: none");
}

#[test]
fn an_index_s_url_is_served_below_its_index_and_a_pypi_file_below_packages() {
    let options: Options =
        toml::from_str("[[index]]\nname = \"corp\"\nmirrors = [\"https://corp.example/simple\"]\n").unwrap();
    let config = Config::new(&options).unwrap();
    let at = |url: &str| config.upstream_path(url);
    let file = format!("/packages/ab/cd/{}/six-1.16.0-py3-none-any.whl", &B2[4..]);
    assert_eq!(at(&format!("https://files.pythonhosted.org{file}")), Some(format!("/pypi{file}")));
    assert_eq!(at("https://pypi.org/simple/requests/").as_deref(), Some("/pypi/simple/requests/"));
    assert_eq!(at("https://corp.example/simple/tool/").as_deref(), Some("/pypi/corp/simple/tool/"));
    assert_eq!(at("https://files.pythonhosted.org/other/x"), None);
    assert_eq!(at("https://pypi.org/project/requests/"), None);
}

#[test]
fn an_index_asking_to_wait_is_told_as_a_424_that_pip_and_uv_do_not_retry() {
    let (side, _dir) = side();
    let wait = side.failure_answer(&Failure::Overloaded { retry_after: Duration::from_millis(29_500) });
    assert_eq!(
        (wait.status, wait.reason),
        (StatusCode::FAILED_DEPENDENCY, Some("Not held (pkgproxy): the index asks to wait".into()))
    );
    assert_eq!(wait.headers[http::header::RETRY_AFTER], "30", "when to ask again, for scripts");
    assert_eq!(wait.body, "pkgproxy does not hold this, and the index asks to be left alone for 30 s more\n");
    let offline = side.failure_answer(&Failure::Offline);
    assert_eq!(
        (offline.status, offline.reason),
        (StatusCode::FAILED_DEPENDENCY, Some("Offline (pkgproxy): not held".into()))
    );
}

#[test]
fn files_are_releases_timed_by_their_project_s_json_page_and_pages_are_listings_unless_the_index_is_exempt() {
    use crate::role::{Gated, ReleaseName};
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), Arc::new(pkgproxy_cache::SystemClock)).unwrap();
    let corp =
        IndexOptions { name: "corp".into(), mirrors: vec!["https://corp.example/simple".into()], policy: Some(false) };
    let side = Pypi::new(Config::new(&Options { index: vec![corp], ..Options::default() }).unwrap(), cache);
    let config = side.config();
    let (pypi, corp) = (config.index("").unwrap(), config.index("/corp").unwrap());
    let gating = side.roles().gating.expect("the side is judged by the policy");
    let path = format!("{}/{}/{}/Zope.Interface-6.0-py3-none-any.whl", &B2[..2], &B2[2..4], &B2[4..]);
    for asked in [path.clone(), format!("{path}.metadata")] {
        let file = FilePath::parse(&asked).unwrap();
        let Some(Gated::Artifact { release, times_from }) = gating.gated(&side.file(pypi, &file)) else {
            panic!("a file and its core metadata are a release's: {asked}")
        };
        let filename = "Zope.Interface-6.0-py3-none-any.whl".to_owned();
        assert_eq!(release, ReleaseName { name: "zope-interface".into(), version: "6.0".into(), timed_as: filename });
        assert_eq!(times_from.key, "pypi/pypi/simple/zope-interface/json", "timed by the JSON page");
        assert!(gating.gated(&side.file(corp, &file)).is_none(), "policy = false");
    }
    for form in [Form::Json, Form::Html] {
        let page = pypi.page("zope-interface", form, DEFAULT_INDEX_TTL);
        assert!(matches!(gating.gated(&page), Some(Gated::Listing)), "{form:?}");
        assert!(gating.gated(&corp.page("zope-interface", form, DEFAULT_INDEX_TTL)).is_none());
    }
}

#[test]
fn a_release_is_named_by_its_sdist_and_judged_as_an_artifact_timed_by_the_json_page() {
    use crate::role::{Gated, Gating};
    let (pypi, _dir) = side();
    let request = pypi.release_request("Zope.Interface", "6.0").expect("a request");
    let Some(Gated::Artifact { release, times_from }) = pypi.gated(&request) else { panic!("{request:?}") };
    assert_eq!((release.name.as_str(), release.version.as_str()), ("zope-interface", "6.0"));
    assert_eq!(release.timed_as, "zope_interface-6.0.tar.gz");
    assert!(times_from.key.ends_with("simple/zope-interface/json"), "{}", times_from.key);
}

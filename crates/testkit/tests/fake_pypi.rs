//! The fake index is one the real installers take: pip and uv (from the
//! test tools' virtual environment, as `test.sh` installs them) resolve a
//! project with a dependency from it, read its core metadata, and install
//! the wheels they checked against its hashes.

use std::process::Command;

use pkgproxy_testkit::{project_with_a_dependency, python_tool, FakePypi};

#[tokio::test(flavor = "multi_thread")]
async fn pip_installs_a_project_and_its_dependency_from_the_fake_reading_their_metadata() {
    let fake = FakePypi::start(&project_with_a_dependency()).await;
    let target = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let output = Command::new(python_tool("pip"))
        .args(["install", "--no-input", "--disable-pip-version-check", "--index-url", &fake.url(), "--target"])
        .arg(target.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .arg("top-level")
        .env("PIP_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{said}");
    assert!(
        target.path().join("top_level/__init__.py").exists() && target.path().join("leaf_pkg/__init__.py").exists()
    );
    assert!(fake.count(".whl.metadata") >= 1, "pip read the core metadata: {:#?}", fake.requests());
    let asked = fake.requests().into_iter().find(|request| request.path.starts_with("/simple/top-level/")).unwrap();
    assert!(asked.header("accept").unwrap_or_default().contains("application/vnd.pypi.simple.v1+json"));
}

#[tokio::test(flavor = "multi_thread")]
async fn uv_installs_the_same_and_reads_the_html_form_too() {
    let fake = FakePypi::start(&project_with_a_dependency()).await;
    fake.set_html_only(true);
    let target = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let output = Command::new(python_tool("uv"))
        .args(["pip", "install", "--index-url", &fake.url(), "--target"])
        .arg(target.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["--python", python_tool("python").to_str().unwrap(), "top-level"])
        .env("UV_NO_CONFIG", "1")
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{said}");
    assert!(target.path().join("leaf_pkg/__init__.py").exists(), "{said}");
    assert!(fake.count("leaf_pkg-1.1-py3-none-any.whl") >= 1, "the newest leaf: {:#?}", fake.requests());
}

//! Gradle's client setup: an init script of pkgproxy's own,
//! `${GRADLE_USER_HOME:-~/.gradle}/init.d/pkgproxy.gradle`, which every
//! build reads (Gradle 4 and later, in Groovy, whatever the build's own
//! language). It points every Maven repository of a build at one of the
//! built-in repositories' URLs (`mavenCentral()`, `google()`,
//! `gradlePluginPortal()`, or the same URLs written out, with or without a
//! trailing slash) at pkgproxy's `/maven/NAME/`: the settings' plugin and
//! dependency repositories, and each project's buildscript and own, as
//! they are added, and allows plain HTTP for them (Gradle 6 and later
//! refuse it otherwise). Repositories at other URLs, and those a build
//! publishes to, are left as they are.

use std::path::PathBuf;

use anyhow::Context;

use super::built_in_urls;
use crate::setup::FilePlan;

/// Where the script is, as the shell finds it.
const PATH: &str = "${GRADLE_USER_HOME:-$HOME/.gradle}/init.d/pkgproxy.gradle";

/// The script for pkgproxy at `base` (`http://HOST:PORT`).
pub fn plan(base: &str) -> FilePlan {
    FilePlan::new(PATH, "//", &script(base)).found_by(init_script).noting(
        "# Gradle reads it when a build starts (a running daemon's too). Repositories at other URLs,\n\
         # and those a build publishes to, are left as they are.\n",
    )
}

/// The script, as [`PATH`] finds it: `$GRADLE_USER_HOME`, else
/// `~/.gradle`.
fn init_script() -> anyhow::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    let home = match var("GRADLE_USER_HOME") {
        Some(home) => home,
        None => var("HOME").context("neither GRADLE_USER_HOME nor HOME is set")?.join(".gradle"),
    };
    Ok(home.join("init.d/pkgproxy.gradle"))
}

/// The init script's Groovy, its marker line aside.
fn script(base: &str) -> String {
    let urls: String = built_in_urls().map(|(name, url)| format!("    '{url}': '{base}/maven/{name}/',\n")).collect();
    format!(
        r#"// Each Maven repository of a build at one of these URLs is read through
// pkgproxy instead: its URL replaced as it is added, plain HTTP allowed.
def pkgproxyUrls = [
{urls}]
def throughPkgproxy = {{ repositories ->
    repositories.all {{ repository ->
        if (repository instanceof MavenArtifactRepository) {{
            def through = pkgproxyUrls[String.valueOf(repository.url).replaceAll('/+$', '')]
            if (through != null) {{
                repository.url = through
                // Gradle 6 and later refuse plain HTTP unless allowed.
                if (repository.hasProperty('allowInsecureProtocol')) {{
                    repository.allowInsecureProtocol = true
                }}
            }}
        }}
    }}
}}
// The settings' repositories: the plugins' and, on Gradle 6.8 and later,
// the build's own (dependencyResolutionManagement).
def settingsThroughPkgproxy = {{ settings ->
    ['buildscript', 'pluginManagement', 'dependencyResolutionManagement'].each {{ part ->
        if (settings.hasProperty(part)) {{
            throughPkgproxy(settings."$part".repositories)
        }}
    }}
}}
try {{
    // Gradle 6 and later: before the settings script, whose own plugins
    // are resolved while it runs.
    gradle.beforeSettings(settingsThroughPkgproxy)
}} catch (MissingMethodException older) {{
    gradle.settingsEvaluated(settingsThroughPkgproxy)
}}
gradle.settingsEvaluated {{ settings ->
    // A build naming no plugin repository gets its plugins from the plugin
    // portal: named here, it is read through pkgproxy too.
    try {{
        def plugins = settings.pluginManagement.repositories
        if (plugins.isEmpty()) {{
            plugins.gradlePluginPortal()
        }}
    }} catch (MissingMethodException | MissingPropertyException older) {{
    }}
}}
gradle.allprojects {{ project ->
    throughPkgproxy(project.buildscript.repositories)
    throughPkgproxy(project.repositories)
}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::{plan, script};

    const BASE: &str = "http://10.0.0.5:3142";

    #[test]
    fn every_built_in_url_is_mapped_to_pkgproxy_s_repository() {
        let text = script(BASE);
        for line in [
            "    'https://repo.maven.apache.org/maven2': 'http://10.0.0.5:3142/maven/central/',",
            "    'https://repo1.maven.org/maven2': 'http://10.0.0.5:3142/maven/central/',",
            "    'https://dl.google.com/dl/android/maven2': 'http://10.0.0.5:3142/maven/google/',",
            "    'https://plugins.gradle.org/m2': 'http://10.0.0.5:3142/maven/gradle-plugins/',",
        ] {
            assert!(text.lines().any(|said| said == line), "{line}\n{text}");
        }
        // Gradle's own spellings (mavenCentral() and google() end in a
        // slash, gradlePluginPortal() does not) are looked up without it.
        assert!(text.contains("String.valueOf(repository.url).replaceAll('/+$', '')"), "{text}");
        assert!(text.contains("repository.allowInsecureProtocol = true"), "{text}");
    }

    #[test]
    fn the_script_is_marked_and_covers_settings_and_projects() {
        let plan = plan(BASE);
        let content = plan.content();
        assert!(content.starts_with("// Written by pkgproxyctl setup: downloads go through pkgproxy.\n"), "{content}");
        for covered in [
            "gradle.beforeSettings(settingsThroughPkgproxy)",
            "'buildscript', 'pluginManagement', 'dependencyResolutionManagement'",
            "throughPkgproxy(project.buildscript.repositories)",
            "throughPkgproxy(project.repositories)",
            "plugins.gradlePluginPortal()",
        ] {
            assert!(content.contains(covered), "{covered}: {content}");
        }
        // Braces balance, as Groovy wants them.
        assert_eq!(content.matches('{').count(), content.matches('}').count(), "{content}");
    }
}

//! The families `/metrics` writes, read from its text with every optional
//! part present (a cluster, a mirror, a pool, every side), and checked
//! against what is written about them elsewhere: the metric reference in
//! `docs/admin.md`, the alert rules in `dist/prometheus/` and the Grafana
//! dashboard in `dist/grafana/`. A family renamed or added without them
//! fails here, so none of them can go stale.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pkgproxy_control::{BlockedCount, ClusterInfo, InstanceInfo, PoolInfo, ShadowInfo};
use pkgproxy_metrics::Snapshot;
use promql_parser::parser::{self, Expr};
use serde::Deserialize;

use crate::config::{ConfigFile, Overrides, Settings};
use crate::state::State;

/// One metric family, as the text says it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Family {
    name: String,
    /// `counter`, `gauge` or `histogram`.
    kind: String,
    /// Its labels, `le` left out, in the order first written.
    labels: Vec<String>,
    help: String,
}

/// Every family `/metrics` writes, in its order.
async fn exported() -> Vec<Family> {
    let dir = tempfile::tempdir().unwrap();
    let file = ConfigFile::parse("").unwrap();
    let settings = Settings::new(dir.path().to_path_buf(), &file, &Overrides::default()).unwrap();
    let state = Arc::new(State::open(settings, "127.0.0.1:3142".parse().unwrap()).await.unwrap());
    let mut info = super::info::gather(&state);
    info.cluster = Some(ClusterInfo {
        node: "a".into(),
        endpoint: "http://127.0.0.1:9".into(),
        bucket: "b".into(),
        state: "connected".into(),
        shared_hits: 0,
        published: 0,
        corrupt: 0,
        errors: 0,
    });
    info.mirrors =
        vec![ShadowInfo { name: "m".into(), target: "http://t".into(), counters: Snapshot::default(), in_flight: 0 }];
    let instance = InstanceInfo {
        url: "http://u".into(),
        state: "healthy".into(),
        penalised_for_ms: None,
        failures: 0,
        in_flight: 0,
    };
    info.pools = vec![PoolInfo { name: "p".into(), instances: vec![instance] }];
    info.policy_blocked = vec![BlockedCount { side: "npm".into(), rule: "min_age".into(), count: 1 }];
    let learned: Vec<_> =
        state.sides.playing(|roles| roles.informing).flat_map(|(_, informing)| informing.learned()).collect();
    families(&super::metrics::render(&info, &learned))
}

/// The families of an exposition text, from its `HELP` and `TYPE` lines
/// and the label names of its samples.
fn families(text: &str) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            let family = Family { name: name.into(), kind: String::new(), labels: Vec::new(), help: help.into() };
            families.push(family);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            families.last_mut().unwrap().kind = rest.split_once(' ').unwrap().1.into();
        } else if let Some((_, labels)) = line.split_once('{') {
            let family = families.last_mut().unwrap();
            let names = labels.split(',').filter_map(|pair| pair.split_once('=')).map(|(name, _)| name);
            for name in names.filter(|&name| name != "le") {
                if !family.labels.iter().any(|known| known == name) {
                    family.labels.push(name.into());
                }
            }
        }
    }
    families
}

/// The metric reference as `docs/admin.md` has it.
fn reference_table(families: &[Family]) -> String {
    let mut table = String::from("| metric | type | labels | what it is |\n|---|---|---|---|\n");
    for family in families {
        let name = match family.kind.as_str() {
            "histogram" => format!("`{}` (`_bucket`, `_sum`, `_count`)", family.name),
            _ => format!("`{}`", family.name),
        };
        let labels: Vec<String> = family.labels.iter().map(|label| format!("`{label}`")).collect();
        let labels = if labels.is_empty() { "—".to_string() } else { labels.join(", ") };
        table.push_str(&format!("| {name} | {} | {labels} | {} |\n", family.kind, family.help));
    }
    table
}

/// Every series name a query may ask for: each family's, and a
/// histogram's `_bucket`, `_sum` and `_count`.
fn series(families: &[Family]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for family in families {
        names.insert(family.name.clone());
        if family.kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{}{suffix}", family.name));
            }
        }
    }
    names
}

/// The metric names a PromQL expression selects.
fn selected(expr: &str) -> Vec<String> {
    fn walk(expr: &Expr, names: &mut Vec<String>) {
        match expr {
            Expr::Aggregate(aggregate) => {
                walk(&aggregate.expr, names);
                if let Some(param) = &aggregate.param {
                    walk(param, names);
                }
            }
            Expr::Unary(unary) => walk(&unary.expr, names),
            Expr::Binary(binary) => {
                walk(&binary.lhs, names);
                walk(&binary.rhs, names);
            }
            Expr::Paren(paren) => walk(&paren.expr, names),
            Expr::Subquery(subquery) => walk(&subquery.expr, names),
            Expr::VectorSelector(selector) => names.extend(selector.name.clone()),
            Expr::MatrixSelector(matrix) => names.extend(matrix.vs.name.clone()),
            Expr::Call(call) => call.args.args.iter().for_each(|arg| walk(arg, names)),
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
        }
    }
    let parsed = parser::parse(expr).unwrap_or_else(|error| panic!("{expr}: {error}"));
    let mut names = Vec::new();
    walk(&parsed, &mut names);
    assert!(!names.is_empty(), "{expr} selects no metric");
    names
}

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

#[tokio::test]
async fn the_admin_guide_lists_every_family_metrics_writes_with_its_type_labels_and_help() {
    let families = exported().await;
    for expected in ["pkgproxy_request_duration_seconds", "pkgproxy_build_info", "pkgproxy_cluster_degraded"] {
        assert!(families.iter().any(|family| family.name == expected), "{expected}: {families:?}");
    }
    let guide = std::fs::read_to_string(repo_file("docs/admin.md")).unwrap();
    let table = reference_table(&families);
    assert!(guide.contains(&table), "docs/admin.md's metric reference should be:\n\n{table}");
}

/// Prometheus' rule file, as far as it is checked here.
#[derive(Deserialize)]
struct RuleFile {
    groups: Vec<RuleGroup>,
}

#[derive(Deserialize)]
struct RuleGroup {
    rules: Vec<Rule>,
}

#[derive(Deserialize)]
struct Rule {
    alert: String,
    expr: String,
}

#[tokio::test]
async fn the_alert_rules_ask_for_exported_metrics_only_and_promtool_accepts_them() {
    let known = series(&exported().await);
    let path = repo_file("dist/prometheus/pkgproxy-alerts.yml");
    let rules: RuleFile = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let rules: Vec<&Rule> = rules.groups.iter().flat_map(|group| &group.rules).collect();
    assert!(rules.len() >= 6, "a few rules");
    for rule in rules {
        for name in selected(&rule.expr) {
            assert!(known.contains(&name), "{}: pkgproxy exports no {name}", rule.alert);
        }
    }
    // promtool is Prometheus' own check; test.sh installs it.
    if let Ok(output) = std::process::Command::new("promtool").arg("check").arg("rules").arg(&path).output() {
        let said = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "promtool check rules: {said}");
    }
}

/// A dashboard query's text as PromQL: Grafana's interval variables
/// given a value (the other variables stand inside label matchers' strings).
fn as_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
}

#[tokio::test]
async fn the_dashboard_imports_anywhere_and_its_panels_query_exported_metrics_only() {
    let known = series(&exported().await);
    let text = std::fs::read_to_string(repo_file("dist/grafana/pkgproxy.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let input = &dashboard["__inputs"][0];
    assert_eq!((input["name"].as_str(), input["pluginId"].as_str()), (Some("DS_PROMETHEUS"), Some("prometheus")));
    assert!(dashboard["schemaVersion"].as_u64().is_some_and(|version| version >= 36), "the current JSON model");
    let panels: Vec<&serde_json::Value> =
        dashboard["panels"].as_array().unwrap().iter().filter(|panel| panel["type"] != "row").collect();
    assert!(panels.len() >= 10, "{}", panels.len());
    let mut asked = BTreeSet::new();
    for panel in panels {
        let title = panel["title"].as_str().unwrap();
        assert_eq!(panel["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
        let targets = panel["targets"].as_array().filter(|targets| !targets.is_empty());
        for target in targets.unwrap_or_else(|| panic!("{title} has no query")) {
            let expr = target["expr"].as_str().unwrap_or_else(|| panic!("{title}: a target without expr"));
            for name in selected(&as_promql(expr)) {
                assert!(known.contains(&name), "{title}: pkgproxy exports no {name}");
                asked.insert(name);
            }
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        let query = variable["query"]["query"].as_str().unwrap();
        let inner = query.strip_prefix("label_values(").and_then(|rest| rest.split_once(','));
        let name = inner.map(|(name, _)| name.trim()).unwrap_or_else(|| panic!("{query}"));
        assert!(known.contains(name), "{query}: pkgproxy exports no {name}");
    }
    let wanted = ["pkgproxy_request_duration_seconds_bucket", "pkgproxy_upstream_duration_seconds_bucket"];
    let wanted = wanted.into_iter().chain(["pkgproxy_hits_total", "pkgproxy_bytes_from_upstream_total"]);
    let wanted = wanted.chain(["pkgproxy_breakers_not_closed", "pkgproxy_cache_disk_bytes", "pkgproxy_offline_mode"]);
    for name in wanted {
        assert!(asked.contains(name), "the dashboard shows {name}");
    }
}

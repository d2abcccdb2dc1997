//! The layering rule, checked: inside every crate, the modules that share a
//! parent never depend on each other in a circle. A module may use its
//! parent's items and its children (they are one unit); siblings must form
//! layers, so a reader can understand one without the other. Dependencies
//! are read from the source (`crate::`, `super::` and `self::` paths, `use`
//! groups included); test modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate (`["proxy", "cached"]`).
type ModulePath = Vec<String>;

#[test]
fn no_crate_has_a_cycle_among_sibling_modules() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the crates folder");
    let mut cycles = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(crates).expect("read the crates folder") {
        let src = entry.expect("a crate").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let modules = modules(&src);
        checked += modules.len();
        let edges = dependencies(&modules);
        for cycle in sibling_cycles(&modules, &edges) {
            let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
            cycles.push(format!("{}: {}", src.display(), names.join(" -> ")));
        }
    }
    assert!(checked > 50, "read only {checked} modules");
    assert!(cycles.is_empty(), "modules that depend on each other in a circle:\n{}", cycles.join("\n"));
}

/// Every module of the crate under `src` and its source (tests left out).
fn modules(src: &Path) -> BTreeMap<ModulePath, String> {
    let mut modules = BTreeMap::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read a source folder") {
            let path = entry.expect("a source file").path();
            if path.is_dir() && path.file_name() != Some("bin".as_ref()) {
                folders.push(path);
            } else if path.extension() == Some("rs".as_ref()) {
                let text = std::fs::read_to_string(&path).expect("read a source file");
                modules.insert(module_path(src, &path), without_tests(&text).to_string());
            }
        }
    }
    modules
}

fn module_path(src: &Path, file: &Path) -> ModulePath {
    let relative: PathBuf = file.strip_prefix(src).expect("below src").with_extension("");
    let mut path: ModulePath = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
    if matches!(path.last().map(String::as_str), Some("lib" | "main" | "mod")) {
        path.pop();
    }
    path
}

/// The source before its `#[cfg(test)] mod tests`, which comes last.
fn without_tests(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// Which module uses which: the longest known module each path names.
fn dependencies(modules: &BTreeMap<ModulePath, String>) -> BTreeSet<(ModulePath, ModulePath)> {
    let mut edges = BTreeSet::new();
    for (module, text) in modules {
        for path in paths(text) {
            let mut target = resolve(module, &path);
            while !target.is_empty() && !modules.contains_key(&target) {
                target.pop();
            }
            if !target.is_empty() && &target != module {
                edges.insert((module.clone(), target));
            }
        }
    }
    edges
}

/// The paths in `text` that start at `crate`, `super` or `self`, as their
/// segments; a `use` group's items each make a path of their own.
fn paths(text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    for start in ["crate::", "super::", "self::"].iter().flat_map(|root| text.match_indices(root).map(|(at, _)| at)) {
        let before = start.checked_sub(1).map(|at| bytes[at]);
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        let (path, rest) = segments(&text[start..]);
        match rest.strip_prefix("::{") {
            Some(group) => {
                for item in group_items(group) {
                    let (tail, _) = segments(item.trim());
                    found.push(path.iter().cloned().chain(tail).collect());
                }
            }
            None => found.push(path),
        }
    }
    found
}

/// The `a::b::c` at the start of `text`, and what follows it.
fn segments(text: &str) -> (Vec<String>, &str) {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        segments.push(rest[..end].to_string());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(next) if next.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => rest = next,
            _ => break,
        }
    }
    (segments, rest)
}

/// The top-level items of a `use` group, up to its closing brace.
fn group_items(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0, 0, Vec::new());
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..at]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items
}

/// `path`, written in `module`, as a path from the crate's root.
fn resolve(module: &ModulePath, path: &[String]) -> ModulePath {
    let mut resolved = match path.first().map(String::as_str) {
        Some("crate") => return path[1..].to_vec(),
        _ => module.clone(),
    };
    let mut rest = path;
    while let Some((first, tail)) = rest.split_first() {
        match first.as_str() {
            "super" => {
                resolved.pop();
            }
            "self" => {}
            _ => break,
        }
        rest = tail;
    }
    resolved.extend(rest.iter().cloned());
    resolved
}

/// The cycles among the children of each module.
fn sibling_cycles(
    modules: &BTreeMap<ModulePath, String>,
    edges: &BTreeSet<(ModulePath, ModulePath)>,
) -> Vec<Vec<ModulePath>> {
    let parents: BTreeSet<ModulePath> =
        modules.keys().flat_map(|m| (0..m.len()).map(move |depth| m[..depth].to_vec())).collect();
    let mut cycles = Vec::new();
    for parent in parents {
        let depth = parent.len();
        let mut graph: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
        for (from, to) in edges {
            let below = |m: &ModulePath| m.len() > depth && m[..depth] == parent[..];
            if below(from) && below(to) && from[..=depth] != to[..=depth] {
                graph.entry(from[..=depth].to_vec()).or_default().insert(to[..=depth].to_vec());
            }
        }
        cycles.extend(find_cycles(&graph));
    }
    cycles
}

fn find_cycles(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<ModulePath>> {
    fn visit(
        node: &ModulePath,
        graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        done: &mut BTreeSet<ModulePath>,
        stack: &mut Vec<ModulePath>,
        cycles: &mut Vec<Vec<ModulePath>>,
    ) {
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(at) = stack.iter().position(|m| m == next) {
                cycles.push(stack[at..].iter().cloned().chain([next.clone()]).collect());
            } else if !done.contains(next) {
                visit(next, graph, done, stack, cycles);
            }
        }
        stack.pop();
        done.insert(node.clone());
    }
    let (mut done, mut cycles) = (BTreeSet::new(), Vec::new());
    for node in graph.keys() {
        if !done.contains(node) {
            visit(node, graph, &mut done, &mut Vec::new(), &mut cycles);
        }
    }
    cycles
}

#[test]
fn the_check_finds_a_cycle_when_there_is_one() {
    let module = |path: &str| path.split("::").map(str::to_string).collect::<ModulePath>();
    let modules: BTreeMap<ModulePath, String> = [
        (module("proxy"), "mod a; mod b;".to_string()),
        (module("proxy::a"), "use super::b::Thing;".to_string()),
        (module("proxy::b"), "use crate::proxy::{a::Other, self};".to_string()),
        (module("state"), "use crate::proxy::a;".to_string()),
    ]
    .into();
    let cycles = sibling_cycles(&modules, &dependencies(&modules));
    assert_eq!(cycles, [vec![module("proxy::a"), module("proxy::b"), module("proxy::a")]]);
}

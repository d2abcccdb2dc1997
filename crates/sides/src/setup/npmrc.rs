//! An npmrc read as npm reads it: the `ini` package npm bundles turns the
//! text into keys and sections, then npm's configuration loader expands
//! `${VAR}` in each key and keeps a key's last value. Whether a user's
//! `~/.npmrc` sets a key is asked of that reading, so every spelling npm
//! takes for a key is the key: any space around `=`, a quoted key, a `;`
//! or `#` comment after it, `key[]` for an array, a section `[a.b]` put
//! under `a`. Keys keep their case, as npm's do. It reads text only.

use serde_json::{Map, Value};

/// The npmrc `text` as npm's configuration holds it, `env` giving the
/// environment's variables for a `${VAR}` in a key; an error for the few
/// texts npm stops at (a section under a key whose value is `null`).
pub fn read(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Value, String> {
    let mut read = Map::new();
    for (key, value) in nested(decoded(text))? {
        let key = env_replaced(&key, env);
        // What names an object's prototype names no setting.
        if key != "__proto__" {
            read.insert(key, value);
        }
    }
    Ok(Value::Object(read))
}

/// The file's top level as `ini` builds it: its keys, and the order they
/// came in (npm's loader, and `ini`'s own second pass, go through them in
/// that order).
#[derive(Default)]
struct Decoded {
    order: Vec<String>,
    keys: Map<String, Value>,
}

impl Decoded {
    fn set(&mut self, key: String, value: Value) {
        if !self.keys.contains_key(&key) {
            self.order.push(key.clone());
        }
        self.keys.insert(key, value);
    }

    /// The value at `key`, made an empty section unless it is one, an
    /// array or `null` (what JavaScript's `typeof` calls an object).
    fn container(&mut self, key: &str) -> &mut Value {
        if !self.keys.get(key).is_some_and(is_object_like) {
            self.set(key.to_owned(), Value::Object(Map::new()));
        }
        self.keys.get_mut(key).expect("just set")
    }
}

/// Where `ini` puts a line's key.
enum Into {
    /// The file's top level, before any section.
    Top,
    /// The section of that name.
    Section(String),
    /// Nowhere: a `[__proto__]` section.
    Nowhere,
}

/// `ini`'s first pass: each line a key, a section or nothing.
fn decoded(text: &str) -> Decoded {
    let mut out = Decoded::default();
    let mut into = Into::Top;
    for line in text.split(['\r', '\n']) {
        if line.chars().all(js_space) || line.trim_start_matches(js_space).starts_with([';', '#']) {
            continue;
        }
        if let Some(section) = section_header(line) {
            let name = js_string(&unquoted(section));
            if name == "__proto__" {
                into = Into::Nowhere;
                continue;
            }
            // `out[section] = out[section] || {}`
            if !out.keys.get(&name).is_some_and(truthy) {
                out.set(name.clone(), Value::Object(Map::new()));
            }
            into = Into::Section(name);
            continue;
        }
        let Some((key, value)) = key_value(line) else { continue };
        let key = unquoted(key);
        let array = matches!(&key, Value::String(key) if key.len() > 2 && key.ends_with("[]"));
        let key = js_string(&key);
        let key = if array { key[..key.len() - 2].to_owned() } else { key };
        if key == "__proto__" {
            continue;
        }
        let value = match value.map(unquoted) {
            None => Value::Bool(true),
            Some(Value::String(text)) if matches!(text.as_str(), "true" | "false" | "null") => {
                serde_json::from_str(&text).expect("a JSON literal")
            }
            Some(value) => value,
        };
        match &into {
            Into::Top => {
                let slot = out.keys.get(&key).cloned();
                out.set(key, put(slot, value, array));
            }
            Into::Section(name) => {
                // A section whose name was a key's value holds nothing:
                // npm sets a property of a string.
                if let Some(Value::Object(section)) = out.keys.get_mut(name) {
                    let slot = section.remove(&key);
                    section.insert(key, put(slot, value, array));
                }
            }
            Into::Nowhere => {}
        }
    }
    out
}

/// The value a key holds once `value` is read for it, `slot` its value
/// until then: `key[]` makes an array, and an array once made keeps
/// every later value of the key.
fn put(slot: Option<Value>, value: Value, array: bool) -> Value {
    match (slot, array) {
        (None, true) => Value::Array(vec![value]),
        (Some(Value::Array(mut items)), _) => {
            items.push(value);
            Value::Array(items)
        }
        (Some(before), true) => Value::Array(vec![before, value]),
        (_, false) => value,
    }
}

/// `ini`'s second pass: a section named `a.b` goes under `a`, as `b`
/// (`\.` is a dot of the name).
fn nested(mut out: Decoded) -> Result<Vec<(String, Value)>, String> {
    let mut moved = Vec::new();
    for key in out.order.clone() {
        if !out.keys.get(&key).is_some_and(|value| value.is_object() || value.is_null()) {
            continue;
        }
        let mut path = split_sections(&key);
        let last = path.pop().unwrap_or_default();
        let name = last.replace("\\.", ".");
        path.retain(|part| part != "__proto__");
        if path.is_empty() && name == last {
            continue;
        }
        let value = out.keys.get(&key).cloned().unwrap_or(Value::Null);
        match path.split_first() {
            None => out.set(name, value),
            Some((first, rest)) => placed(out.container(first), rest, name, value)
                .map_err(|()| format!("npm stops at the section [{key}]: {first} is null"))?,
        }
        moved.push(key);
    }
    for key in moved {
        out.keys.remove(&key);
        out.order.retain(|kept| *kept != key);
    }
    let Decoded { order, mut keys } = out;
    Ok(order.into_iter().filter_map(|key| keys.remove(&key).map(|value| (key, value))).collect())
}

/// Puts `value` at `name` under `path` in `within`; an error where npm
/// would stop (a `null` on the way).
fn placed(within: &mut Value, path: &[String], name: String, value: Value) -> Result<(), ()> {
    let Value::Object(map) = within else {
        // Under an array: a property npm never reads. Under null: npm stops.
        return if within.is_null() { Err(()) } else { Ok(()) };
    };
    let Some((part, rest)) = path.split_first() else {
        map.insert(name, value);
        return Ok(());
    };
    let slot = map.entry(part.clone()).or_insert_with(|| Value::Object(Map::new()));
    if !is_object_like(slot) {
        *slot = Value::Object(Map::new());
    }
    placed(slot, rest, name, value)
}

/// `name` split at each dot not escaped by a backslash.
fn split_sections(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (at, _) in name.match_indices('.') {
        if at > 0 && name.as_bytes()[at - 1] == b'\\' {
            continue;
        }
        parts.push(name[start..at].to_owned());
        start = at + 1;
    }
    parts.push(name[start..].to_owned());
    parts
}

/// The name a line `[NAME]` gives (nothing but space may follow it).
fn section_header(line: &str) -> Option<&str> {
    let inner = line.strip_prefix('[')?;
    let (name, after) = inner.split_once(']')?;
    after.chars().all(js_space).then_some(name)
}

/// A line's key and, after its first `=`, its value; `None` for a line
/// `ini` skips (it opens with `=`, or its value holds a line separator of
/// JavaScript's own).
fn key_value(line: &str) -> Option<(&str, Option<&str>)> {
    match line.split_once('=') {
        None => Some((line, None)),
        Some(("", _)) => None,
        Some((_, value)) if value.contains(['\u{2028}', '\u{2029}']) => None,
        Some((key, value)) => Some((key, Some(value))),
    }
}

/// A key's or value's text as `ini` reads it: trimmed; quoted, it is read
/// as JSON (single quotes taken off first); else it ends at the first `;`
/// or `#` not escaped by a backslash.
fn unquoted(text: &str) -> Value {
    let text = text.trim_matches(js_space);
    let quoted = |quote: char| text.starts_with(quote) && text.ends_with(quote);
    if quoted('"') || quoted('\'') {
        let inner = if text.starts_with('\'') { text.get(1..text.len() - 1).unwrap_or("") } else { text };
        return serde_json::from_str(inner).unwrap_or_else(|_| Value::String(inner.to_owned()));
    }
    let mut kept = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ';' | '#' => break,
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | ';' | '#')) => kept.push(escaped),
                Some(other) => {
                    kept.push('\\');
                    kept.push(other);
                }
                None => kept.push('\\'),
            },
            c => kept.push(c),
        }
    }
    Value::String(kept.trim_matches(js_space).to_owned())
}

/// `key` with each `${NAME}` (`${NAME?}`: empty when unset) replaced by
/// the variable's value, as npm's loader does: an odd number of
/// backslashes before it keeps it, halved.
fn env_replaced(key: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let mut replaced = String::new();
    let mut rest = key;
    while let Some(at) = rest.find("${") {
        let escapes = rest[..at].len() - rest[..at].trim_end_matches('\\').len();
        let after = &rest[at + 2..];
        let name_end = after.find(['$', '{', '}', '?']).unwrap_or(after.len());
        let name = &after[..name_end];
        let optional = after[name_end..].starts_with('?');
        let close = name_end + usize::from(optional);
        if name.is_empty() || !after[close..].starts_with('}') {
            replaced.push_str(&rest[..at + 2]);
            rest = after;
            continue;
        }
        replaced.push_str(&rest[..at - escapes]);
        let whole = &rest[at..at + 2 + close + 1];
        if escapes % 2 == 1 {
            replaced.push_str(&"\\".repeat((escapes - 1) / 2));
            replaced.push_str(whole);
        } else {
            replaced.push_str(&"\\".repeat(escapes / 2));
            match env(name) {
                Some(value) => replaced.push_str(&value),
                None if optional => {}
                None => replaced.push_str(whole),
            }
        }
        rest = &after[close + 1..];
    }
    replaced.push_str(rest);
    replaced
}

/// What JavaScript's `typeof` calls an object: a section, an array or null.
fn is_object_like(value: &Value) -> bool {
    matches!(value, Value::Object(_) | Value::Array(_) | Value::Null)
}

/// Whether JavaScript takes `value` for true.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(value) => *value,
        Value::Number(number) => number.as_f64().is_some_and(|number| number != 0.0),
        Value::String(text) => !text.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `value` as the name of a property, as JavaScript makes it.
fn js_string(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "null".to_owned(),
        Value::Bool(value) => value.to_string(),
        Value::Number(number) => match number.as_f64() {
            Some(float) if float.fract() == 0.0 && float.abs() < 1e21 => format!("{float:.0}"),
            _ => number.to_string(),
        },
        Value::Array(items) => {
            let items: Vec<String> =
                items.iter().map(|item| if item.is_null() { String::new() } else { js_string(item) }).collect();
            items.join(",")
        }
        Value::Object(_) => "[object Object]".to_owned(),
    }
}

/// Whether JavaScript's `\s` and `trim` take `c` for a space.
fn js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

#[cfg(test)]
mod tests;

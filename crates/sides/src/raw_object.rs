//! A JSON object's members as written: each name with its value's raw
//! text, in order. What the policy filters out of a listing (an npm
//! document's versions) is left out member by member; every other member
//! is written back byte for byte, so fields pkgproxy does not own (publish
//! times above all) reach the client as the registry wrote them.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// An object's members, in order.
pub type Members<'a> = Vec<(Cow<'a, str>, &'a RawValue)>;

/// The members of the object `json` is; `None` when it is not one.
pub fn members(json: &str) -> Option<Members<'_>> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let members = deserializer.deserialize_map(InOrder).ok()?;
    deserializer.end().ok()?;
    Some(members)
}

/// The members of the object `raw` is; `None` when it is not one.
pub fn members_of(raw: &RawValue) -> Option<Members<'_>> {
    members(raw.get())
}

/// The object of `members`, as JSON text.
pub fn write<'m, I>(members: I) -> String
where
    I: IntoIterator<Item = (&'m str, &'m str)>,
{
    let mut out = String::from("{");
    for (index, (name, value)) in members.into_iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(name).unwrap_or_else(|_| "\"\"".to_owned()));
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    out
}

struct InOrder;

impl<'de> Visitor<'de> for InOrder {
    type Value = Members<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
        let mut members = Vec::new();
        while let Some(name) = map.next_key::<Cow<'de, str>>()? {
            let value: &'de RawValue = map.next_value()?;
            members.push((name, value));
        }
        Ok(members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_written_back_as_they_were() {
        let json = r#"{"b":{"x": [1, 2]},"a\"q":"t","c":null}"#;
        let members = members(json).unwrap();
        let names: Vec<&str> = members.iter().map(|(name, _)| name.as_ref()).collect();
        assert_eq!(names, ["b", "a\"q", "c"]);
        let written = write(members.iter().map(|(name, value)| (name.as_ref(), value.get())));
        assert_eq!(written, r#"{"b":{"x": [1, 2]},"a\"q":"t","c":null}"#);
        assert!(super::members("[1]").is_none());
    }
}

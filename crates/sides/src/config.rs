//! Each side's part of the configuration: the side reads its own section
//! of the file (`[apt]`, `[go]`, ...) into its own type, validates it, and
//! gets back what it validated on a reload. The server reads only its own
//! sections; neither knows the other's keys.

use std::fmt;
use std::marker::PhantomData;

use pkgproxy_cache::Cache;
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use crate::id::SideId;
use crate::Side;

/// The configuration file as the sides read it: its text, and the values
/// given on the command line that win over it.
#[derive(Debug, Clone, Default)]
pub struct SidesFile {
    text: String,
    overrides: Vec<(SideId, String, toml::Value)>,
}

impl SidesFile {
    /// The file whose text is `text`.
    pub fn new(text: &str) -> SidesFile {
        SidesFile { text: text.to_owned(), overrides: Vec::new() }
    }

    /// `key` of `side`'s section is the string `value` (a duration, a
    /// name), whatever the file says: a command-line flag.
    pub fn set(&mut self, side: SideId, key: &str, value: &str) {
        self.overrides.retain(|(id, known, _)| !(*id == side && known == key));
        self.overrides.push((side, key.to_owned(), toml::Value::String(value.to_owned())));
    }

    /// The file's text, as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// `side`'s section, as its type `T` reads it (its defaults when the
    /// file has none). Errors name the key, and the line when the file's
    /// own text is at fault.
    pub fn section<T: DeserializeOwned + Default>(&self, side: SideId) -> Result<T, SectionError> {
        let set: Vec<_> = self.overrides.iter().filter(|(id, _, _)| *id == side).collect();
        if set.is_empty() {
            let seed = SectionSeed::<T> { name: side.as_str(), section: PhantomData };
            let read = seed.deserialize(toml::Deserializer::new(&self.text));
            return read.map(Option::unwrap_or_default).map_err(|error| SectionError::read_in_file(side, &error));
        }
        let mut file: toml::Table = toml::from_str(&self.text).map_err(|error| SectionError::read(side, &error))?;
        let section = file.entry(side.as_str()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(section) = section {
            for (_, key, value) in set {
                section.insert(key.clone(), value.clone());
            }
        }
        let section = file.remove(side.as_str()).unwrap_or(toml::Value::Table(toml::Table::new()));
        section.try_into().map_err(|error| SectionError::read(side, &error))
    }
}

/// Reads one top-level table of a TOML document, leaving the rest: the
/// side's section is read from the file's own text, so that an error
/// points at its line.
struct SectionSeed<T> {
    name: &'static str,
    section: PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for SectionSeed<T> {
    type Value = Option<T>;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Option<T>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for SectionSeed<T> {
    type Value = Option<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        write!(formatter, "a configuration file with a [{}] section", self.name)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            match key == self.name {
                true => found = Some(map.next_value::<T>()?),
                false => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

/// A side's section that cannot be used, in the side's words (which name
/// the key at fault).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SectionError {
    /// The side.
    pub side: SideId,
    /// What is wrong, for people.
    pub message: String,
    /// Where in the file's text a key the side does not read starts, when
    /// that is what is wrong: the server tells where such a key belongs,
    /// knowing every section.
    pub unknown_key: Option<usize>,
}

impl SectionError {
    /// `side`'s section could not be read as `error` says.
    fn read(side: SideId, error: &dyn std::error::Error) -> SectionError {
        SectionError { side, message: error.to_string().trim_end().to_owned(), unknown_key: None }
    }

    /// `side`'s section, in the file's own text, could not be read as
    /// `error` says: its span is a place in that text.
    fn read_in_file(side: SideId, error: &toml::de::Error) -> SectionError {
        SectionError { unknown_key: unknown_key(error), ..SectionError::read(side, error) }
    }

    /// `side`'s section was read, but cannot be used: `error` says why.
    pub fn invalid(side: SideId, error: impl std::error::Error) -> SectionError {
        SectionError { side, message: error.to_string(), unknown_key: None }
    }
}

/// Where the key starts, in the text read, when `error` is that a table
/// has a key its type does not read.
pub fn unknown_key(error: &toml::de::Error) -> Option<usize> {
    // serde words a field a type does not have "unknown field `NAME`, ...".
    let unknown = error.message().starts_with("unknown field");
    error.span().filter(|_| unknown).map(|span| span.start)
}

/// What a side keeps of the state beside the cache could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the {side} side's store: {message}")]
pub struct OpenError {
    /// The side.
    pub side: SideId,
    /// Why, for people.
    pub message: String,
}

/// Checks `name`, the next of a side's `[[SIDE.repository]]` names
/// (`named` holds those before it): 1 to 64 lower-case letters, digits,
/// `-` and `_` (it is a path's segment, a cache key's and a pool's name),
/// and not given twice.
pub fn repository_name(side: SideId, name: &str, named: &mut Vec<String>) -> Result<(), ConfigError> {
    let fit = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !fit {
        let rule = "a repository's name is 1 to 64 lower-case letters, digits, - and _";
        return Err(ConfigError::new(side, "repository.name", format!("{name:?}: {rule}")));
    }
    if named.iter().any(|known| known == name) {
        return Err(ConfigError::new(side, "repository.name", format!("{name:?} is named twice")));
    }
    named.push(name.to_owned());
    Ok(())
}

/// A key of a side's section whose value cannot be used: the one error
/// the sides' validations give, worded `SIDE.KEY: REASON` so that the
/// message points into the file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{side}.{key}: {reason}")]
pub struct ConfigError {
    /// The side whose section it is.
    pub side: SideId,
    /// The key at fault, within the section: `proxies`, `registry.NAME.index`,
    /// or `upstream "ghcr.io"` for one of a list of tables.
    pub key: String,
    /// What is wrong with its value, for people.
    pub reason: String,
}

impl ConfigError {
    /// `key` of `side`'s section is wrong, as `reason` says.
    pub fn new(side: SideId, key: impl fmt::Display, reason: impl Into<String>) -> ConfigError {
        ConfigError { side, key: key.to_string(), reason: reason.into() }
    }
}

/// A side's configuration, validated, as its folder writes it: what is
/// particular to the side. [`SideConfig`] follows from it, and
/// [`configure`] reads it from the file.
pub trait Configures: Clone + fmt::Debug + Send + Sync + 'static {
    /// The side it configures.
    type Side: Side;

    /// The side's section, as written (its defaults when the file has none).
    type Options: DeserializeOwned + Default;

    /// Why a section as written cannot be used.
    type Invalid: std::error::Error;

    /// Which side that is.
    const ID: SideId;

    /// Validates the section as written.
    fn validate(options: &Self::Options) -> Result<Self, Self::Invalid>;

    /// Opens the side with it, with what the side learnt, kept in and
    /// beside `cache`. Blocking.
    fn open_side(&self, cache: &Cache) -> Result<Self::Side, String>;

    /// The configuration `side` runs with: a reload swaps it there, and
    /// what the side learnt is kept.
    fn held_by(side: &Self::Side) -> &Reloadable<Self>;

    /// The configured upstreams' URLs: their hosts may be on local
    /// addresses, each on its own port only.
    fn trusted(&self) -> Vec<String> {
        Vec::new()
    }

    /// Fetches from the side's endpoint on the parent pkgproxy at `parent`
    /// (`http://host:port`): the parent spreads over the upstream's own
    /// instances and caches for every child.
    fn chain(&mut self, _parent: &str) {}
}

/// Reads and validates side `C`'s section of `file`: how the list of
/// sides configures each.
pub fn configure<C: Configures>(file: &SidesFile) -> Result<Box<dyn SideConfig>, SectionError> {
    let options: C::Options = file.section(C::ID)?;
    let config = C::validate(&options).map_err(|error| SectionError::invalid(C::ID, error))?;
    Ok(Box::new(config))
}

/// A side's configuration, validated, as the list of sides holds it: what
/// the side is opened with, and swapped in on a reload.
pub trait SideConfig: std::any::Any + Send + Sync + fmt::Debug {
    /// Which side it configures.
    fn id(&self) -> SideId;

    /// Opens the side with it. Blocking.
    fn open(&self, cache: &Cache) -> Result<Box<dyn Side>, OpenError>;

    /// Makes it `side`'s configuration for the requests from now on.
    fn reconfigure(&self, side: &dyn Side);

    /// The configured upstreams' URLs, trusted on local addresses.
    fn trusted_urls(&self) -> Vec<String>;

    /// Fetches from the side's endpoint on the parent pkgproxy at `parent`.
    fn chain_to(&mut self, parent: &str);

    /// A copy of it.
    fn clone_box(&self) -> Box<dyn SideConfig>;
}

impl<C: Configures> SideConfig for C {
    fn id(&self) -> SideId {
        C::ID
    }

    fn open(&self, cache: &Cache) -> Result<Box<dyn Side>, OpenError> {
        let side = self.open_side(cache).map_err(|message| OpenError { side: C::ID, message })?;
        Ok(Box::new(side))
    }

    fn reconfigure(&self, side: &dyn Side) {
        if let Some(side) = (side as &dyn std::any::Any).downcast_ref::<C::Side>() {
            C::held_by(side).swap(self.clone());
        }
    }

    fn trusted_urls(&self) -> Vec<String> {
        self.trusted()
    }

    fn chain_to(&mut self, parent: &str) {
        self.chain(parent);
    }

    fn clone_box(&self) -> Box<dyn SideConfig> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn SideConfig> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// A side's configuration at run time: swapped whole on a reload, while
/// requests under way keep the one they read.
#[derive(Debug)]
pub struct Reloadable<C>(arc_swap::ArcSwap<C>);

impl<C> Reloadable<C> {
    /// Holding `config`.
    pub fn new(config: C) -> Reloadable<C> {
        Reloadable(arc_swap::ArcSwap::from_pointee(config))
    }

    /// The configuration now.
    pub fn get(&self) -> arc_swap::Guard<std::sync::Arc<C>> {
        self.0.load()
    }

    /// `config` from now on.
    pub fn swap(&self, config: C) {
        self.0.store(std::sync::Arc::new(config));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Section {
        #[serde(default, with = "humantime_serde")]
        ttl: Option<Duration>,
        #[serde(default)]
        mirrors: Vec<String>,
    }

    #[test]
    fn a_side_reads_its_own_section_and_leaves_the_rest() {
        let file = SidesFile::new("[upstream]\nretries = 3\n[go]\nttl = \"5m\"\nmirrors = [\"http://a\"]\n");
        let go: Section = file.section(SideId::Go).unwrap();
        assert_eq!(go, Section { ttl: Some(Duration::from_secs(300)), mirrors: vec!["http://a".into()] });
        assert_eq!(file.section::<Section>(SideId::Apt).unwrap(), Section::default(), "no section: its defaults");
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line() {
        let file = SidesFile::new("[upstream]\nretries = 3\n\n[go]\nttll = \"5m\"\n");
        let error = file.section::<Section>(SideId::Go).unwrap_err();
        assert!(error.message.contains("ttll") && error.message.contains("line 5"), "{error}");
        assert_eq!(error.unknown_key, Some(29), "where `ttll` starts");
    }

    #[test]
    fn a_value_set_on_the_command_line_wins_over_the_file() {
        let mut file = SidesFile::new("[go]\nttl = \"5m\"\nmirrors = [\"http://a\"]\n");
        file.set(SideId::Go, "ttl", "1h");
        let go: Section = file.section(SideId::Go).unwrap();
        assert_eq!((go.ttl, go.mirrors.len()), (Some(Duration::from_secs(3600)), 1));
        let mut bare = SidesFile::new("");
        bare.set(SideId::Go, "ttl", "bad");
        assert!(bare.section::<Section>(SideId::Go).unwrap_err().message.contains("ttl"));
    }
}

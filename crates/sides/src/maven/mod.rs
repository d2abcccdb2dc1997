//! The Maven side (being built): Maven, Gradle and every JVM build through
//! pkgproxy. What is here so far reads a Maven 2 repository's paths
//! ([`layout`]); the side's routes, checks and roles come on it.

pub mod layout;

//! The Maven side (being built): Maven, Gradle and every JVM build through
//! pkgproxy. What is here so far reads a Maven 2 repository: what a path
//! names ([`layout`]), what a `maven-metadata.xml` says ([`metadata`]),
//! how a file is checked against its strongest sidecar ([`checks`]), and
//! what a build will ask for ([`wanted`]); the side's routes and roles
//! come on them.

pub mod checks;
pub mod layout;
pub mod metadata;
pub mod wanted;

//! The Maven side (being built): Maven, Gradle and every JVM build through
//! pkgproxy. What is here so far reads a Maven 2 repository: what a path
//! names ([`layout`]) and what a `maven-metadata.xml` says ([`metadata`]);
//! the side's routes, checks and roles come on them.

pub mod layout;
pub mod metadata;

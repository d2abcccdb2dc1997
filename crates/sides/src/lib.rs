//! The sides: one module per client ecosystem (apt and go now; snap,
//! registry and lxd later). A side turns a request into a [`Decision`]: refuse it, or
//! cache it under a key with a freshness class and what the body must
//! match. Sides open no sockets; the server carries out their decisions.
//! What a side learns from what passes through (the apt index of `Release`
//! and `Packages` sums) it keeps itself, beside the cache.

pub mod apt;
mod decision;
pub mod go;
pub mod path;

pub use decision::{CachedRequest, DatedResume, Decision, Origin, Refusal, Side, Target};

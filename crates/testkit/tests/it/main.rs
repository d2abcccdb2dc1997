//! The test kit's own tests: each fake and driver on its own, so that a
//! failure in a proxy test is the proxy's. One test binary.

mod apt;
mod chaos;
mod origin;
mod reply;

//! What the cache's page at `/cache/` keeps between requests:
//! whether it is on, what was served lately and by whom ([`top`]), and
//! the one walk of the index at a time. It knows nothing of the requests
//! that feed it, nor of the page.

pub mod top;

use std::sync::atomic::AtomicBool;

/// What the page needs kept between requests.
#[derive(Debug)]
pub struct Browsing {
    /// Whether the page is on (`[status] browse`, changed on a reload).
    pub on: AtomicBool,
    /// What was served lately, by whom.
    pub top: top::Top,
    /// One walk of the index at a time, however many load the page.
    pub walking: tokio::sync::Mutex<()>,
}

impl Browsing {
    /// The page on or off.
    pub fn new(on: bool) -> Browsing {
        Browsing { on: AtomicBool::new(on), top: top::Top::default(), walking: tokio::sync::Mutex::new(()) }
    }
}

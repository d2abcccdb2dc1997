//! The media pkgproxy relays for snap clients (the store's icons,
//! screenshots and banners): exactly the URLs a store answer named, learnt
//! as answers are rewritten, and those whose answers are cached. Any other
//! URL, on the same host or not, is refused: the relay is never a way to
//! reach what no store answer showed.

use parking_lot::Mutex;
use std::collections::{HashSet, VecDeque};

/// The most media URLs remembered; past it the first learnt is forgotten
/// (what it served stays cached, and is served from there).
pub const MOST: usize = 100_000;

/// The media URLs answers named, by their path below the media prefix
/// (`https/dashboard.snapcraft.io/site_media/icon.png`), oldest first.
#[derive(Debug, Default)]
pub struct NamedMedia {
    named: Mutex<(VecDeque<String>, HashSet<String>)>,
}

impl NamedMedia {
    /// Remembers `media`, named by an answer just now.
    pub fn learn(&self, media: Vec<String>) {
        let mut named = self.named.lock();
        let (order, set) = &mut *named;
        for path in media {
            if set.insert(path.clone()) {
                order.push_back(path);
            }
            while order.len() > MOST {
                if let Some(oldest) = order.pop_front() {
                    set.remove(&oldest);
                }
            }
        }
    }

    /// Whether an answer named `path`.
    pub fn named(&self, path: &str) -> bool {
        self.named.lock().1.contains(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_named_is_known_and_the_oldest_goes_first_past_the_most() {
        let media = NamedMedia::default();
        media.learn(vec!["https/h/a.png".into(), "https/h/a.png".into()]);
        assert!(media.named("https/h/a.png"));
        assert!(!media.named("https/h/b.png") && !media.named("https/h/"));
        media.learn((0..MOST).map(|n| format!("https/h/{n}.png")).collect());
        assert!(!media.named("https/h/a.png"), "forgotten first");
        assert!(media.named(&format!("https/h/{}.png", MOST - 1)));
        assert_eq!(media.named.lock().0.len(), MOST);
    }
}

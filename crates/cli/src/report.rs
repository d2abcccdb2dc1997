//! How an error is told on the command line: each cause in the chain once.
//! An error that says its cause in its own words is not followed by that
//! cause again (`No such file or directory (os error 2)` twice).

/// `error` and its causes, each said once, joined by `: `.
pub fn said(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.ends_with(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says its cause in its message, as many do.
    #[derive(Debug)]
    struct Saying(std::io::Error);

    impl std::fmt::Display for Saying {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot reach pkgproxy: {}", self.0)
        }
    }

    impl std::error::Error for Saying {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_said_is_not_said_again() {
        let os = std::io::Error::from_raw_os_error(2);
        let told = os.to_string();
        let error = anyhow::Error::new(Saying(os)).context("-stats-socket-path");
        assert_eq!(said(&error), format!("-stats-socket-path: cannot reach pkgproxy: {told}"));
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(said(&plain), "outer: inner");
    }
}

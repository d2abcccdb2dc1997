use serde_json::{json, Value};

use super::{joined, unread, Fit, Reading};
use crate::setup::{first_held, Format};

/// A block setting `registry` in an npmrc.
const NPMRC: Reading = Reading { format: Format::Npmrc, sets: |file| first_held(file, &[&["registry"]]) };

/// A block adding an index to a TOML array of tables.
const INDEXES: Reading = Reading { format: Format::Toml, sets: |_| None };

const NPM_BLOCK: &str = "# >>> pkgproxy\nregistry=http://p/\n# <<< pkgproxy\n";
const INDEX_BLOCK: &str = "# >>> pkgproxy\n[[index]]\nurl = \"http://p/\"\n# <<< pkgproxy\n";

#[test]
fn a_block_fits_a_file_that_reads_it_back_as_written() {
    assert_eq!(NPMRC.fit("npm", "", NPM_BLOCK), Fit::Fits);
    assert_eq!(NPMRC.fit("npm", "save-exact=true", NPM_BLOCK), Fit::Fits, "a last line without its newline");
    assert_eq!(INDEXES.fit("uv", "[[index]]\nurl = \"https://corp/\"\n", INDEX_BLOCK), Fit::Fits, "an array added to");
    assert_eq!(joined("a=1", NPM_BLOCK), format!("a=1\n{NPM_BLOCK}"));
}

#[test]
fn a_file_setting_the_block_s_key_or_unreadable_is_refused_as_such() {
    assert_eq!(NPMRC.fit("npm", "registry\t= https://corp/\n", NPM_BLOCK), Fit::SetsItself("registry".to_owned()));
    let Fit::Unreadable(why) = INDEXES.fit("uv", "[[index]\n", INDEX_BLOCK) else { panic!() };
    assert!(why.starts_with("TOML: line 1: "), "{why}");
    let fit = NPMRC.fit("npm", "registry=x", NPM_BLOCK);
    assert!(fit.why("npm").unwrap() == "sets registry itself" && fit.replaces_their_own());
}

#[test]
fn a_file_that_would_not_read_the_block_as_written_is_refused() {
    // npm would read the block's key as its last section's.
    let fit = NPMRC.fit("npm", "[corp]\nalways-auth=true\n", NPM_BLOCK);
    assert_eq!(fit, Fit::WouldBreak("would not set registry as the block does".to_owned()));
    // A static array cannot be added to by a table.
    let fit = INDEXES.fit("uv", "index = [{ url = \"https://corp/\" }]\n", INDEX_BLOCK);
    assert!(matches!(&fit, Fit::WouldBreak(how) if how.starts_with("could not be read by uv (line ")), "{fit:?}");
    let told = fit.why("uv").unwrap();
    assert!(
        told.starts_with("with pkgproxy's block at its end could not be read by uv") && !fit.replaces_their_own(),
        "{told}"
    );
}

#[test]
fn a_setting_is_read_back_where_it_holds_the_block_s_value() {
    let block = json!({"source": {"crates-io": {"replace-with": "p"}}, "list": ["x"]});
    let holds = |joined: Value| unread(&block, &joined);
    assert_eq!(holds(json!({"source": {"crates-io": {"replace-with": "p"}, "v": {}}, "list": ["w", "x"]})), None);
    assert_eq!(
        holds(json!({"source": {"crates-io": {"replace-with": "v"}}, "list": ["x"]})).unwrap(),
        "source.crates-io.replace-with"
    );
    assert_eq!(holds(json!({"source": {"crates-io": "p"}, "list": ["x"]})).unwrap(), "source.crates-io");
    assert_eq!(holds(json!({"source": {"crates-io": {"replace-with": "p"}}, "list": ["x", "w"]})).unwrap(), "list");
    assert_eq!(holds(json!({"list": ["x"]})).unwrap(), "source");
}

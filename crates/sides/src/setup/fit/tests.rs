use serde_json::{json, Value};

use super::{lost, unread, Fit, Own, Place, Placed, Reading};
use crate::setup::{first_held, Format};

/// A block setting `registry` in an npmrc.
const NPMRC: Reading = Reading {
    format: Format::Npmrc,
    sets: |file| first_held(file, &[&["registry"]]).map(Own::Setting),
    place: Place::End,
};

/// A block adding an index to a TOML array of tables.
const INDEXES: Reading = Reading { format: Format::Toml, sets: |_| None, place: Place::End };

/// A block of options in pip's `[global]`.
const PIP_GLOBAL: Reading = Reading {
    format: Format::PipConf,
    sets: |file| first_held(file, &[&["global", "index-url"]]).map(Own::Setting),
    place: Place::PipSection("global"),
};

const NPM_BLOCK: &str = "registry=http://p/\n";
const INDEX_BLOCK: &str = "[[index]]\nurl = \"http://p/\"\n";
const PIP_BLOCK: &str = "index-url = http://p/\n";

/// The marker lines around `lines`, `#` comments.
fn marked(lines: &str) -> String {
    Format::Npmrc.marked(lines)
}

#[test]
fn a_block_fits_a_file_that_reads_it_back_as_written() {
    assert_eq!(NPMRC.fit("npm", "", NPM_BLOCK), Fit::Fits);
    assert_eq!(NPMRC.fit("npm", "save-exact=true", NPM_BLOCK), Fit::Fits, "a last line without its newline");
    assert_eq!(INDEXES.fit("uv", "[[index]]\nurl = \"https://corp/\"\n", INDEX_BLOCK), Fit::Fits, "an array added to");
    let at_end = NPMRC.placed("a=1", NPM_BLOCK);
    assert_eq!(at_end, Placed { at: 3, lines: NPM_BLOCK.to_owned(), within: None });
    assert_eq!(NPMRC.joined("a=1", &at_end), format!("a=1\n{}", marked(NPM_BLOCK)));
}

#[test]
fn a_pip_block_goes_into_the_file_s_own_section_after_its_last_line_or_at_the_end_under_a_header() {
    let own = "# mine\n[global]\ncert = /c.pem\nfind-links =\n    /srv/a\n    /srv/b\n\n# the next one\n[install]\nno-deps = true\n";
    let placed = PIP_GLOBAL.placed(own, PIP_BLOCK);
    let at = own.find("\n\n# the next").unwrap() + 1;
    assert_eq!(placed, Placed { at, lines: PIP_BLOCK.to_owned(), within: Some("its [global] section".to_owned()) });
    let written = PIP_GLOBAL.joined(own, &placed);
    assert_eq!(written, format!("{}{}{}", &own[..at], marked(PIP_BLOCK), &own[at..]));
    assert_eq!(PIP_GLOBAL.fit("pip", own, PIP_BLOCK), Fit::Fits);
    let read = Format::PipConf.read(&written).unwrap();
    assert_eq!(read["global"], json!({"cert": "/c.pem", "find-links": "\n/srv/a\n/srv/b", "index-url": "http://p/"}));

    for none in ["", "[install]\nno-deps = true\n", "[ global ]\na = 1\n"] {
        let placed = PIP_GLOBAL.placed(none, PIP_BLOCK);
        assert_eq!(
            placed,
            Placed { at: none.len(), lines: format!("[global]\n{PIP_BLOCK}"), within: None },
            "{none:?}"
        );
        assert_eq!(PIP_GLOBAL.fit("pip", none, PIP_BLOCK), Fit::Fits, "{none:?}");
    }
    let placed = PIP_GLOBAL.placed("[global]", PIP_BLOCK);
    assert_eq!((placed.at, placed.lines.as_str()), (8, PIP_BLOCK), "a last line without its newline");
    assert_eq!(PIP_GLOBAL.joined("[global]", &placed), format!("[global]\n{}", marked(PIP_BLOCK)));
}

#[test]
fn a_file_setting_the_block_s_key_or_unreadable_is_refused_as_such() {
    assert_eq!(NPMRC.fit("npm", "registry\t= https://corp/\n", NPM_BLOCK), Fit::SetsItself("registry".to_owned()));
    let Fit::Unreadable(why) = INDEXES.fit("uv", "[[index]\n", INDEX_BLOCK) else { panic!() };
    assert!(why.starts_with("TOML: line 1: "), "{why}");
    let fit = NPMRC.fit("npm", "registry=x", NPM_BLOCK);
    assert!(fit.why("npm").unwrap() == "sets registry itself" && fit.with_their_own() == ", in place of its own");
    let lists = Fit::ListsItself("trusted-host".to_owned());
    assert_eq!(lists.why("pip").unwrap(), "sets trusted-host itself");
    assert_eq!(lists.with_their_own(), ", its own values kept beside pkgproxy's");
}

#[test]
fn a_file_that_would_not_read_the_block_or_its_own_settings_as_written_is_refused() {
    // npm would read the block's key as its last section's.
    let fit = NPMRC.fit("npm", "[corp]\nalways-auth=true\n", NPM_BLOCK);
    assert_eq!(fit, Fit::WouldBreak("at its end would not set registry as the block does".to_owned()));
    // A static array cannot be added to by a table.
    let fit = INDEXES.fit("uv", "index = [{ url = \"https://corp/\" }]\n", INDEX_BLOCK);
    assert!(
        matches!(&fit, Fit::WouldBreak(how) if how.starts_with("at its end could not be read by uv (line ")),
        "{fit:?}"
    );
    let told = fit.why("uv").unwrap();
    assert!(
        told.starts_with("with pkgproxy's block at its end could not be read by uv") && fit.with_their_own().is_empty(),
        "{told}"
    );
}

#[test]
fn a_setting_is_read_back_where_it_holds_the_block_s_value_and_the_file_s_own_are_kept() {
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

    let own = json!({"global": {"cert": "/c.pem"}, "list": ["w"]});
    assert_eq!(lost(&own, &json!({"global": {"cert": "/c.pem", "index-url": "p"}, "list": ["w", "x"]})), None);
    assert_eq!(
        lost(&own, &json!({"global": {"cert": "/c.pem\nindex-url = p"}, "list": ["w"]})).unwrap(),
        "global.cert"
    );
    assert_eq!(lost(&own, &json!({"global": {"cert": "/c.pem"}, "list": ["x", "w"]})).unwrap(), "list");
}

use serde_json::{json, Value};

use super::read;

/// `text` read with `RK=registry` and `EMPTY=` in the environment.
fn read_with_env(text: &str) -> Value {
    let env = |name: &str| match name {
        "RK" => Some("registry".to_owned()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    read(text, &env).unwrap()
}

#[test]
fn it_reads_each_text_as_npm_s_own_ini_and_loader_did() {
    // Each reading is what npm 11's bundled `ini` and its loader's
    // `${VAR}` expansion made of the same text.
    for (text, npm) in [
        ("registry  = https://a/\n", json!({"registry": "https://a/"})),
        ("registry\t= https://a/\n", json!({"registry": "https://a/"})),
        ("REGISTRY=https://a/\n", json!({"REGISTRY": "https://a/"})),
        ("\"registry\"=https://a/\n", json!({"registry": "https://a/"})),
        ("'registry' = https://a/\n", json!({"registry": "https://a/"})),
        ("  registry=https://a/\n", json!({"registry": "https://a/"})),
        ("registry = https://a/ ; c\n", json!({"registry": "https://a/"})),
        ("registry ; x = https://a/\n", json!({"registry": "https://a/"})),
        ("[s]\nregistry=https://a/\n", json!({"s": {"registry": "https://a/"}})),
        ("${RK}=https://a/\n", json!({"registry": "https://a/"})),
        ("\\${RK}=x\n", json!({"${RK}": "x"})),
        ("\\\\${RK}=x\n", json!({"${RK}": "x"})),
        ("${NOPE}=x\n", json!({"${NOPE}": "x"})),
        ("${NOPE?}registry=x\n", json!({"registry": "x"})),
        ("\u{feff}registry=https://a/\n", json!({"registry": "https://a/"})),
        ("registry\n", json!({"registry": true})),
        ("regi\\stry=https://a/\n", json!({"regi\\stry": "https://a/"})),
        ("=x\nregistry\u{2028}=x\n", json!({"registry": "x"})),
        ("registry=a\u{2028}b\n", json!({})),
        ("registry[]=a\nregistry[]=b\n", json!({"registry": ["a", "b"]})),
        ("registry[]=a\nregistry=b\n", json!({"registry": ["a", "b"]})),
        ("registry=a\nregistry[]=b\n", json!({"registry": ["a", "b"]})),
        ("[registry.x]\na=1\n", json!({"registry": {"x": {"a": "1"}}})),
        ("registry=a\n[registry.x]\na=1\n", json!({"registry": {"x": {"a": "1"}}})),
        ("[a\\.b]\nc=1\n", json!({"a.b": {"c": "1"}})),
        ("[a.b]\nc=1\n[a]\nd=2\n", json!({"a": {"d": "2", "b": {"c": "1"}}})),
        ("[x.y.z]\np=1\n[x.y]\nq=2\n", json!({"x": {"y": {"q": "2"}}})),
        ("[x.y]\nq=2\n[x.y.z]\np=1\n", json!({"x": {"y": {"q": "2", "z": {"p": "1"}}}})),
        ("[__proto__]\nregistry=x\n", json!({})),
        ("__proto__=x\n", json!({})),
        ("'[\"registry\"]'=x\n", json!({"registry": "x"})),
        (
            "a=\"quoted\"\nb='single'\nc='12'\nd=true\ne=\"true\"\n",
            json!({"a": "quoted", "b": "single", "c": 12, "d": true, "e": true}),
        ),
        ("a=x\\;y\\#z\\q\n", json!({"a": "x;y#z\\q"})),
        (" [s]\n", json!({"[s]": true})),
        ("[s] ; c\nk=v\n", json!({"[s]": true, "k": "v"})),
        (
            "save-exact=true\n[corp]\nalways-auth=true\nregistry=http://p/\n",
            json!({"save-exact": true, "corp": {"always-auth": true, "registry": "http://p/"}}),
        ),
        ("k=\r\nregistry=x\r\n", json!({"k": "", "registry": "x"})),
    ] {
        assert_eq!(read_with_env(text), npm, "{text:?}");
    }
}

#[test]
fn a_section_under_a_null_key_is_where_npm_stops() {
    let env = |_: &str| None;
    assert!(read("x=null\n[x.y]\na=1\n", &env).is_err());
}

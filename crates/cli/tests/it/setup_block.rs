//! `pkgproxyctl setup CLIENT` for the clients whose setup is a block of
//! pkgproxy's in a file of the user's own (cargo, npm, yarn, pip, uv): a
//! file that sets what the block sets, in any spelling its client reads,
//! or that its client cannot read, is left byte for byte by the script and
//! by `--apply`, and the user is told what to add by hand. The script is
//! printed and run where the file is, as `pkgproxyctl setup CLIENT | sh`
//! does, and refuses a file that changed since it was printed.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The marker pkgproxy's own files and blocks carry.
const MARKER: &str = "Written by pkgproxyctl setup";

/// A machine under a folder standing for `/`, its user's home
/// `/home/dev`: `pkgproxyctl setup` reads its files there, and its script
/// runs there.
struct Machine {
    root: tempfile::TempDir,
}

impl Machine {
    fn new() -> Machine {
        Machine { root: tempfile::tempdir().unwrap() }
    }

    /// `path`, from the machine's `/`.
    fn file(&self, path: &str) -> PathBuf {
        self.root.path().join(path.trim_start_matches('/'))
    }

    /// Writes `text` at `path`.
    fn write(&self, path: &str, text: &str) {
        let file = self.file(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.file(path)).unwrap()
    }

    /// `pkgproxyctl ARGS` on the machine, with no daemon to ask.
    fn ctl(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"))
            .args(args)
            .args(["-stats-socket-path", "/nonexistent/stats.sock", "-admin-socket-path", "/nonexistent/admin.sock"])
            .env("PKGPROXY_SETUP_ROOT", self.root.path())
            .env("HOME", "/home/dev")
            .env_remove("CARGO_HOME")
            .env_remove("NPM_CONFIG_USERCONFIG")
            .output()
            .unwrap()
    }

    /// The script `pkgproxyctl setup CLIENT` prints on the machine.
    fn script(&self, client: &str) -> String {
        let output = self.ctl(&["setup", client, "-addr", "10.0.0.5:3142"]);
        assert!(output.status.success(), "{client}: {}", said(&output));
        String::from_utf8(output.stdout).unwrap()
    }

    /// `script` piped to `sh` on the machine.
    fn sh(&self, script: &str) -> Output {
        use std::io::Write;
        let mut sh = Command::new("sh")
            .env("PKGPROXY_SETUP_ROOT", self.root.path())
            .env("HOME", "/home/dev")
            .env_remove("CARGO_HOME")
            .env_remove("NPM_CONFIG_USERCONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        sh.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
        sh.wait_with_output().unwrap()
    }

    /// `pkgproxyctl setup CLIENT --apply` on the machine.
    fn apply(&self, client: &str) -> Output {
        self.ctl(&["setup", client, "-addr", "10.0.0.5:3142", "--apply"])
    }
}

/// Both streams of `output`.
fn said(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Where each client's file is on the machine.
fn path_of(client: &str) -> &'static str {
    match client {
        "cargo" => "/home/dev/.cargo/config.toml",
        "npm" => "/home/dev/.npmrc",
        "yarn" => "/home/dev/.yarnrc.yml",
        "pip" => "/etc/pip.conf",
        "uv" => "/etc/uv/uv.toml",
        _ => unreachable!("{client}"),
    }
}

/// What is wrong when `client`'s file holds `own`, which the script and
/// `--apply` should each leave byte for byte, failing, saying `why` and
/// what to add by hand (pkgproxy at 10.0.0.5:3142, with no marker).
fn faults_leaving(client: &str, own: &str, why: &str) -> Vec<String> {
    let machine = Machine::new();
    let path = path_of(client);
    let mut faults = Vec::new();
    for how in ["the script", "--apply"] {
        machine.write(path, own);
        let output = match how {
            "the script" => machine.sh(&machine.script(client)),
            _ => machine.apply(client),
        };
        let told = said(&output);
        let now = machine.read(path);
        if output.status.success() || now != own {
            faults.push(format!("{client} {own:?}: {how} wrote:\n{now}"));
        } else if !told.contains("left as it is") || !told.contains(why) {
            faults.push(format!("{client} {own:?}: {how} did not say it {why}: {told}"));
        } else if !told.contains("http://10.0.0.5:3142") || told.contains(MARKER) {
            faults.push(format!("{client} {own:?}: {how} did not say what to add by hand: {told}"));
        }
    }
    faults
}

/// Every spelling in `owns` is left as it is ([`faults_leaving`]).
fn each_left_as_it_is(client: &str, owns: &[(&str, &str)]) {
    let faults: Vec<String> = owns.iter().flat_map(|(own, why)| faults_leaving(client, own, why)).collect();
    assert!(faults.is_empty(), "{}", faults.join("\n---\n"));
}

#[test]
fn cargo_s_block_stays_out_of_a_config_replacing_crates_io_in_a_quoted_table() {
    // A second `[source.crates-io]` would be a TOML error: cargo would
    // read no configuration at all.
    each_left_as_it_is(
        "cargo",
        &[
            (
                "[source.\"crates-io\"]\nreplace-with = \"vendored\"\n\n[source.vendored]\ndirectory = \"vendor\"\n",
                "sets source.crates-io itself",
            ),
            ("[source.'pkgproxy']\nregistry = \"sparse+https://corp.example/index/\"\n", "sets source.pkgproxy itself"),
        ],
    );
}

#[test]
fn cargo_s_block_stays_out_of_a_config_replacing_crates_io_in_dotted_keys_or_inline_tables() {
    let why = "sets source.crates-io itself";
    each_left_as_it_is(
        "cargo",
        &[
            ("source.crates-io.replace-with = \"vendored\"\nsource.vendored.directory = \"vendor\"\n", why),
            ("source . \"crates-io\" . replace-with = \"vendored\"\n", why),
            ("source = { crates-io = { replace-with = \"vendored\" }, vendored = { directory = \"vendor\" } }\n", why),
            ("[source]\ncrates-io = { replace-with = \"vendored\" }\n", why),
        ],
    );
}

#[test]
fn npm_s_block_stays_out_of_an_npmrc_setting_its_registry_with_spaces_or_a_tab_around_the_equals_sign() {
    // npm keeps the last `registry`: pkgproxy's block would win over the
    // corp registry, and unscoped internal names would resolve on the
    // public registry.
    let why = "sets registry itself";
    each_left_as_it_is(
        "npm",
        &[
            ("registry  = https://npm.corp.example/\n//npm.corp.example/:_authToken=CORP\n", why),
            ("registry\t= https://npm.corp.example/\n", why),
            ("registry\t=https://npm.corp.example/\n", why),
        ],
    );
}

#[test]
fn npm_s_block_stays_out_of_an_npmrc_whose_registry_key_is_quoted_or_followed_by_a_comment() {
    let why = "sets registry itself";
    each_left_as_it_is(
        "npm",
        &[
            ("\"registry\" = https://npm.corp.example/\n", why),
            ("'registry'=https://npm.corp.example/\n", why),
            ("registry ; the corp's = https://npm.corp.example/\n", why),
        ],
    );
}

#[test]
fn yarn_s_block_stays_out_of_a_yarnrc_whose_registry_key_is_quoted() {
    each_left_as_it_is(
        "yarn",
        &[
            ("\"npmRegistryServer\": \"https://npm.corp.example\"\n", "sets npmRegistryServer itself"),
            ("'npmRegistryServer': https://npm.corp.example\n", "sets npmRegistryServer itself"),
            ("npmRegistryServer : https://npm.corp.example\n", "sets npmRegistryServer itself"),
            ("\"unsafeHttpWhitelist\":\n  - corp.example\n", "sets unsafeHttpWhitelist itself"),
        ],
    );
}

#[test]
fn uv_s_block_stays_out_of_a_uv_toml_setting_its_default_index_in_another_spelling() {
    let why = "itself";
    each_left_as_it_is(
        "uv",
        &[
            ("index = [{ url = \"https://corp.example/simple/\", default = true }]\n", why),
            ("[[index]]\nurl = \"https://corp.example/simple/\"\n\"default\" = true\n", why),
            ("default-index = \"https://corp.example/simple/\"\n", why),
        ],
    );
}

#[test]
fn a_file_its_client_cannot_read_gets_no_block_and_the_user_is_told_what_to_add() {
    let why = "cannot be read by";
    each_left_as_it_is("cargo", &[("[build\njobs = 4\n", why), ("[build]\njobs = 4\njobs = 5\n", why)]);
    each_left_as_it_is("yarn", &[("enableTelemetry: false: true\n", why), ("- a list\n", why)]);
    each_left_as_it_is("pip", &[("index-url = https://corp.example/simple/\n", why)]);
    each_left_as_it_is("pip", &[("[install]\nno-cache-dir = true\nno-cache-dir = false\n", why)]);
    each_left_as_it_is("uv", &[("[[index]\n", why)]);
}

#[test]
fn a_file_that_would_not_read_the_block_as_written_gets_no_block() {
    let why = "with pkgproxy's block at its end";
    // npm would read the block's registry= as the last section's.
    each_left_as_it_is("npm", &[("save-exact=true\n[corp]\nalways-auth=true\n", why)]);
    // A TOML table cannot extend a value, nor YAML lines a flow mapping.
    each_left_as_it_is("cargo", &[("source = \"vendored\"\n", why)]);
    each_left_as_it_is("yarn", &[("{enableTelemetry: false}\n", why)]);
}

#[test]
fn a_script_printed_before_the_file_changed_leaves_it_as_it_is() {
    let machine = Machine::new();
    let path = path_of("npm");
    machine.write(path, "save-exact=true\n");
    let script = machine.script("npm");
    let corp = "save-exact=true\nregistry = https://npm.corp.example/\n";
    machine.write(path, corp);
    let ran = machine.sh(&script);
    let told = said(&ran);
    assert!(!ran.status.success() && machine.read(path) == corp, "{told}");
    assert!(told.contains("is not as it was when this script was printed: left as it is"), "{told}");
    assert!(told.contains("registry=http://10.0.0.5:3142/npm/") && !told.contains(MARKER), "by hand: {told}");

    // The same edit without a registry of its own: printed again, written.
    let edited = "save-exact=true\nfund=false\n";
    machine.write(path, edited);
    assert!(!machine.sh(&script).status.success(), "printed for another file");
    let ran = machine.sh(&machine.script("npm"));
    assert!(ran.status.success(), "{}", said(&ran));
    assert!(machine.read(path).starts_with(edited), "{}", machine.read(path));

    // A file that is gone since takes the block alone, whatever it held.
    std::fs::remove_file(machine.file(path)).unwrap();
    let ran = machine.sh(&script);
    assert!(ran.status.success(), "{}", said(&ran));
    assert!(machine.read(path).contains("registry=http://10.0.0.5:3142/npm/"), "{}", machine.read(path));
}

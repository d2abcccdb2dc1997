//! `pkgproxyctl setup CLIENT` for the clients whose setup is a block of
//! pkgproxy's in a file of the user's own (cargo, npm, yarn, pip, uv): a
//! file that sets what the block sets, in any spelling its client reads,
//! or that its client cannot read, is left byte for byte by the script and
//! by `--apply`, and the user is told what to add by hand. The script is
//! printed and run where the file is, as `pkgproxyctl setup CLIENT | sh`
//! does, and refuses a file that changed since it was printed. pip's keys
//! go into the admin's own `[global]`; `--user` and `--system` choose the
//! user's or the machine's file where a client has both.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use pkgproxy_testkit::python_tool;

/// The marker pkgproxy's own files and blocks carry.
pub(crate) const MARKER: &str = "Written by pkgproxyctl setup";

/// A machine under a folder standing for `/`, its user's home
/// `/home/dev`: `pkgproxyctl setup` reads its files there, and its script
/// runs there.
pub(crate) struct Machine {
    pub(crate) root: tempfile::TempDir,
    /// What the environment sets beyond `HOME`.
    envs: Vec<(&'static str, String)>,
    /// Where pkgproxy is, `HOST:PORT`.
    addr: String,
}

impl Machine {
    pub(crate) fn new() -> Machine {
        Machine { root: tempfile::tempdir().unwrap(), envs: Vec::new(), addr: "10.0.0.5:3142".to_owned() }
    }

    /// The machine with its clients set up for pkgproxy at `addr`
    /// (`HOST:PORT`).
    pub(crate) fn at(self, addr: &str) -> Machine {
        Machine { addr: addr.to_owned(), ..self }
    }

    /// The machine with `name=value` in its environment.
    pub(crate) fn with(mut self, name: &'static str, value: &str) -> Machine {
        self.envs.push((name, value.to_owned()));
        self
    }

    /// `command` in the machine's environment.
    pub(crate) fn on(&self, command: &mut Command) {
        command
            .env("PKGPROXY_SETUP_ROOT", self.root.path())
            .env("HOME", "/home/dev")
            .env_remove("CARGO_HOME")
            .env_remove("NPM_CONFIG_USERCONFIG")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("GRADLE_USER_HOME")
            .env_remove("NPM_CONFIG_PREFIX")
            .env_remove("npm_config_prefix")
            .env_remove("npm_config_globalconfig")
            .envs(self.envs.iter().map(|(name, value)| (name, value)));
    }

    /// `path`, from the machine's `/`.
    pub(crate) fn file(&self, path: &str) -> PathBuf {
        self.root.path().join(path.trim_start_matches('/'))
    }

    /// Writes `text` at `path`.
    pub(crate) fn write(&self, path: &str, text: &str) {
        let file = self.file(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    pub(crate) fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.file(path)).unwrap()
    }

    /// `pkgproxyctl ARGS` on the machine, with no daemon to ask.
    fn ctl(&self, args: &[&str]) -> Output {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pkgproxyctl"));
        command.args(args).args([
            "-stats-socket-path",
            "/nonexistent/stats.sock",
            "-admin-socket-path",
            "/nonexistent/admin.sock",
        ]);
        self.on(&mut command);
        command.output().unwrap()
    }

    /// `pkgproxyctl setup CLIENT -addr 10.0.0.5:3142 FLAGS` on the machine
    /// (or at the address it was given).
    pub(crate) fn setup(&self, client: &str, flags: &[&str]) -> Output {
        let mut args = vec!["setup", client, "-addr", &self.addr];
        args.extend_from_slice(flags);
        self.ctl(&args)
    }

    /// The script `pkgproxyctl setup CLIENT` prints on the machine.
    pub(crate) fn script(&self, client: &str) -> String {
        self.script_with(client, &[])
    }

    /// The script `pkgproxyctl setup CLIENT FLAGS` prints on the machine.
    pub(crate) fn script_with(&self, client: &str, flags: &[&str]) -> String {
        let output = self.setup(client, flags);
        assert!(output.status.success(), "{client}: {}", said(&output));
        String::from_utf8(output.stdout).unwrap()
    }

    /// `script` piped to `sh` on the machine.
    pub(crate) fn sh(&self, script: &str) -> Output {
        use std::io::Write;
        let mut sh = Command::new("sh");
        self.on(&mut sh);
        let mut sh = sh.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        sh.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
        sh.wait_with_output().unwrap()
    }

    /// `pkgproxyctl setup CLIENT --apply` on the machine.
    pub(crate) fn apply(&self, client: &str) -> Output {
        self.setup(client, &["--apply"])
    }

    /// The setup of `client` with `flags`, or its undo, done `how`: by the
    /// script, or with `--apply` (`--undo`); what was said.
    pub(crate) fn done(&self, how: &str, client: &str, flags: &[&str], undo: bool) -> Output {
        let mut flags = flags.to_vec();
        match (how, undo) {
            ("the script", false) => return self.sh(&self.script_with(client, &flags)),
            ("the script", true) => flags.extend(["--undo", "--print"]),
            (_, false) => flags.push("--apply"),
            (_, true) => flags.push("--undo"),
        }
        match how {
            "the script" => self.sh(&self.script_with(client, &flags)),
            _ => self.setup(client, &flags),
        }
    }
}

/// Both streams of `output`.
pub(crate) fn said(output: &Output) -> String {
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

/// An image's own `/etc/pip.conf`: a `[global]` of the admin's, then a
/// command's section.
const ADMIN_S_PIP_CONF: &str = "# The image's own.\n[global]\ncert = /etc/pki/corp-ca.pem\ntimeout = 60\n\n[install]\nextra-index-url = https://pypi.corp.example/simple/\n";

/// What the real pip reads: `pip config list ARGS` with `envs`, and no
/// file of this machine's user (this machine's `/etc/pip.conf` is read
/// too, before any other).
fn pip_config_list(args: &[&str], envs: &[(&str, &Path)]) -> Vec<String> {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(python_tool("pip"))
        .args(["config", "list"])
        .args(args)
        .env("HOME", home.path())
        .env("XDG_CONFIG_DIRS", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("PIP_CONFIG_FILE")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    assert!(output.status.success(), "pip config list: {}", said(&output));
    String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn pip_s_keys_go_into_the_admin_s_own_global_section_pip_reads_both_and_undo_restores_it_byte_for_byte() {
    let expected = "# The image's own.\n[global]\ncert = /etc/pki/corp-ca.pem\ntimeout = 60\n\
                    # >>> pkgproxy (Written by pkgproxyctl setup: downloads go through pkgproxy)\n\
                    index-url = http://10.0.0.5:3142/pypi/simple/\ntrusted-host = 10.0.0.5\n# <<< pkgproxy\n\
                    \n[install]\nextra-index-url = https://pypi.corp.example/simple/\n";
    for how in ["the script", "--apply"] {
        let machine = Machine::new();
        machine.write("/etc/pip.conf", ADMIN_S_PIP_CONF);
        for run in ["first", "second"] {
            let output = machine.done(how, "pip", &[], false);
            assert!(output.status.success(), "{how}, {run} run: {}", said(&output));
            assert_eq!(machine.read("/etc/pip.conf"), expected, "{how}, {run} run");
        }
        let read = pip_config_list(&[], &[("PIP_CONFIG_FILE", &machine.file("/etc/pip.conf"))]);
        for setting in [
            "global.cert='/etc/pki/corp-ca.pem'",
            "global.timeout='60'",
            "global.index-url='http://10.0.0.5:3142/pypi/simple/'",
            "global.trusted-host='10.0.0.5'",
            "install.extra-index-url='https://pypi.corp.example/simple/'",
        ] {
            assert!(read.iter().any(|line| line == setting), "{how}: pip reads {read:?}, not {setting}");
        }
        let undone = machine.done(how, "pip", &[], true);
        assert!(undone.status.success(), "{how}: {}", said(&undone));
        assert_eq!(machine.read("/etc/pip.conf"), ADMIN_S_PIP_CONF, "{how}: taken out byte for byte");
    }
}

#[test]
fn pip_s_block_stays_out_of_a_pip_conf_setting_its_index_or_trusted_hosts_itself_in_any_section() {
    each_left_as_it_is(
        "pip",
        &[
            (
                "[global]\ncert = /etc/pki/corp-ca.pem\nindex-url = https://corp.example/simple/\n",
                "sets index-url in [global] itself",
            ),
            ("[global]\nIndex_URL = https://corp.example/simple/\n", "sets index-url in [global] itself"),
            ("[install]\nindex-url = https://corp.example/simple/\n", "sets index-url in [install] itself"),
            ("[global]\ntrusted-host = corp.example\n", "sets trusted-host in [global] itself"),
        ],
    );
    // A list of hosts is added to, not replaced.
    let machine = Machine::new();
    machine.write("/etc/pip.conf", "[global]\ntrusted-host = corp.example\n");
    let told = said(&machine.apply("pip"));
    assert!(told.contains("Add this to its [global] section by hand, its own values kept beside pkgproxy's:\nindex-url = http://10.0.0.5:3142/pypi/simple/\ntrusted-host = 10.0.0.5\n"), "{told}");
}

/// Where `client`'s file is on the machine for `flag`.
fn placed_at(client: &str, flag: &str) -> &'static str {
    match (client, flag) {
        ("pip", "--user") => "/home/dev/.config/pip/pip.conf",
        ("uv", "--user") => "/home/dev/.config/uv/uv.toml",
        ("npm", "--system") => "/opt/node/etc/npmrc",
        ("cargo", "--user") => "/home/dev/.cargo/config.toml",
        ("yarn", "--user") => "/home/dev/.yarnrc.yml",
        (client, _) => path_of(client),
    }
}

#[test]
fn user_and_system_choose_the_user_s_file_or_the_machine_s_and_the_clients_read_it_there() {
    for how in ["the script", "--apply"] {
        for (client, flag) in [
            ("pip", "--user"),
            ("pip", "--system"),
            ("uv", "--user"),
            ("uv", "--system"),
            ("npm", "--user"),
            ("npm", "--system"),
            ("cargo", "--user"),
            ("yarn", "--user"),
        ] {
            let machine = Machine::new().with("NPM_CONFIG_PREFIX", "/opt/node");
            let output = machine.done(how, client, &[flag], false);
            assert!(output.status.success(), "{how} {client} {flag}: {}", said(&output));
            let path = placed_at(client, flag);
            assert!(machine.read(path).contains("http://10.0.0.5:3142/"), "{how} {client} {flag}: {path}");
            let written: Vec<String> = walk(machine.root.path());
            assert_eq!(written, [path.to_owned()], "{how} {client} {flag}: that file only");
            match (client, flag) {
                ("pip", "--user") => {
                    let home = machine.file("/home/dev");
                    let read = pip_config_list(&["--user"], &[("HOME", &home)]);
                    let index = "global.index-url='http://10.0.0.5:3142/pypi/simple/'";
                    assert!(read.iter().any(|line| line == index), "pip reads the user's file: {read:?}");
                }
                ("npm", "--system") => {
                    let read = Command::new("npm")
                        .args(["config", "get", "registry", "--userconfig", "/dev/null/npmrc"])
                        .env("NPM_CONFIG_PREFIX", machine.file("/opt/node"))
                        .env_remove("npm_config_globalconfig")
                        .output()
                        .unwrap();
                    let registry = String::from_utf8_lossy(&read.stdout);
                    assert_eq!(registry.trim(), "http://10.0.0.5:3142/npm/", "npm reads it as its global npmrc");
                }
                _ => {}
            }
            let undone = machine.done(how, client, &[flag], true);
            assert!(undone.status.success(), "{how} {client} {flag}: {}", said(&undone));
            assert!(walk(machine.root.path()).is_empty(), "{how} {client} {flag}: taken back");
        }
    }
    // pip's user file where XDG_CONFIG_HOME says.
    let machine = Machine::new().with("XDG_CONFIG_HOME", "/home/dev/xdg");
    let output = machine.sh(&machine.script_with("pip", &["--user"]));
    assert!(output.status.success(), "{}", said(&output));
    assert!(machine.read("/home/dev/xdg/pip/pip.conf").contains("index-url = http://10.0.0.5:3142/pypi/simple/"));
}

#[test]
fn a_place_a_client_does_not_read_is_refused_saying_where_its_setup_goes() {
    for (client, flag, told) in [
        ("cargo", "--system", "cargo is set up per user only"),
        ("yarn", "--system", "yarn is set up per user only"),
        ("apt", "--user", "apt is set up machine-wide only"),
    ] {
        for how in [&[][..], &["--apply"][..], &["--undo"][..]] {
            let machine = Machine::new();
            let mut flags = vec![flag];
            flags.extend_from_slice(how);
            let output = machine.setup(client, &flags);
            assert!(!output.status.success() && said(&output).contains(told), "{client} {flags:?}: {}", said(&output));
            assert!(
                output.stdout.is_empty() && walk(machine.root.path()).is_empty(),
                "{client} {flags:?}: nothing done"
            );
        }
    }
    let both = Machine::new().setup("pip", &["--user", "--system"]);
    assert!(!both.status.success() && said(&both).contains("cannot be used with"), "{}", said(&both));
}

/// The files under `root`, from `/`.
pub(crate) fn walk(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push(format!("/{}", path.strip_prefix(root).unwrap().display()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn npm_s_setup_names_the_token_line_its_registry_needs_where_npm_sends_the_npm_registry_s_token_no_more() {
    let machine = Machine::new();
    machine.write("/home/dev/.npmrc", "//registry.npmjs.org/:_authToken=npm_SECRET123\n");
    let script = machine.script("npm");
    let line = "//10.0.0.5:3142/npm/:_authToken=";
    assert!(script.lines().any(|said| said.starts_with('#') && said.contains(line)), "{script}");
    assert!(!script.contains("npm_SECRET123"), "never the token itself: {script}");
    let applied = machine.apply("npm");
    assert!(applied.status.success() && said(&applied).contains(line), "{}", said(&applied));
}

//! What the host's network looks like: a usable default route (IPv4 or
//! IPv6), and the radios' kill switches. Read from `/proc/net/route`,
//! `/proc/net/ipv6_route` and the rfkill uevent files, which any snap may
//! read; the parsers are pure, and a test hands in its own [`HostProbe`].

use std::path::{Path, PathBuf};

/// One look at the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostLook {
    /// A usable default route exists.
    pub default_route: bool,
    /// GNOME's airplane rule holds: at least one radio, none unblocked.
    pub airplane: bool,
}

/// Where looks come from.
pub trait HostProbe: Send + Sync + 'static {
    /// The host now.
    fn look(&self) -> HostLook;
}

/// The real host.
#[derive(Debug, Clone)]
pub struct SystemProbe {
    proc_net: PathBuf,
    rfkill: PathBuf,
}

impl Default for SystemProbe {
    fn default() -> Self {
        SystemProbe { proc_net: PathBuf::from("/proc/net"), rfkill: PathBuf::from("/sys/class/rfkill") }
    }
}

impl HostProbe for SystemProbe {
    fn look(&self) -> HostLook {
        let read = |name: &str| std::fs::read_to_string(self.proc_net.join(name)).unwrap_or_default();
        HostLook {
            default_route: ipv4_default_route(&read("route")) || ipv6_default_route(&read("ipv6_route")),
            airplane: airplane(&radio_states(&self.rfkill)),
        }
    }
}

/// `RTF_UP`.
const RTF_UP: u32 = 0x0001;
/// `RTF_REJECT`: an unreachable route is no way out.
const RTF_REJECT: u32 = 0x0200;

/// A default route in `/proc/net/route`: destination and mask 0, up, not
/// a rejecting route, not on the loopback interface.
pub fn ipv4_default_route(table: &str) -> bool {
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            return false;
        }
        let flags = u32::from_str_radix(fields[3], 16).unwrap_or(0);
        fields[0] != "lo"
            && fields[1] == "00000000"
            && fields[7] == "00000000"
            && flags & RTF_UP != 0
            && flags & RTF_REJECT == 0
    })
}

/// A default route in `/proc/net/ipv6_route`: `::/0`, up, not rejecting,
/// not on the loopback interface.
pub fn ipv6_default_route(table: &str) -> bool {
    table.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 10 {
            return false;
        }
        let flags = u32::from_str_radix(fields[8], 16).unwrap_or(0);
        let any = fields[0].bytes().all(|b| b == b'0') && fields[1] == "00";
        any && fields[9] != "lo" && flags & RTF_UP != 0 && flags & RTF_REJECT == 0
    })
}

/// Whether each radio is unblocked, from the `uevent` files under `dir`.
pub fn radio_states(dir: &Path) -> Vec<bool> {
    let Ok(entries) = std::fs::read_dir(dir) else { return vec![] };
    entries
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("uevent")).ok())
        .filter_map(|uevent| radio_unblocked(&uevent))
        .collect()
}

/// From one rfkill `uevent`: `RFKILL_STATE=1` is unblocked, 0 soft- and 2
/// hard-blocked.
pub fn radio_unblocked(uevent: &str) -> Option<bool> {
    let state = uevent.lines().find_map(|line| line.strip_prefix("RFKILL_STATE="))?;
    Some(state.trim() == "1")
}

/// GNOME's airplane rule: at least one radio, and none unblocked.
pub fn airplane(radios: &[bool]) -> bool {
    !radios.is_empty() && radios.iter().all(|unblocked| !unblocked)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
";

    #[test]
    fn ipv4_default_routes() {
        assert!(ipv4_default_route(ROUTE));
        let without = ROUTE.lines().filter(|l| !l.contains("\t00000000\t010200C0")).collect::<Vec<_>>().join("\n");
        assert!(!ipv4_default_route(&without));
        let rejecting = ROUTE.replace("0003", "0201");
        assert!(!ipv4_default_route(&rejecting));
        assert!(!ipv4_default_route(""));
    }

    #[test]
    fn ipv6_default_routes() {
        let table = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n";
        assert!(ipv6_default_route(table));
        let unreachable = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert!(!ipv6_default_route(unreachable));
        let prefix = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n";
        assert!(!ipv6_default_route(prefix));
    }

    #[test]
    fn the_airplane_rule() {
        assert!(!airplane(&[]), "no radio is no airplane mode");
        assert!(airplane(&[false, false]));
        assert!(!airplane(&[false, true]));
        assert_eq!(radio_unblocked("RFKILL_NAME=phy0\nRFKILL_TYPE=wlan\nRFKILL_STATE=0\n"), Some(false));
        assert_eq!(radio_unblocked("RFKILL_STATE=1"), Some(true));
        assert_eq!(radio_unblocked("RFKILL_STATE=2"), Some(false));
        assert_eq!(radio_unblocked("nothing"), None);
    }
}

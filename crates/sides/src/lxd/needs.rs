//! What `lxc launch` or `lxc image export REMOTE:ALIAS` needs from pkgproxy
//! with the network gone: the remote's index and products files (one
//! generation), then the image's files of the newest version a products
//! file lists for the alias and architecture: the metadata and the root
//! (a squashfs or root tarball for a container, a disk image for a VM), or
//! one unified tarball.

use serde::{Deserialize, Serialize};

use super::stream::{self, Item, Product};
use super::{member_key, Lxd, INDEX_PATH};
use crate::id::SideId;
use crate::needs::{self, Asked, NeededItem, Needs, NeedsError, NeedsReader};
use crate::route;

/// What `check lxd` takes.
#[derive(Debug, clap::Args)]
struct Arguments {
    /// REMOTE:ALIAS, the remote as pkgproxy mounts it (`ubuntu:24.04`).
    #[arg(required = true, value_name = "REMOTE:ALIAS")]
    images: Vec<String>,
    /// Virtual-machine images rather than containers'.
    #[arg(long)]
    vm: bool,
    /// The machine's architecture (default: dpkg's).
    #[arg(long, value_name = "ARCH")]
    arch: Option<String>,
}

/// An LXD image asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Image {
    /// The remote, as pkgproxy mounts it (`ubuntu`, `images`).
    remote: String,
    /// The alias (`24.04`, `debian/12`).
    alias: String,
    /// A virtual machine's image rather than a container's.
    #[serde(default)]
    vm: bool,
}

/// What fetching some images needs: what the daemon follows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Launches {
    images: Vec<Image>,
    /// The machine's architecture, as Debian names it (`amd64`).
    architecture: String,
}

/// LXD's reader of the images a build launches.
pub struct Reader;

impl NeedsReader for Reader {
    fn command(&self) -> clap::Command {
        let about = "LXD images: what `lxc launch REMOTE:ALIAS` (or `lxc image export`) needs: the remote's \
                     index and products files, and the image's files of the newest version listed for the alias";
        <Arguments as clap::Args>::augment_args(clap::Command::new("lxd")).about(about)
    }

    fn read(&self, matches: &clap::ArgMatches) -> Result<Asked, NeedsError> {
        let arguments: Arguments = needs::arguments(matches)?;
        needs::resolve(&Launches {
            images: arguments.images.iter().map(|image| image_of(image, arguments.vm)).collect::<Result<_, _>>()?,
            architecture: arguments.arch.unwrap_or_else(needs::machine_architecture),
        })
    }
}

/// `REMOTE:ALIAS`, for a container or (`vm`) a virtual machine.
fn image_of(argument: &str, vm: bool) -> Result<Image, NeedsError> {
    let (remote, alias) = argument.split_once(':').unwrap_or_default();
    let remote_ok = !remote.is_empty() && remote.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    let alias_ok = !alias.is_empty() && !alias.contains(char::is_whitespace);
    match remote_ok && alias_ok {
        true => Ok(Image { remote: remote.to_owned(), alias: alias.to_owned(), vm }),
        false => Err(NeedsError::new(format!("{argument:?} is not REMOTE:ALIAS (ubuntu:24.04, images:debian/12)"))),
    }
}

/// The largest index or products file read.
const FILE_LIMIT: u64 = 256 * 1024 * 1024;

/// What an image needs, as far as the cache says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ImageNeeds {
    /// The requests, below the remote's mount, in the order LXD makes them.
    pub paths: Vec<String>,
    /// What cannot be known yet, and why.
    pub unresolved: Vec<String>,
}

/// The kind of instance an image is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instance {
    /// A container.
    Container,
    /// A virtual machine.
    VirtualMachine,
}

/// The metadata files LXD pairs with a root file.
const META: [&str; 1] = ["lxd.tar.xz"];
/// A unified image (metadata and root in one), containers only.
const UNIFIED: [&str; 1] = ["lxd_combined.tar.gz"];
/// The root files of a container, preferred first.
const CONTAINER_ROOTS: [&str; 2] = ["squashfs", "root.tar.xz"];
/// The root files of a virtual machine, preferred first.
const VM_ROOTS: [&str; 3] = ["disk-kvm.img", "disk1.img", "uefi1.img"];

impl Lxd {
    /// What fetching the asked images needs: each remote's index and
    /// products files, then each image's files of the newest version
    /// listed for the alias, as far as the held generations say. Blocking.
    pub(super) fn launch_needs(&self, asked: serde_json::Value) -> Result<Needs, NeedsError> {
        let asked: Launches = needs::parse(asked)?;
        let mount = route::prefix_of(SideId::Lxd).unwrap_or_default();
        let mut found = Needs::default();
        for image in &asked.images {
            let instance = match image.vm {
                true => Instance::VirtualMachine,
                false => Instance::Container,
            };
            let image_needs = self.offline_needs(&image.remote, &image.alias, instance, &asked.architecture);
            for path in &image_needs.paths {
                let below = format!("{}/{path}", image.remote);
                let url = format!("{mount}/{below}");
                if !found.items.iter().any(|item| item.url == url) {
                    found.items.push(NeededItem { url, label: below });
                }
            }
            found.unknown.extend(image_needs.unresolved);
        }
        Ok(found)
    }

    /// What fetching the image `alias` of `remote` for `architecture` (a
    /// Debian name: `amd64`) as `instance` needs.
    pub fn offline_needs(&self, remote: &str, alias: &str, instance: Instance, architecture: &str) -> ImageNeeds {
        let mut needs = ImageNeeds { paths: vec![INDEX_PATH.to_owned()], ..ImageNeeds::default() };
        let what = format!("{remote}:{alias}");
        let Some(index) = self.cache.read_small(&member_key(remote, INDEX_PATH), FILE_LIMIT) else {
            needs.unresolved.push(format!("{what}: the remote's index is not cached"));
            return needs;
        };
        let Ok(products_paths) = stream::products_paths(&index) else {
            needs.unresolved.push(format!("{what}: the remote's cached index cannot be read"));
            return needs;
        };
        let mut found = None;
        for path in products_paths {
            let products = self.cache.read_small(&member_key(remote, &path), FILE_LIMIT);
            needs.paths.push(path);
            if found.is_none() {
                found = products.and_then(|products| image_files(&products, alias, instance, architecture));
            }
        }
        match found {
            Some(files) => needs.paths.extend(files),
            None => needs.unresolved.push(format!(
                "{what}: no cached products file lists a {} image of it for {architecture}",
                match instance {
                    Instance::Container => "container",
                    Instance::VirtualMachine => "virtual-machine",
                }
            )),
        }
        needs
    }
}

/// The paths of the files of the newest version of the product `alias`
/// names for `architecture` that has them for `instance`.
fn image_files(products: &[u8], alias: &str, instance: Instance, architecture: &str) -> Option<Vec<String>> {
    let mut versions = Vec::new();
    let named = |product: &Product| {
        product.arch == architecture && product.aliases.split(',').any(|named| named.trim() == alias)
    };
    stream::for_each_product("products", products, |product| {
        if named(&product) {
            versions.extend(product.versions);
        }
    })
    .ok()?;
    versions.sort_by(|a, b| b.serial.cmp(&a.serial));
    versions.iter().find_map(|version| pair(&version.items, instance))
}

/// The files of one version LXD takes for `instance`: the metadata and the
/// first root it knows, or the unified tarball.
fn pair(items: &[Item], instance: Instance) -> Option<Vec<String>> {
    let path = |ftypes: &[&str]| {
        ftypes.iter().find_map(|ftype| {
            let item = items.iter().find(|item| item.ftype.as_deref() == Some(*ftype))?;
            item.path.clone().filter(|path| stream::is_safe(path))
        })
    };
    let roots: &[&str] = match instance {
        Instance::Container => &CONTAINER_ROOTS,
        Instance::VirtualMachine => &VM_ROOTS,
    };
    match (path(&META), path(roots)) {
        (Some(meta), Some(root)) => Some(vec![meta, root]),
        _ if instance == Instance::Container => path(&UNIFIED).map(|unified| vec![unified]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_image_is_a_remote_and_an_alias() {
        let image = super::image_of("images:debian/12", true).unwrap();
        assert_eq!((image.remote.as_str(), image.alias.as_str(), image.vm), ("images", "debian/12", true));
        for bad in ["24.04", ":24.04", "ubuntu:", "a b:c"] {
            assert!(super::image_of(bad, false).is_err(), "{bad}");
        }
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn the_newest_version_with_the_files_for_the_instance_is_taken() {
        let item = |ftype: &str, path: &str| json!({"ftype": ftype, "path": path, "sha256": "0", "size": 1});
        let products = json!({"products": {
            "os:1:amd64": {"aliases": "one, testos", "arch": "amd64", "versions": {
                "20240101": {"items": {"m": item("lxd.tar.xz", "old/lxd.tar.xz"), "r": item("squashfs", "old/root.squashfs"),
                                       "v": item("disk-kvm.img", "old/disk.img")}},
                "20240202": {"items": {"m": item("lxd.tar.xz", "new/lxd.tar.xz"), "r": item("squashfs", "new/root.squashfs")}}}},
            "os:1:arm64": {"aliases": "testos", "arch": "arm64", "versions": {
                "20240303": {"items": {"m": item("lxd.tar.xz", "arm/lxd.tar.xz"), "r": item("squashfs", "arm/root.squashfs")}}}}}});
        let products = products.to_string();
        let files = |alias, instance, arch| image_files(products.as_bytes(), alias, instance, arch);
        assert_eq!(
            files("testos", Instance::Container, "amd64"),
            Some(vec!["new/lxd.tar.xz".to_owned(), "new/root.squashfs".to_owned()])
        );
        assert_eq!(
            files("testos", Instance::VirtualMachine, "amd64"),
            Some(vec!["old/lxd.tar.xz".to_owned(), "old/disk.img".to_owned()]),
            "the newest version with a disk image"
        );
        assert_eq!(files("testos", Instance::Container, "arm64").unwrap()[0], "arm/lxd.tar.xz");
        assert_eq!(files("other", Instance::Container, "amd64"), None);
    }
}

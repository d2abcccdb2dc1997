//! What `lxc launch` or `lxc image export REMOTE:ALIAS` needs from pkgproxy
//! with the network gone: the remote's index and products files (one
//! generation), then the image's files of the newest version a products
//! file lists for the alias and architecture: the metadata and the root
//! (a squashfs or root tarball for a container, a disk image for a VM), or
//! one unified tarball.

use super::stream::{self, Item, Product};
use super::{member_key, Lxd, INDEX_PATH};

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

//! The image as an OCI image layout directory (`oci-layout`, `index.json`,
//! `blobs/sha256/`): one gzipped tar layer made from [`super::rootfs`]'s
//! entries, the image configuration (entrypoint, user, environment) and
//! the manifest, written with the `oci-spec` types (the OCI image spec's
//! own Rust model, kept by the youki/containers maintainers) and the `tar`
//! crate (the one cargo itself unpacks crates with). oras copies the
//! directory to a registry as it is, so the digest printed here is the one
//! the registry serves.
//!
//! Every byte is a function of the inputs: entries in path order, owners
//! and modes from the list (not from the build machine), and modification
//! times from `SOURCE_DATE_EPOCH` (0 when unset).

use std::io::Write;
use std::path::Path;

use oci_spec::image::{
    Arch, ConfigBuilder, Descriptor, HistoryBuilder, ImageConfigurationBuilder, ImageIndexBuilder, ImageManifestBuilder, MediaType, OciLayoutBuilder,
    Os, RootFsBuilder,
};
use sha2::{Digest, Sha256};

use super::rootfs::{self, Content, Entry};
use crate::Result;

/// What a layout holds: the manifest's digest and size.
pub struct Written {
    pub digest: String,
    pub layer_bytes: u64,
    pub uncompressed_bytes: u64,
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

fn mtime() -> u64 {
    std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// The uncompressed tar of `entries`.
pub fn tar(entries: &[Entry]) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    let mtime = mtime();
    for entry in entries {
        let mut header = tar::Header::new_ustar();
        let data = match &entry.content {
            Content::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                Vec::new()
            }
            Content::File(from) => std::fs::read(from).map_err(|e| format!("read {}: {e}", from.display()))?,
            Content::Text(text) => text.clone().into_bytes(),
        };
        header.set_size(data.len() as u64);
        header.set_mode(entry.mode);
        header.set_uid(entry.owner.into());
        header.set_gid(entry.owner.into());
        header.set_mtime(mtime);
        let name = if matches!(entry.content, Content::Dir) { format!("{}/", entry.path) } else { entry.path.clone() };
        builder.append_data(&mut header, &name, data.as_slice()).map_err(|e| format!("tar {}: {e}", entry.path))?;
    }
    builder.into_inner().map_err(|e| format!("finish the layer's tar: {e}"))
}

fn gzip(bytes: &[u8]) -> Result<Vec<u8>> {
    // flate2's header carries no file name and a zero mtime: the same bytes each time.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(bytes).map_err(|e| format!("gzip the layer: {e}"))?;
    gz.finish().map_err(|e| format!("gzip the layer: {e}"))
}

fn put_blob(dir: &Path, bytes: &[u8]) -> Result<String> {
    let digest = sha256(bytes);
    let path = dir.join("blobs/sha256").join(digest.trim_start_matches("sha256:"));
    std::fs::write(&path, bytes).map_err(|e| format!("write {}: {e}", path.display()))?;
    Ok(digest)
}

fn descriptor(media_type: MediaType, bytes: &[u8], digest: &str) -> Result<Descriptor> {
    let digest = digest.parse::<oci_spec::image::Digest>().map_err(|e| format!("digest {digest}: {e}"))?;
    Ok(Descriptor::new(media_type, bytes.len() as u64, digest))
}

/// The image configuration: how a runtime starts the image.
fn configuration(diff_id: &str) -> Result<Vec<u8>> {
    let config = ConfigBuilder::default()
        .user(format!("{0}:{0}", rootfs::USER))
        .entrypoint(vec![format!("/{}", rootfs::HOST)])
        .cmd(vec!["--help".to_string()])
        .env(vec![
            "PATH=/usr/local/bin".to_string(),
            format!("HOST_PLUGIN_CACHE_DIR=/{}", rootfs::PLUGIN_CACHE),
            format!("HOST_PLUGIN_PRECOMPILED_DIR=/{}", rootfs::PRECOMPILED),
            format!("SSL_CERT_FILE=/{}", rootfs::CA_BUNDLE),
        ])
        .exposed_ports(vec!["8080/tcp".to_string()])
        .working_dir("/")
        .labels(
            [
                ("org.opencontainers.image.title", "operator-host"),
                ("org.opencontainers.image.description", "Runs Kubernetes controllers from sandboxed WebAssembly plugins"),
                ("org.opencontainers.image.licenses", "Apache-2.0"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into_iter()
            .collect::<std::collections::HashMap<_, _>>(),
        )
        .build()
        .map_err(|e| format!("image config: {e}"))?;
    let image = ImageConfigurationBuilder::default()
        .architecture(Arch::Amd64)
        .os(Os::Linux)
        .config(config)
        .rootfs(RootFsBuilder::default().typ("layers").diff_ids(vec![diff_id.to_string()]).build().map_err(|e| format!("rootfs: {e}"))?)
        .history(vec![HistoryBuilder::default().created_by("cargo xtask image").build().map_err(|e| format!("history: {e}"))?])
        .build()
        .map_err(|e| format!("image configuration: {e}"))?;
    image.to_string().map(String::into_bytes).map_err(|e| format!("serialize the image configuration: {e}"))
}

/// Writes the layout for `entries` into `dir` (emptied first), tagged `tag`.
pub fn write(entries: &[Entry], dir: &Path, tag: &str) -> Result<Written> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(dir.join("blobs/sha256")).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let tar = tar(entries)?;
    let layer = gzip(&tar)?;
    let layer_digest = put_blob(dir, &layer)?;
    let config = configuration(&sha256(&tar))?;
    let config_digest = put_blob(dir, &config)?;
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(MediaType::ImageConfig, &config, &config_digest)?)
        .layers(vec![descriptor(MediaType::ImageLayerGzip, &layer, &layer_digest)?])
        .build()
        .map_err(|e| format!("image manifest: {e}"))?
        .to_string()
        .map_err(|e| format!("serialize the manifest: {e}"))?
        .into_bytes();
    let digest = put_blob(dir, &manifest)?;
    let mut in_index = descriptor(MediaType::ImageManifest, &manifest, &digest)?;
    in_index.set_annotations(Some([("org.opencontainers.image.ref.name".to_string(), tag.to_string())].into()));
    let index = ImageIndexBuilder::default().schema_version(2u32).media_type(MediaType::ImageIndex).manifests(vec![in_index]).build();
    index
        .map_err(|e| format!("image index: {e}"))?
        .to_file(dir.join("index.json"))
        .map_err(|e| format!("write {}: {e}", dir.join("index.json").display()))?;
    OciLayoutBuilder::default()
        .image_layout_version("1.0.0")
        .build()
        .map_err(|e| format!("oci-layout: {e}"))?
        .to_file(dir.join("oci-layout"))
        .map_err(|e| format!("write {}: {e}", dir.join("oci-layout").display()))?;
    Ok(Written { digest, layer_bytes: layer.len() as u64, uncompressed_bytes: tar.len() as u64 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::rootfs::{Content, Entry};

    fn entries() -> Vec<Entry> {
        vec![
            Entry { path: "etc".into(), content: Content::Dir, mode: 0o755, owner: 0 },
            Entry { path: "etc/passwd".into(), content: Content::Text("root:x:0:0::/:/sbin/nologin\n".into()), mode: 0o644, owner: 0 },
            Entry { path: "tmp".into(), content: Content::Dir, mode: 0o1777, owner: 0 },
            Entry { path: "var".into(), content: Content::Dir, mode: 0o755, owner: 0 },
            Entry { path: "var/cache".into(), content: Content::Dir, mode: 0o755, owner: 65532 },
        ]
    }

    #[test]
    fn the_layer_is_the_same_bytes_each_time_with_owners_and_modes_from_the_list() {
        let (first, second) = (tar(&entries()).unwrap(), tar(&entries()).unwrap());
        assert_eq!(sha256(&first), sha256(&second));
        let mut archive = ::tar::Archive::new(first.as_slice());
        let read: Vec<(String, u32, u64)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.path().unwrap().display().to_string(), e.header().mode().unwrap(), e.header().uid().unwrap())
            })
            .collect();
        assert!(read.contains(&("tmp/".to_string(), 0o1777, 0)), "{read:?}");
        assert!(read.contains(&("var/cache/".to_string(), 0o755, 65532)), "{read:?}");
        assert!(read.contains(&("etc/passwd".to_string(), 0o644, 0)), "{read:?}");
    }

    #[test]
    fn the_layout_names_one_manifest_whose_config_runs_the_host_as_nonroot() {
        let dir = std::env::temp_dir().join(format!("xtask-layout-{}", std::process::id()));
        let written = write(&entries(), &dir, "v1").unwrap();
        let blob = |d: &str| std::fs::read(dir.join("blobs/sha256").join(d.trim_start_matches("sha256:"))).unwrap();
        let index: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
        assert_eq!(index["manifests"][0]["digest"], written.digest.as_str());
        assert_eq!(index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"], "v1");
        let manifest: serde_json::Value = serde_json::from_slice(&blob(&written.digest)).unwrap();
        let config: serde_json::Value = serde_json::from_slice(&blob(manifest["config"]["digest"].as_str().unwrap())).unwrap();
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(config["config"]["Entrypoint"][0], "/usr/local/bin/host");
        let layer = blob(manifest["layers"][0]["digest"].as_str().unwrap());
        let mut tar = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(layer.as_slice()), &mut tar).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][0], sha256(&tar).as_str(), "the diff id is the uncompressed layer's digest");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

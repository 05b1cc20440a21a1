//! What the image holds, file by file: one list ([`entries`]) that both the
//! image's layer ([`super::layout`]) and a plain directory ([`write_dir`],
//! what the Dockerfile copies into `scratch`) are made from, so the two
//! layouts cannot drift apart.
//!
//! ```text
//! /usr/local/bin/host                 the production host
//! /lib/..., /lib64/ld-linux-...       the glibc libraries it loads (ldd)
//! /plugins/<name>.wasm                the shipped plugins
//! /usr/lib/operator-host/precompiled  the shipped plugins precompiled by this host
//! /etc/ssl/certs/ca-certificates.crt  the build machine's CA bundle (Debian's)
//! /etc/passwd, /etc/group             root and `nonroot` (65532, as distroless)
//! /home/nonroot                       its home (0700, owned by it)
//! /var/cache/operator-host            precompiled plugins (owned by 65532)
//! /tmp                                1777
//! ```
//!
//! The chart mounts emptyDirs over /var/cache/operator-host and /tmp (its
//! root filesystem is read-only); the directories are in the image so it
//! also runs on its own.

use std::path::{Path, PathBuf};

use crate::Result;

/// The non-root user the image runs as (distroless's `nonroot`); the chart's
/// `runAsUser` is the same number.
pub const USER: u32 = 65532;
/// Where the host is in the image (the entrypoint).
pub const HOST: &str = "usr/local/bin/host";
/// Where plugins compiled on load are cached (`HOST_PLUGIN_CACHE_DIR`).
pub const PLUGIN_CACHE: &str = "var/cache/operator-host";
/// The shipped plugins as this host compiled them at build time
/// (`HOST_PLUGIN_PRECOMPILED_DIR`): a Pod starts without compiling them, and
/// without the compiler's working memory in its heap.
pub const PRECOMPILED: &str = "usr/lib/operator-host/precompiled";
/// Debian's CA bundle, also the path rustls-native-certs reads in the image.
pub const CA_BUNDLE: &str = "etc/ssl/certs/ca-certificates.crt";

/// Where an entry's bytes come from.
pub enum Content {
    File(PathBuf),
    Text(String),
    Dir,
}

/// One file or directory of the image (path relative to `/`).
pub struct Entry {
    pub path: String,
    pub content: Content,
    pub mode: u32,
    pub owner: u32,
}

impl Entry {
    fn file(path: &str, from: &Path, mode: u32) -> Entry {
        Entry { path: path.to_string(), content: Content::File(from.to_path_buf()), mode, owner: 0 }
    }

    fn text(path: &str, text: &str) -> Entry {
        Entry { path: path.to_string(), content: Content::Text(text.to_string()), mode: 0o644, owner: 0 }
    }

    fn dir(path: &str, mode: u32, owner: u32) -> Entry {
        Entry { path: path.to_string(), content: Content::Dir, mode, owner }
    }
}

/// The image's files: `host` (the binary), the shared `libraries` it
/// loads (each at its own path), each of `plugins`, each of `precompiled`
/// (artifacts of the plugins), and the system files above; every parent directory listed before its children
/// (root-owned, 0755), sorted by path, so the layer is the same bytes for
/// the same inputs.
pub fn entries(host: &Path, libraries: &[PathBuf], plugins: &[PathBuf], precompiled: &[PathBuf]) -> Result<Vec<Entry>> {
    let ca = Path::new("/").join(CA_BUNDLE);
    if !ca.is_file() {
        return Err(format!("{} is missing: install Debian's ca-certificates package", ca.display()));
    }
    let mut all = vec![
        Entry::file(HOST, host, 0o755),
        Entry::file(CA_BUNDLE, &ca, 0o644),
        Entry::text("etc/passwd", &format!("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{USER}:{USER}:nonroot:/home/nonroot:/sbin/nologin\n")),
        Entry::text("etc/group", &format!("root:x:0:\nnonroot:x:{USER}:\n")),
        Entry::dir("home/nonroot", 0o700, USER),
        Entry::dir(PLUGIN_CACHE, 0o755, USER),
        Entry::dir("tmp", 0o1777, 0),
    ];
    for library in libraries {
        let path = library.strip_prefix("/").map_err(|_| format!("{} is not an absolute path", library.display()))?;
        all.push(Entry::file(&path.to_string_lossy(), library, 0o755));
    }
    let name =
        |file: &Path| file.file_name().and_then(|n| n.to_str()).map(str::to_string).ok_or_else(|| format!("{} has no file name", file.display()));
    for plugin in plugins {
        all.push(Entry::file(&format!("plugins/{}", name(plugin)?), plugin, 0o644));
    }
    for artifact in precompiled {
        all.push(Entry::file(&format!("{PRECOMPILED}/{}", name(artifact)?), artifact, 0o644));
    }
    let mut parents: Vec<String> = Vec::new();
    for entry in &all {
        for p in Path::new(&entry.path).ancestors().skip(1).filter(|p| !p.as_os_str().is_empty()) {
            let p = p.to_string_lossy().into_owned();
            if !all.iter().any(|e| e.path == p) && !parents.contains(&p) {
                parents.push(p);
            }
        }
    }
    all.extend(parents.into_iter().map(|p| Entry::dir(&p, 0o755, 0)));
    all.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(all)
}

/// Writes the entries under `dir` (emptied first), with their modes, and
/// their owners when run as root (the Dockerfile's build stage is).
pub fn write_dir(entries: &[Entry], dir: &Path) -> Result {
    use std::os::unix::fs::PermissionsExt;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false);
    for entry in entries {
        let to = dir.join(&entry.path);
        match &entry.content {
            Content::Dir => std::fs::create_dir_all(&to).map(|_| ()),
            Content::File(from) => std::fs::copy(from, &to).map(|_| ()),
            Content::Text(text) => std::fs::write(&to, text),
        }
        .map_err(|e| format!("write {}: {e}", to.display()))?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(entry.mode)).map_err(|e| format!("chmod {}: {e}", to.display()))?;
        if root {
            std::os::unix::fs::chown(&to, Some(entry.owner), Some(entry.owner)).map_err(|e| format!("chown {}: {e}", to.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parent_directory_comes_before_its_children_and_the_list_is_sorted() {
        let host = std::env::current_exe().unwrap();
        let plugin = PathBuf::from("/somewhere/cronjob.wasm");
        let artifact = PathBuf::from("/elsewhere/0123-abcd.cwasm");
        let Ok(all) = entries(&host, &[PathBuf::from("/lib64/ld-linux-x86-64.so.2")], &[plugin], &[artifact]) else { return };
        let paths: Vec<&str> = all.iter().map(|e| e.path.as_str()).collect();
        for (i, path) in paths.iter().enumerate() {
            let mut parent = Path::new(path).parent();
            while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
                let at = paths.iter().position(|q| Path::new(q) == p).unwrap_or_else(|| panic!("{p:?} (parent of {path}) is missing"));
                assert!(at < i, "{p:?} comes after {path}");
                parent = p.parent();
            }
        }
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted);
        assert!(paths.contains(&"plugins/cronjob.wasm") && paths.contains(&HOST) && paths.contains(&"lib64/ld-linux-x86-64.so.2"));
        assert!(paths.contains(&"usr/lib/operator-host/precompiled/0123-abcd.cwasm"), "{paths:?}");
        let cache = all.iter().find(|e| e.path == PLUGIN_CACHE).unwrap();
        assert_eq!((cache.owner, cache.mode), (USER, 0o755));
    }
}

//! Writing a [`Bundle`] to disk exactly the way the kubelet projects a Secret volume, so the
//! webhook's certificate reloader can be tested against a real Secret update:
//!
//! ```text
//! DIR/..2025_06_01_12_00_00.000000001/{tls.crt,tls.key,ca.crt,ca.key}   one generation
//! DIR/..data -> ..2025_06_01_12_00_00.000000001                         swapped atomically
//! DIR/tls.crt -> ..data/tls.crt   (likewise tls.key, ca.crt, ca.key)     created once
//! ```
//!
//! [`write_dir`] fills a fresh timestamped generation directory, points a `..data_tmp` symlink at
//! it and `rename`s that over `..data`: a reader opening `DIR/tls.crt` sees either the old or the
//! new generation, never a mix of one's certificate and the other's key. Watchers should watch
//! `DIR` (the `..data` rename), not the file. Unix only.

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, symlink};
use std::path::{Path, PathBuf};

use time::OffsetDateTime;

use crate::{Bundle, CertError};

/// The symlink naming the current generation directory.
pub const DATA_DIR: &str = "..data";
/// The serving certificate (`kubernetes.io/tls` Secret key).
pub const CERT_FILE: &str = "tls.crt";
/// The serving certificate's private key (`kubernetes.io/tls` Secret key), mode 0600.
pub const KEY_FILE: &str = "tls.key";
/// The CA certificate, i.e. what `caBundle` carries.
pub const CA_CERT_FILE: &str = "ca.crt";
/// The CA private key, mode 0600; kept so the directory can [`renew_leaf`](crate::renew_leaf)
/// itself (every generation replaces all files, so it must travel with each one).
pub const CA_KEY_FILE: &str = "ca.key";

const DATA_TMP: &str = "..data_tmp";

/// Writes `bundle` into `dir` (created if missing) as a new generation and atomically makes it
/// current; older generation directories are removed afterwards. Key files are mode 0600.
pub fn write_dir(bundle: &Bundle, dir: &Path) -> Result<(), CertError> {
    fs::create_dir_all(dir).map_err(CertError::io("creating", dir))?;
    let generation = create_generation_dir(dir)?;
    let gen_path = dir.join(&generation);
    for (name, content, mode) in [
        (CERT_FILE, &bundle.cert_pem, 0o644),
        (KEY_FILE, &bundle.key_pem, 0o600),
        (CA_CERT_FILE, &bundle.ca_cert_pem, 0o644),
        (CA_KEY_FILE, &bundle.ca_key_pem, 0o600),
    ] {
        write_new_file(&gen_path.join(name), content.as_bytes(), mode)?;
    }

    replace_symlink(dir, Path::new(&generation), DATA_DIR, DATA_TMP)?;

    for name in [CERT_FILE, KEY_FILE, CA_CERT_FILE, CA_KEY_FILE] {
        let target = Path::new(DATA_DIR).join(name);
        let link = dir.join(name);
        match fs::read_link(&link) {
            Ok(existing) if existing == target => {}
            Ok(_) => replace_symlink(dir, &target, name, &format!("..{name}_tmp"))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                symlink(&target, &link).map_err(CertError::io("symlinking", &link))?;
            }
            // Exists but is not a symlink (e.g. a plain file from an older tool): replace it.
            Err(_) => replace_symlink(dir, &target, name, &format!("..{name}_tmp"))?,
        }
    }

    remove_old_generations(dir, &generation)
}

/// Reads the bundle that `DIR/{ca.crt,ca.key,tls.crt,tls.key}` currently resolve to.
pub fn read_dir(dir: &Path) -> Result<Bundle, CertError> {
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read_to_string(&path).map_err(CertError::io("reading", path))
    };
    Ok(Bundle {
        ca_cert_pem: read(CA_CERT_FILE)?,
        ca_key_pem: read(CA_KEY_FILE)?,
        cert_pem: read(CERT_FILE)?,
        key_pem: read(KEY_FILE)?,
    })
}

/// Creates `DIR/..<UTC timestamp>` (the kubelet's naming) and returns its file name.
fn create_generation_dir(dir: &Path) -> Result<String, CertError> {
    let now = OffsetDateTime::now_utc();
    let stamp = format!(
        "..{:04}_{:02}_{:02}_{:02}_{:02}_{:02}.{:09}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.nanosecond()
    );
    let mut attempt = 0u32;
    loop {
        let name = if attempt == 0 {
            stamp.clone()
        } else {
            format!("{stamp}_{attempt}")
        };
        let path = dir.join(&name);
        match fs::create_dir(&path) {
            Ok(()) => return Ok(name),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 1000 => attempt += 1,
            Err(e) => return Err(CertError::io("creating", path)(e)),
        }
    }
}

fn write_new_file(path: &Path, content: &[u8], mode: u32) -> Result<(), CertError> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(CertError::io("creating", path))?;
    file.write_all(content)
        .and_then(|()| file.sync_all())
        .map_err(CertError::io("writing", path))
}

/// Atomically makes `DIR/name` a symlink to `target` via a temporary link `DIR/tmp_name`.
fn replace_symlink(dir: &Path, target: &Path, name: &str, tmp_name: &str) -> Result<(), CertError> {
    let tmp = dir.join(tmp_name);
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(CertError::io("removing stale", tmp)(e)),
    }
    symlink(target, &tmp).map_err(CertError::io("symlinking", &tmp))?;
    let link = dir.join(name);
    fs::rename(&tmp, &link).map_err(CertError::io("renaming onto", link))
}

/// Removes `DIR/..<digit>*` directories other than `current`.
fn remove_old_generations(dir: &Path, current: &str) -> Result<(), CertError> {
    let entries = fs::read_dir(dir).map_err(CertError::io("listing", dir))?;
    for entry in entries {
        let entry = entry.map_err(CertError::io("listing", dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let is_generation = name
            .strip_prefix("..")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
        if !is_generation || name == current {
            continue;
        }
        let path: PathBuf = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            fs::remove_dir_all(&path).map_err(CertError::io("removing", path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::{CertSpec, generate, renew_leaf};

    fn generations(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("..") && n != DATA_DIR)
            .collect();
        names.sort();
        names
    }

    #[test]
    fn writes_the_secret_volume_layout() {
        let tmp = tempfile::tempdir().unwrap();
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        write_dir(&bundle, tmp.path()).unwrap();

        let generation = fs::read_link(tmp.path().join(DATA_DIR)).unwrap();
        assert!(
            generation.to_str().unwrap().starts_with("..2"),
            "{generation:?}"
        );
        assert!(generation.is_relative());
        for name in [CERT_FILE, KEY_FILE, CA_CERT_FILE, CA_KEY_FILE] {
            let link = fs::read_link(tmp.path().join(name)).unwrap();
            assert_eq!(link, Path::new("..data").join(name));
        }
        assert_eq!(read_dir(tmp.path()).unwrap(), bundle);
        assert_eq!(
            generations(tmp.path()),
            vec![generation.to_str().unwrap().to_owned()]
        );
    }

    #[test]
    fn private_keys_are_readable_by_the_owner_only() {
        let tmp = tempfile::tempdir().unwrap();
        write_dir(&generate(&CertSpec::for_loopback()).unwrap(), tmp.path()).unwrap();
        for (name, want) in [(KEY_FILE, 0o600), (CA_KEY_FILE, 0o600), (CERT_FILE, 0o644)] {
            let mode = fs::metadata(tmp.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, want & 0o077, "{name}: {mode:o}");
            assert_eq!(mode & 0o600, 0o600, "{name}: {mode:o}");
        }
    }

    #[test]
    fn a_second_write_swaps_data_and_the_stable_path_shows_the_newest_content() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = CertSpec::for_loopback();
        let first = generate(&spec).unwrap();
        write_dir(&first, tmp.path()).unwrap();
        let first_gen = fs::read_link(tmp.path().join(DATA_DIR)).unwrap();
        // An open handle keeps reading the generation it opened, like a reader mid-reload.
        let mut held = fs::File::open(tmp.path().join(CERT_FILE)).unwrap();

        let second = renew_leaf(&first.ca_cert_pem, &first.ca_key_pem, &spec).unwrap();
        write_dir(&second, tmp.path()).unwrap();
        let second_gen = fs::read_link(tmp.path().join(DATA_DIR)).unwrap();

        assert_ne!(first_gen, second_gen);
        assert_eq!(
            fs::read_to_string(tmp.path().join(CERT_FILE)).unwrap(),
            second.cert_pem
        );
        assert_eq!(read_dir(tmp.path()).unwrap(), second);
        assert!(
            !tmp.path().join(&first_gen).exists(),
            "old generation pruned"
        );
        assert_eq!(
            generations(tmp.path()),
            vec![second_gen.to_str().unwrap().to_owned()]
        );
        let mut old = String::new();
        io::Read::read_to_string(&mut held, &mut old).unwrap();
        assert_eq!(old, first.cert_pem);
    }

    #[test]
    fn many_quick_writes_each_get_their_own_generation() {
        let tmp = tempfile::tempdir().unwrap();
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        for _ in 0..5 {
            write_dir(&bundle, tmp.path()).unwrap();
        }
        assert_eq!(generations(tmp.path()).len(), 1);
        assert_eq!(read_dir(tmp.path()).unwrap(), bundle);
    }

    #[test]
    fn a_plain_file_in_the_way_is_replaced_by_the_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join(CERT_FILE), "stale").unwrap();
        let bundle = generate(&CertSpec::for_loopback()).unwrap();
        write_dir(&bundle, tmp.path()).unwrap();
        assert!(
            fs::symlink_metadata(tmp.path().join(CERT_FILE))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(tmp.path().join(CERT_FILE)).unwrap(),
            bundle.cert_pem
        );
    }

    #[test]
    fn creates_a_missing_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("nested/certs");
        write_dir(&generate(&CertSpec::for_loopback()).unwrap(), &dir).unwrap();
        assert!(dir.join(CERT_FILE).exists());
    }

    #[test]
    fn reading_an_empty_directory_names_the_missing_file() {
        let tmp = tempfile::tempdir().unwrap();
        let err = read_dir(tmp.path()).unwrap_err();
        assert!(matches!(err, CertError::Io { .. }));
        assert!(err.to_string().contains(CA_CERT_FILE), "{err}");
    }
}

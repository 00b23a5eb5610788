//! Files readable by their owner alone, whatever the process umask: a database of payments holds
//! keys, amounts and card tokens, and a merchant's key can create charges.
//!
//! Folders are `0700` and files `0600`. A folder or file found more open is tightened, with a
//! warning that says so. Elsewhere than Unix these do nothing.

use std::io;
use std::path::Path;

/// Creates `dir` (and its parents) `0700`, and tightens `dir` itself if it existed more open.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    tighten(dir, 0o700)
}

/// Creates `path` empty as `0600` if it does not exist (without truncating one that does), and
/// tightens it to `0600` if it is more open.
pub fn create_file(path: &Path) -> io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?;
    tighten(path, 0o600)
}

/// Replaces `path` with `bytes`, `0600`, atomically and durably: the bytes go to a temporary file
/// beside it, which is synced and then renamed over `path`, and the folder is synced. A crash or
/// a power cut leaves the old file or the new one whole, never an empty or half-written one (a
/// truncated `config.json` would keep the app from starting).
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a file name is needed"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = (|| {
        let mut f = options.open(&tmp)?;
        tighten(&tmp, 0o600)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Makes a rename or a new file in `dir` durable (a no-op where folders cannot be synced).
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Makes `path` at most `mode` (a file `0600`, a folder `0700`) if it exists and is more open.
pub fn tighten(path: &Path, mode: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let now = meta.permissions().mode() & 0o777;
        if now & !mode != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(now & mode))?;
            tracing::warn!(
                path = %path.display(),
                from = format!("{now:o}"),
                to = format!("{:o}", now & mode),
                "tightened permissions: only the owner may read this"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// The database file and its `-wal` and `-shm` companions.
pub fn tighten_database(db: &Path) -> io::Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        tighten(Path::new(&p), 0o600)?;
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_more_open_file_or_folder_is_tightened_and_a_new_one_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let open_dir = dir.path().join("aberta");
        std::fs::create_dir(&open_dir).unwrap();
        std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        create_dir(&open_dir).unwrap();
        assert_eq!(mode(&open_dir), 0o700);
        let f = open_dir.join("x.db");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        tighten_database(&f).unwrap();
        assert_eq!(mode(&f), 0o600);
        let fresh = open_dir.join("a").join("b");
        create_dir(&fresh).unwrap();
        assert_eq!(mode(&fresh), 0o700);
        assert_eq!(mode(&open_dir.join("a")), 0o700);
        let new = open_dir.join("novo");
        write_file(&new, b"segredo").unwrap();
        assert_eq!(mode(&new), 0o600);
        assert_eq!(std::fs::read(&new).unwrap(), b"segredo");
    }

    #[test]
    fn a_rewrite_replaces_the_whole_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, b"{\"longo\": \"conteudo antigo bem maior\"}").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_file(&path, b"{}").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        assert_eq!(mode(&path), 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("config.json")]);
    }
}

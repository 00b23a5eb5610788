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

/// Writes `bytes` to a new or existing file, `0600`.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    create_file(path)?;
    std::fs::write(path, bytes)
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
}

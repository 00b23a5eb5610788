//! The filesystem itself: every FUSE call passed through to the folder beneath, a file's first
//! change after its last sync copied aside first.

use super::*;

pub(super) fn errno(e: &io::Error) -> libc::c_int {
    e.raw_os_error().unwrap_or(libc::EIO)
}

pub(super) fn time_of(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

pub(super) fn attr_of(m: &fs::Metadata) -> FileAttr {
    let ft = m.file_type();
    let kind = if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    };
    FileAttr {
        size: m.size(),
        blocks: m.blocks(),
        atime: time_of(m.atime(), m.atime_nsec()),
        mtime: time_of(m.mtime(), m.mtime_nsec()),
        ctime: time_of(m.ctime(), m.ctime_nsec()),
        crtime: time_of(m.ctime(), m.ctime_nsec()),
        kind,
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        flags: 0,
    }
}

/// Open options for the flags `open(2)` was called with (`O_CREAT`/`O_EXCL` are the kernel's
/// `create`, not this).
pub(super) fn options_of(flags: u32) -> OpenOptions {
    let flags = flags as i32;
    let mut o = OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => o.write(true),
        libc::O_RDWR => o.read(true).write(true),
        _ => o.read(true),
    };
    o.custom_flags(flags & !(libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC));
    o
}

impl FilesystemMT for Volatile {
    fn init(&self, _req: RequestInfo) -> ResultEmpty {
        Ok(())
    }

    fn getattr(&self, _req: RequestInfo, path: &Path, fh: Option<u64>) -> ResultEntry {
        if let Some(fh) = fh {
            if let Some(f) = self.lock().open.get(&fh) {
                return f
                    .metadata()
                    .map(|m| (TTL, attr_of(&m)))
                    .map_err(|e| errno(&e));
            }
        }
        self.attr(path)
    }

    fn chmod(&self, _req: RequestInfo, path: &Path, _fh: Option<u64>, mode: u32) -> ResultEmpty {
        fs::set_permissions(self.real(path), fs::Permissions::from_mode(mode))
            .map_err(|e| errno(&e))
    }

    fn chown(
        &self,
        _req: RequestInfo,
        path: &Path,
        _fh: Option<u64>,
        uid: Option<u32>,
        gid: Option<u32>,
    ) -> ResultEmpty {
        std::os::unix::fs::chown(self.real(path), uid, gid).map_err(|e| errno(&e))
    }

    fn truncate(&self, _req: RequestInfo, path: &Path, fh: Option<u64>, size: u64) -> ResultEmpty {
        let mut state = self.lock();
        self.before_change(&mut state, path)?;
        match fh.and_then(|fh| state.open.get(&fh)) {
            Some(f) => f.set_len(size),
            None => OpenOptions::new()
                .write(true)
                .open(self.real(path))
                .and_then(|f| f.set_len(size)),
        }
        .map_err(|e| errno(&e))
    }

    fn utimens(
        &self,
        _req: RequestInfo,
        path: &Path,
        _fh: Option<u64>,
        atime: Option<SystemTime>,
        mtime: Option<SystemTime>,
    ) -> ResultEmpty {
        let mut times = fs::FileTimes::new();
        if let Some(a) = atime {
            times = times.set_accessed(a);
        }
        if let Some(m) = mtime {
            times = times.set_modified(m);
        }
        File::options()
            .write(true)
            .open(self.real(path))
            .or_else(|_| File::open(self.real(path)))
            .and_then(|f| f.set_times(times))
            .map_err(|e| errno(&e))
    }

    fn readlink(&self, _req: RequestInfo, path: &Path) -> ResultData {
        fs::read_link(self.real(path))
            .map(|p| p.as_os_str().as_bytes().to_vec())
            .map_err(|e| errno(&e))
    }

    fn mkdir(&self, _req: RequestInfo, parent: &Path, name: &OsStr, mode: u32) -> ResultEntry {
        let path = parent.join(name);
        fs::create_dir(self.real(&path)).map_err(|e| errno(&e))?;
        fs::set_permissions(self.real(&path), fs::Permissions::from_mode(mode))
            .map_err(|e| errno(&e))?;
        self.attr(&path)
    }

    fn unlink(&self, _req: RequestInfo, parent: &Path, name: &OsStr) -> ResultEmpty {
        let path = parent.join(name);
        fs::remove_file(self.real(&path)).map_err(|e| errno(&e))?;
        // Durable at once (see the crate's documentation): nothing of it to put back.
        self.lock().durable.remove(&Self::rel(&path));
        Ok(())
    }

    fn rmdir(&self, _req: RequestInfo, parent: &Path, name: &OsStr) -> ResultEmpty {
        fs::remove_dir(self.real(&parent.join(name))).map_err(|e| errno(&e))
    }

    fn rename(
        &self,
        _req: RequestInfo,
        parent: &Path,
        name: &OsStr,
        newparent: &Path,
        newname: &OsStr,
    ) -> ResultEmpty {
        let (from, to) = (parent.join(name), newparent.join(newname));
        fs::rename(self.real(&from), self.real(&to)).map_err(|e| errno(&e))?;
        let mut state = self.lock();
        state.durable.remove(&Self::rel(&to));
        if let Some(d) = state.durable.remove(&Self::rel(&from)) {
            state.durable.insert(Self::rel(&to), d);
        }
        Ok(())
    }

    fn open(&self, _req: RequestInfo, path: &Path, flags: u32) -> ResultOpen {
        let mut state = self.lock();
        if flags as i32 & libc::O_TRUNC != 0 {
            self.before_change(&mut state, path)?;
        }
        let f = options_of(flags)
            .truncate(flags as i32 & libc::O_TRUNC != 0)
            .open(self.real(path))
            .map_err(|e| errno(&e))?;
        state.next_fh += 1;
        let fh = state.next_fh;
        state.open.insert(fh, f);
        Ok((fh, flags))
    }

    fn read(
        &self,
        _req: RequestInfo,
        _path: &Path,
        fh: u64,
        offset: u64,
        size: u32,
        callback: impl FnOnce(ResultSlice<'_>) -> CallbackResult,
    ) -> CallbackResult {
        let mut buf = vec![0u8; size as usize];
        let read = {
            let state = self.lock();
            match state.open.get(&fh) {
                Some(f) => read_at_most(f, &mut buf, offset),
                None => Err(io::Error::from_raw_os_error(libc::EBADF)),
            }
        };
        match read {
            Ok(n) => callback(Ok(&buf[..n])),
            Err(e) => callback(Err(errno(&e))),
        }
    }

    fn write(
        &self,
        _req: RequestInfo,
        path: &Path,
        fh: u64,
        offset: u64,
        data: Vec<u8>,
        _flags: u32,
    ) -> ResultWrite {
        let mut state = self.lock();
        self.before_change(&mut state, path)?;
        let f = state.open.get(&fh).ok_or(libc::EBADF)?;
        f.write_all_at(&data, offset).map_err(|e| errno(&e))?;
        Ok(data.len() as u32)
    }

    fn flush(&self, _req: RequestInfo, _path: &Path, _fh: u64, _lock_owner: u64) -> ResultEmpty {
        Ok(())
    }

    fn release(
        &self,
        _req: RequestInfo,
        _path: &Path,
        fh: u64,
        _flags: u32,
        _lock_owner: u64,
        _flush: bool,
    ) -> ResultEmpty {
        self.lock().open.remove(&fh);
        Ok(())
    }

    fn fsync(&self, _req: RequestInfo, path: &Path, _fh: u64, _datasync: bool) -> ResultEmpty {
        if !self.fsync_delay.is_zero() {
            std::thread::sleep(self.fsync_delay);
        }
        let mut state = self.lock();
        // What the file holds now is what survives a cut.
        state.durable.remove(&Self::rel(path));
        state.syncs += 1;
        Ok(())
    }

    fn opendir(&self, _req: RequestInfo, _path: &Path, _flags: u32) -> ResultOpen {
        Ok((0, 0))
    }

    fn readdir(&self, _req: RequestInfo, path: &Path, _fh: u64) -> ResultReaddir {
        let mut entries = vec![
            DirectoryEntry {
                name: OsString::from("."),
                kind: FileType::Directory,
            },
            DirectoryEntry {
                name: OsString::from(".."),
                kind: FileType::Directory,
            },
        ];
        for e in fs::read_dir(self.real(path)).map_err(|e| errno(&e))? {
            let e = e.map_err(|e| errno(&e))?;
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => FileType::Directory,
                Ok(t) if t.is_symlink() => FileType::Symlink,
                _ => FileType::RegularFile,
            };
            entries.push(DirectoryEntry {
                name: e.file_name(),
                kind,
            });
        }
        Ok(entries)
    }

    fn releasedir(&self, _req: RequestInfo, _path: &Path, _fh: u64, _flags: u32) -> ResultEmpty {
        Ok(())
    }

    fn fsyncdir(&self, _req: RequestInfo, _path: &Path, _fh: u64, _datasync: bool) -> ResultEmpty {
        Ok(())
    }

    fn statfs(&self, _req: RequestInfo, _path: &Path) -> ResultStatfs {
        let s = nix::sys::statvfs::statvfs(&self.backing).map_err(|e| e as libc::c_int)?;
        Ok(Statfs {
            blocks: s.blocks(),
            bfree: s.blocks_free(),
            bavail: s.blocks_available(),
            files: s.files(),
            ffree: s.files_free(),
            bsize: s.block_size() as u32,
            namelen: s.name_max() as u32,
            frsize: s.fragment_size() as u32,
        })
    }

    fn access(&self, _req: RequestInfo, path: &Path, _mask: u32) -> ResultEmpty {
        fs::symlink_metadata(self.real(path))
            .map(|_| ())
            .map_err(|e| errno(&e))
    }

    fn create(
        &self,
        _req: RequestInfo,
        parent: &Path,
        name: &OsStr,
        mode: u32,
        flags: u32,
    ) -> ResultCreate {
        let path = parent.join(name);
        let f = options_of(flags)
            .create(true)
            .write(true)
            .mode(mode)
            .truncate(flags as i32 & libc::O_TRUNC != 0)
            .open(self.real(&path))
            .map_err(|e| errno(&e))?;
        let attr = f.metadata().map(|m| attr_of(&m)).map_err(|e| errno(&e))?;
        let mut state = self.lock();
        state.next_fh += 1;
        let fh = state.next_fh;
        state.open.insert(fh, f);
        Ok(CreatedEntry {
            ttl: TTL,
            attr,
            fh,
            flags,
        })
    }
}

/// Reads up to `buf.len()` bytes at `offset`, fewer only at the end of the file.
pub(super) fn read_at_most(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

//! Where an output's bytes go: a regular file is written through a temporary file beside it and
//! renamed over it once complete; anything else (standard output as `-`, a device, a FIFO, a
//! socket) is written in place, since renaming over it would replace what the command does not own.
//! Standard library and `tempfile` only: examples/particles shares it through `#[path]`.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The name that stands for standard input or output.
pub const STDIO: &str = "-";

/// Whether `path` is `-`, standard input or output.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == STDIO
}

/// An output being written.
pub enum Sink {
    /// A temporary file in the directory of `target`, renamed over it by [`Sink::persist`].
    Staged { file: tempfile::NamedTempFile, target: PathBuf },
    /// Something that is not a regular file, opened and written in place.
    InPlace(File),
    /// Standard output.
    Stdout(io::StdoutLock<'static>),
}

/// Symbolic links limited as the kernel limits them, so that a loop of links ends in an error.
const MAX_LINKS: usize = 40;

/// `path` with its own symbolic links followed to the name they end at, which need not exist
/// yet (a dangling link names the file it will create); the directories on the way stay as
/// they are.
pub fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut path = path.to_owned();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(io::Error::other(format!("more than {MAX_LINKS} symbolic links in a chain: a loop?")))
}

impl Sink {
    /// Opens the output `path` (`-` for standard output). Called before long work starts, so
    /// that an unwritable output fails at once; a FIFO's open waits for its reader, as a shell's
    /// redirection does.
    pub fn open(path: &Path) -> io::Result<Sink> {
        if is_stdio(path) {
            return Ok(Sink::Stdout(io::stdout().lock()));
        }
        // Through links: what the output ends at decides how it is written.
        match fs::metadata(path) {
            Ok(m) if m.is_dir() => return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a directory")),
            Ok(m) if !m.is_file() => return open_in_place(path, &m).map(Sink::InPlace),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        // A regular file, or none yet: the temporary file goes beside the file a link ends at,
        // so that the rename replaces that file and the link stays a link.
        let target = resolve_links(path)?;
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let mut builder = tempfile::Builder::new();
        builder.prefix(".bitonic-vk-");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            // Results, not secrets: the mode `File::create` gives (0666 less the umask), not the
            // owner-only 0600 of a temporary file.
            builder.permissions(fs::Permissions::from_mode(0o666));
        }
        Ok(Sink::Staged { file: builder.tempfile_in(dir)?, target })
    }

    /// Flushes what was written; a staged file is also synced to disk, so that a full disk shows
    /// here and not after the rename.
    pub fn sync(&mut self) -> io::Result<()> {
        self.flush()?;
        match self {
            Sink::Staged { file, .. } => file.as_file().sync_all(),
            Sink::InPlace(_) | Sink::Stdout(_) => Ok(()),
        }
    }

    /// Renames a staged file over its target; an output written in place is already there.
    pub fn persist(self) -> io::Result<()> {
        match self {
            Sink::Staged { file, target } => file.persist(&target).map(drop).map_err(|e| e.error),
            Sink::InPlace(_) | Sink::Stdout(_) => Ok(()),
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Staged { file, .. } => file.write(buf),
            Sink::InPlace(file) => file.write(buf),
            Sink::Stdout(out) => out.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Staged { file, .. } => file.flush(),
            Sink::InPlace(file) => file.flush(),
            Sink::Stdout(out) => out.flush(),
        }
    }
}

/// Opens a device or FIFO for writing, or connects to a socket; never creates or truncates.
fn open_in_place(path: &Path, metadata: &fs::Metadata) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        // open(2) refuses a socket: a listener takes its bytes through a connection.
        if metadata.file_type().is_socket() {
            let stream = std::os::unix::net::UnixStream::connect(path)?;
            return Ok(File::from(std::os::fd::OwnedFd::from(stream)));
        }
    }
    let _ = metadata;
    fs::OpenOptions::new().write(true).open(path)
}

"""Files the Python tools write and read, safe against a shared folder.

Another local user may plant a symlink where an output goes (a shared /tmp, a predictable
name): open(path, "w") would follow it and overwrite whatever it points at. So a whole output
goes to a new file created beside it under a random name with O_EXCL|O_NOFOLLOW, and
os.replace() puts it in place once complete: the rename replaces a planted link instead of
following it, and an interrupted write leaves the old file as it was. Files that grow line by
line (a sweep's state) are opened with O_NOFOLLOW. Inputs are opened with O_NONBLOCK, so that a
FIFO cannot block open() for ever, and must be regular files of a bounded size. The C++ side
does the same in engine/util/output_file.cpp and engine/util/input_file.cpp.
"""
import errno
import json
import os
import secrets
import stat


def write_output(path, data):
    """Writes `data` (str or bytes) to `path` through a temporary file and a rename."""
    folder, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.partial")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def open_append(path):
    """`path` opened for appending text, created if absent. A symlink there is refused (ELOOP),
    and so is anything but a regular file: O_NONBLOCK makes a FIFO fail to open instead of wait."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return os.fdopen(fd, "a", encoding="utf-8")


def read_input(path, max_bytes=16 << 20):
    """The text of `path`, a regular file of at most `max_bytes`. Anything else raises OSError
    whose strerror says what is wrong, as a missing file's does."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # O_NONBLOCK: a FIFO opens at once
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if st.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"{st.st_size} bytes, more than the {max_bytes} read", path)
        return f.read(max_bytes + 1).decode("utf-8", errors="replace")


def read_json(path, error):
    """A JSON input file (read_input), parsed; a file that cannot be read or is not JSON raises
    `error` (an exception class) with one line naming it."""
    try:
        return json.loads(read_input(path))
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror}")
    except ValueError as e:
        raise error(f"{path}: not JSON: {e}")

"""A storage-layer fault injector: real files, with the k-th write-like system call failing.

`FaultyOS(fail_at, error)` stands in for the `os` module behind `impl.fs.OS_FILESYSTEM` (the file
system `impl.wal` and `impl.storage` use by default): it counts
the calls that change files (open, write, pwrite, fsync, ftruncate, replace, unlink) and makes call
number `fail_at` fail. `error` is what it raises: an `OSError` (ENOSPC, EIO: the caller sees it and
must stop) or `Crash` (the process dies right there: nothing after it runs, what was handed to the
OS stays, as after kill -9). A failing pwrite first writes half of its bytes: a torn write.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from hwm.impl import fs as impl_fs

COUNTED = ("open", "write", "pwrite", "fsync", "ftruncate", "replace", "unlink")


class Crash(BaseException):
    """The process died in a system call (BaseException: no `except Exception` catches it)."""


class FaultyOS:
    def __init__(self, fail_at: int | None, error: BaseException | None = None):
        self.fail_at = fail_at
        self.error = error if error is not None else Crash()
        self.calls = 0

    def __getattr__(self, name: str):
        real = getattr(os, name)
        if name not in COUNTED:
            return real

        def call(*args, **kwargs):
            self.calls += 1
            if self.calls == self.fail_at:
                if name == "pwrite" and len(args[1]) > 1:
                    os.pwrite(args[0], bytes(args[1][: len(args[1]) // 2]), args[2])  # torn
                raise self.error
            return real(*args, **kwargs)

        return call


@contextmanager
def faulty_disk(fail_at: int | None, error: BaseException | None = None):
    """Patch the OS file system's `os` for the duration; yields the FaultyOS (its `calls` count)."""
    faulty = FaultyOS(fail_at, error)
    saved = impl_fs.os
    impl_fs.os = faulty
    try:
        yield faulty
    finally:
        impl_fs.os = saved

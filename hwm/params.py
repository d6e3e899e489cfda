"""Command-line parameter types shared by the `hwm` commands: a protocol spec and the paths a command
writes, each checked where it enters (a bad one is exit 2, before any work) and passed on as a value."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from hwm.properties.protocol import ProtocolError, resolve
import hwm.model.variant  # noqa: F401,E402 - lets `resolve` load variants (docs/variants.md)


class ProtocolParam(click.ParamType):
    """A preset name, or a preset with flags changed: `raft,commit=any-generation`, or a variant
    (`file.py:Name`, `package.module:Name`, an installed variant's name: docs/variants.md). The value is the
    spec `resolve` takes (the name, or {"preset": ..., "flags": {...}}); `spec_text` writes it back.
    `runtime`: the protocol must also run on the TCP runtime (hwm node, hwm cluster, hwm controller)."""

    name = "protocol"

    def __init__(self, runtime: bool = False):
        self.runtime = runtime

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        head, *changes = value.split(",")
        target, colon, attr = head.rpartition(":")
        if colon and (target.endswith(".py") or "/" in target):
            # A variant's file, by its absolute path: the spec is resolved again in worker processes.
            head = f"{os.path.abspath(target)}:{attr}"
        try:
            if not changes:
                spec = head
            else:
                flags = {}
                for change in changes:
                    flag, sep, flag_value = change.partition("=")
                    if not sep:
                        raise ProtocolError(f"{change!r} is not flag=value")
                    flags[flag.strip()] = flag_value.strip()
                spec = {"preset": head, "flags": flags}
            protocol = resolve(spec)[1]
        except ProtocolError as e:
            self.fail(str(e), param, ctx)
        if self.runtime:
            from hwm.properties.protocol import without_runtime
            if without_runtime(protocol):
                self.fail(without_runtime(protocol), param, ctx)
        return spec


def spec_text(spec) -> str:
    """A protocol spec as the command line writes it (`ProtocolParam` reads it back), e.g. for the
    `hwm node` processes that `hwm cluster` starts."""
    if isinstance(spec, str):
        return spec
    return ",".join([spec["preset"], *(f"{flag}={value}" for flag, value in spec["flags"].items())])


def _unwritable(directory: Path) -> str | None:
    """Why no file can be created in the existing directory `directory`, or None. Found by creating
    one and removing it: os.access says yes to root everywhere, /proc and read-only mounts included."""
    if not os.access(directory, os.W_OK | os.X_OK):
        return "permission denied"
    try:
        fd, probe = tempfile.mkstemp(prefix=".hwm-write-check-", dir=directory)
    except OSError as e:
        return e.strerror or str(e)
    os.close(fd)
    os.unlink(probe)
    return None


def directory_problem(path: Path) -> str | None:
    """Why a directory cannot be created or written at `path`, or None when it can."""
    try:
        if path.exists():
            if not path.is_dir():
                return f"{path} exists and is not a directory"
            why = _unwritable(path)
            return f"directory {path} is not writable ({why})" if why else None
        ancestor = path.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            return f"cannot create {path}: {ancestor} is not a directory"
        why = _unwritable(ancestor)
        return f"cannot create {path}: directory {ancestor} is not writable ({why})" if why else None
    except OSError as e:  # a path the system refuses to look at (a directory without search permission)
        return f"cannot use {path}: {e.strerror or e}"


def file_problem(path: Path, suffixes: tuple[str, ...] = (), create_parent: bool = False) -> str | None:
    """Why a file cannot be written at `path`, or None when it can: a name with one of `suffixes`
    (any name when empty), not a directory, in a directory that exists (or, with `create_parent`, can
    be created) and takes new files."""
    if suffixes and path.suffix not in suffixes:
        return f"{path}: the file name must end in {', '.join(suffixes)}"
    try:
        if path.is_dir():
            return f"{path} is a directory"
        parent = path.parent
        if create_parent and not parent.exists():
            problem = directory_problem(parent)
            return f"cannot write {path}: {problem}" if problem else None
        if not parent.is_dir():
            return (f"cannot write {path}: directory {parent} does not exist" if not parent.exists()
                    else f"cannot write {path}: {parent} is not a directory")
        why = _unwritable(parent)
        if why:
            return f"cannot write {path}: directory {parent} is not writable ({why})"
        if path.is_file():
            with open(path, "ab"):  # opened for writing, nothing written
                pass
    except OSError as e:
        return f"cannot write {path}: {e.strerror or e}"
    return None


class OutputDir(click.ParamType):
    """A directory to write into, created if missing: checked before any work."""

    name = "directory"

    def convert(self, value, param, ctx):
        path = Path(value)
        problem = directory_problem(path)
        if problem:
            self.fail(problem, param, ctx)
        return path


class OutputFile(click.ParamType):
    """A file to write, with one of `suffixes` (any name when empty), in an existing writable directory
    (one that can be created, with `create_parent`): checked before any work."""

    name = "file"

    def __init__(self, suffixes: tuple[str, ...] = (), create_parent: bool = False):
        self.suffixes, self.create_parent = suffixes, create_parent

    def convert(self, value, param, ctx):
        path = Path(value)
        problem = file_problem(path, self.suffixes, self.create_parent)
        if problem:
            self.fail(problem, param, ctx)
        return path

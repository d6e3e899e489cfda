"""Command-line parameter types shared by the `hwm` commands."""

from __future__ import annotations

import os
from pathlib import Path

import click

from hwm.properties.protocol import ProtocolError, resolve


class ProtocolParam(click.ParamType):
    """A preset name, or a preset with flags changed: `raft,commit=any-generation`."""

    name = "protocol"

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        head, *changes = value.split(",")
        try:
            if not changes:
                resolve(head)
                return head
            flags = {}
            for change in changes:
                flag, sep, flag_value = change.partition("=")
                if not sep:
                    raise ProtocolError(f"{change!r} is not flag=value")
                flags[flag.strip()] = flag_value.strip()
            spec = {"preset": head, "flags": flags}
            resolve(spec)
            return spec
        except ProtocolError as e:
            self.fail(str(e), param, ctx)


def directory_problem(path: Path) -> str | None:
    """Why a directory cannot be created or written at `path`, or None when it can."""
    if path.exists():
        if not path.is_dir():
            return f"{path} exists and is not a directory"
        return None if os.access(path, os.W_OK | os.X_OK) else f"directory {path} is not writable"
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot create {path}: {ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot create {path}: directory {ancestor} is not writable"
    return None


class OutputDir(click.ParamType):
    """A directory to write into, created if missing: checked before any search."""

    name = "directory"

    def convert(self, value, param, ctx):
        path = Path(value)
        problem = directory_problem(path)
        if problem:
            self.fail(problem, param, ctx)
        return path


class OutputFile(click.ParamType):
    """A file to write, with one of `suffixes`, in an existing writable directory: checked before any search."""

    name = "file"

    def __init__(self, suffixes: tuple[str, ...]):
        self.suffixes = suffixes

    def convert(self, value, param, ctx):
        path = Path(value)
        if path.suffix not in self.suffixes:
            self.fail(f"{path}: the file name must end in {', '.join(self.suffixes)}", param, ctx)
        if path.is_dir():
            self.fail(f"{path} is a directory", param, ctx)
        parent = path.parent
        if not parent.is_dir():
            self.fail(f"cannot write {path}: directory {parent} does not exist" if not parent.exists()
                      else f"cannot write {path}: {parent} is not a directory", param, ctx)
        if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
            self.fail(f"cannot write {path}: permission denied", param, ctx)
        return path

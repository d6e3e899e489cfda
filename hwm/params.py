"""Command-line parameter types shared by the `hwm` commands."""

from __future__ import annotations

import click

from properties.protocol import ProtocolError, resolve


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

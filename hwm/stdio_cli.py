"""`hwm node --stdio`: hwm's own replica on stdin/stdout (impl/stdio.py), its options checked here."""

from __future__ import annotations

import os

import click


def run_stdio_node(options: dict) -> int:
    """Check the options `hwm node --stdio` takes (the TCP ones it does not), then serve; the exit status."""
    from hwm.impl.stdio import serve
    from hwm.properties.rules import HookError

    for name, flag in (("server_id", "--id"), ("listen", "--listen"), ("peers", "--peers"),
                       ("controller", "--controller"), ("record", "--record")):
        if options[name]:
            raise click.UsageError(f"{flag} is for the TCP runtime; with --stdio the node learns its id and "
                                   "peers from init, and hwm (or Maelstrom) routes its messages")
    if options["data"] is not None:
        os.environ["HWM_DATA_DIR"] = os.path.abspath(options["data"])
    try:
        return serve(options["protocol"], clock=options["clock"], tick_seconds=options["tick_ms"] / 1000)
    except HookError as error:  # a variant's rule raised in the replica: its one line, exit 2 as hwm check
        click.echo(f"error: {error}", err=True)
        return 2

"""A file a person gave that cannot be read: the one shape of the errors that say so.

The message names the file, the place in it and the field, then why: `seed.json, step 3, field
'server': ...`. A trace names its step (`properties.trace.TraceError`), a recorded run its line
(`properties.events.EventError`), an ITF trace its state and variable (`properties.itf.ItfError`).
"""

from __future__ import annotations


class InputError(ValueError):
    """`file`, then each part of `where` that is given (`step 3`, `field 'server'`), then the reason."""

    def __init__(self, message: str, file=None, *where: str | None):
        self.file, self.reason = file, message
        located = ([str(file)] if file else []) + [w for w in where if w]
        super().__init__(": ".join([", ".join(located), message]) if located else message)

"""Where a variant's code comes from, and how another process gets the same code: the digest of the
file that defines it (a saved trace records it, so a replay after the file changed says so), the copy
a Spark engine ships to its executors, and the spec that loads that copy. A variant's protocol pickles
as its spec, its fallback and its digest (`model.variant.reloaded` loads it again in a process that has
not loaded it), never as the variant's class, which a process without the user's file could not import."""

from __future__ import annotations

import atexit
import hashlib
import inspect
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["TRACE_KEY", "source_file", "digest_of", "recorded", "recorded_of", "source_changed", "fallback_spec",
           "shipment"]

# The key of a saved trace (hwm-trace/1) that records the digest of its variant's file.
TRACE_KEY = "variant_sha256"


def source_file(cls: type) -> Path | None:
    """The file that defines the variant class `cls`, as Python loaded it."""
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:
        path = None
    path = path or getattr(sys.modules.get(cls.__module__), "__file__", None)
    return Path(path).resolve() if path else None


def digest_of(cls: type) -> str | None:
    """The sha256 of the file that defines `cls`, or None when it has none that can be read."""
    path = source_file(cls)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def _variant_kind(protocol) -> type | None:
    kind = type(protocol)
    return kind if getattr(kind, "variant", None) is not None and getattr(kind, "spec", "") else None


def recorded(protocol) -> dict[str, str]:
    """What a saved trace records of `protocol`'s variant beside its spec: the digest of its file (none
    for a preset)."""
    kind = _variant_kind(protocol)
    return {TRACE_KEY: kind.digest} if kind is not None and kind.digest else {}


def recorded_of(spec) -> dict[str, str]:
    """`recorded` of the protocol `spec` names."""
    from hwm.properties.protocol import resolve
    return recorded(resolve(spec)[1])


def source_changed(protocol, saved: Any) -> str | None:
    """Why a trace that recorded the digest `saved` cannot be replayed under `protocol` as it is now: its
    variant's file changed since. None when it did not, or nothing was recorded."""
    kind = _variant_kind(protocol)
    now = digest_of(kind.variant) if kind is not None else None  # the file as it is, not as first loaded
    if kind is None or saved is None or saved == now:
        return None
    where = source_file(kind.variant) or kind.spec
    if now is None:  # gone since this process loaded it
        return f"{where}: no such file"
    return (f"{where} changed since this trace was saved (sha256 {str(saved)[:12]} then, {str(now)[:12]} "
            f"now): replay it under the variant as it is now with --protocol {kind.spec}")


# ----------------------------------------------------------- other processes
def fallback_spec(kind: type) -> str:
    """The spec that loads the variant from what `shipment` sent, where its own spec does not load (an
    executor without the user's file, module or installed package)."""
    cls = kind.variant
    target, colon, attr = kind.spec.rpartition(":")
    if colon and (target.endswith(".py") or "/" in target or "\\" in target):
        return f"{_shipped_name(kind)}:{attr}"
    return f"{cls.__module__}:{cls.__qualname__}"


def _shipped_name(kind: type) -> str:
    """The module name a variant's file is shipped under: its digest in it, so two files of one name
    (or one file before and after an edit) never meet in an executor."""
    return f"hwm_variant_{Path(kind.spec.rpartition(':')[0]).stem}_{(kind.digest or '0' * 12)[:12]}"


def shipment(protocol) -> Path | None:
    """A file to send to processes on other machines (Spark's `addPyFile`) so that `model.variant.reloaded`
    finds the variant there (by `fallback_spec`): the variant's file under its shipped module name, or a zip
    of the package its module belongs to. None for a preset."""
    kind = _variant_kind(protocol)
    if kind is None:
        return None
    cls = kind.variant
    folder = Path(tempfile.mkdtemp(prefix="hwm-variant-"))
    atexit.register(shutil.rmtree, folder, True)  # Spark serves it to executors from here while this process runs
    target, colon, _ = kind.spec.rpartition(":")
    if colon and (target.endswith(".py") or "/" in target or "\\" in target):
        shipped = folder / f"{_shipped_name(kind)}.py"
        shipped.write_bytes(source_file(cls).read_bytes())
        return shipped
    top = cls.__module__.split(".")[0]
    module = sys.modules[top]
    if not hasattr(module, "__path__"):  # a module of its own, not in a package
        shipped = folder / Path(module.__file__).name
        shipped.write_bytes(Path(module.__file__).read_bytes())
        return shipped
    shipped = folder / f"{top}-{(kind.digest or '')[:12]}.zip"
    with zipfile.ZipFile(shipped, "w", zipfile.ZIP_DEFLATED) as z:
        for root in module.__path__:
            for path in sorted(Path(root).rglob("*.py")):
                z.write(path, f"{top}/{path.relative_to(root).as_posix()}")
    return shipped

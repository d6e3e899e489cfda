"""The fast successor backend: the models of every system (`RaftModel`, `ZabModel`, `BookKeeperModel`,
`KafkaModel`, and each of the raft, ZAB and Kafka models on a network that partitions, with
`check_quorum`, `lease_reads` and `controller_fencing`) compiled with Numba over packed rows.

`FastBackend` implements `checker.backend`'s interface for the breadth-first
engine (`CheckOptions(successors="fast")`): batches are 2-D uint8 arrays, one row per
state (`checker.fast.layout`), expanded by one compiled call per chunk
(`checker.fast.kernels.expand`), which gives the same transitions in the same
order, the same bounds and the same fingerprints (BLAKE2b-64 of
`model.encoding`'s canonical bytes) as the reference backend, so counts, parents
and traces are the reference's. The catalogue's properties are checked by
compiled equivalents (`checker.fast.properties`) where one exists and matches the
catalogue's current source; otherwise in Python.

`model/actions.py` stays the specification: tests/checker/test_fast.py compares
successor sets state by state on random reachable states of every preset and
flag value, and the engine's tests compare whole reports on every pin.

On first use the kernels are compiled ahead of time into an extension module in
a cache directory (`checker.fast.aot`), which later processes load without
importing Numba; when that build fails, Numba's JIT runs them, caching its
machine code next to the sources (`cache=True`). `compile_seconds()` reports
either one-off cost apart from the search time.
"""

from hwm.checker.fast.backend import (KNOWN_FLAGS, NOT_COMPILED, NOT_COMPILED_FLAGS, NOT_COMPILED_PARTITIONS,
                                      FastBackend, compile_seconds, unsupported)

__all__ = ["FastBackend", "unsupported", "compile_seconds", "NOT_COMPILED", "NOT_COMPILED_FLAGS",
           "NOT_COMPILED_PARTITIONS", "KNOWN_FLAGS"]

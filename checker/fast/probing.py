"""The visited set's probing loops (`checker.engine.VisitedSet`): open addressing with linear probing
over 64-bit fingerprints, 0 marking an empty slot. Compiled with the kernels (`checker.fast.aot`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def contains(table, keys, found):
    mask = np.uint64(table.size - 1)
    for i in range(keys.size):
        key = keys[i]
        slot = key & mask
        while True:
            held = table[slot]
            if held == key:
                found[i] = True
                break
            if held == 0:
                break
            slot = (slot + np.uint64(1)) & mask


@njit(cache=True, nogil=True)
def place(table, keys):
    mask = np.uint64(table.size - 1)
    for i in range(keys.size):
        slot = keys[i] & mask
        while table[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = keys[i]
    return keys.size

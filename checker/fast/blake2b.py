"""BLAKE2b with an 8-byte digest (RFC 7693), compiled: `model.encoding`'s fingerprint.

`fingerprint_bytes(data)` in `model.encoding` is `blake2b(data, digest_size=8)`
read little-endian; `blake2b64(buf, length)` returns the same 64-bit number for
`buf[:length]`, so the compiled engine's fingerprints are the reference's and
traces, parents and pins carry over unchanged (tests/checker/test_fast.py compares them
with hashlib on random byte strings of every length up to three blocks).
"""

from __future__ import annotations

import numpy as np
from numba import njit

IV = np.array([0x6A09E667F3BCC908, 0xBB67AE8584CAA73B, 0x3C6EF372FE94F82B, 0xA54FF53A5F1D36F1,
               0x510E527FADE682D1, 0x9B05688C2B3E6C1F, 0x1F83D9ABFB41BD6B, 0x5BE0CD19137E2179], dtype=np.uint64)
SIGMA = np.array([
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
    [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
    [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
    [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
    [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
    [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
    [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
    [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
    [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
    [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
], dtype=np.int64)
# Parameter block word 0 for an unkeyed 8-byte digest: fanout 1, depth 1, key 0, digest 8.
PARAM0 = np.uint64(0x01010008)
BLOCK = 128


@njit(cache=True, inline="always")
def _rotr(x, n):
    return (x >> np.uint64(n)) | (x << np.uint64(64 - n))


@njit(cache=True, inline="always")
def _mix(v, a, b, c, d, x, y):
    v[a] = v[a] + v[b] + x
    v[d] = _rotr(v[d] ^ v[a], 32)
    v[c] = v[c] + v[d]
    v[b] = _rotr(v[b] ^ v[c], 24)
    v[a] = v[a] + v[b] + y
    v[d] = _rotr(v[d] ^ v[a], 16)
    v[c] = v[c] + v[d]
    v[b] = _rotr(v[b] ^ v[c], 63)


@njit(cache=True)
def _compress(h, buf, start, length, counter, last, v, m):
    """One block: bytes buf[start:start+length] (zero padded), `counter` bytes hashed so far."""
    for w in range(16):
        m[w] = 0
    for p in range(length):  # little-endian words; a state's encoding is a fraction of a block
        m[p >> 3] |= np.uint64(buf[start + p]) << np.uint64(8 * (p & 7))
    for i in range(8):
        v[i] = h[i]
        v[i + 8] = IV[i]
    v[12] ^= np.uint64(counter)
    if last:
        v[14] = ~v[14]
    for r in range(12):
        s = SIGMA[r % 10]
        _mix(v, 0, 4, 8, 12, m[s[0]], m[s[1]])
        _mix(v, 1, 5, 9, 13, m[s[2]], m[s[3]])
        _mix(v, 2, 6, 10, 14, m[s[4]], m[s[5]])
        _mix(v, 3, 7, 11, 15, m[s[6]], m[s[7]])
        _mix(v, 0, 5, 10, 15, m[s[8]], m[s[9]])
        _mix(v, 1, 6, 11, 12, m[s[10]], m[s[11]])
        _mix(v, 2, 7, 8, 13, m[s[12]], m[s[13]])
        _mix(v, 3, 4, 9, 14, m[s[14]], m[s[15]])
    for i in range(8):
        h[i] ^= v[i] ^ v[i + 8]


@njit(cache=True)
def blake2b64(buf, length, h, v, m):
    """BLAKE2b-64 of buf[:length] as a little-endian uint64; h, v, m are scratch (8, 16, 16 words)."""
    for i in range(8):
        h[i] = IV[i]
    h[0] ^= PARAM0
    done = 0
    while length - done > BLOCK:
        _compress(h, buf, done, BLOCK, done + BLOCK, False, v, m)
        done += BLOCK
    _compress(h, buf, done, length - done, length, True, v, m)
    return h[0]


@njit(cache=True)
def blake2b64_of(buf):
    """Convenience for tests: the fingerprint of a whole uint8 array."""
    h = np.zeros(8, dtype=np.uint64)
    v = np.zeros(16, dtype=np.uint64)
    m = np.zeros(16, dtype=np.uint64)
    return blake2b64(buf, buf.size, h, v, m)

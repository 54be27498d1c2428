"""A seeded permutation, compiled: the row order of a pass (version 2, engine.order).

Written here rather than taken from NumPy because of its cost per call: NumPy's
seeded permutation (a ``SeedSequence``, a ``PCG64`` and ``Generator.permutation``),
paid every pass of every shard, is a sizeable part of a small shard's epoch; this
kernel costs a small fraction of it (docs/TRAINING.md, "The loop", row orders).

The stream is SplitMix64 (Steele, Lea & Flood, 2014; the generator Java's
``SplittableRandom`` and the seeding of xoshiro use) started at a hash of the key,
so every key gives an independent stream and nothing is stored between passes. The
permutation is Durstenfeld's Fisher-Yates shuffle, each index drawn without bias by
Lemire's multiply-and-reject method on 32-bit draws (a shard has fewer than 2^32
rows). Only integer arithmetic: the same permutation on every machine.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = ["permutation"]

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)
_S30, _S27, _S31, _S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)
_TWO32 = np.uint64(1 << 32)


@nb.njit(cache=True, inline="always")
def _mix(z):
    """SplitMix64's output function (a bijection of 64-bit words)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@nb.njit(cache=True)
def _permutation(key, n):
    state = np.uint64(0)
    for i in range(key.shape[0]):
        state = _mix(state ^ (key[i] + _GAMMA))
    out = np.arange(n)
    for i in range(n - 1, 0, -1):  # out[i] <- a uniform pick among out[0..i]
        s = np.uint64(i + 1)
        state += _GAMMA
        m = (_mix(state) >> _S32) * s
        low = m & _LOW32
        if low < s:
            floor = (_TWO32 - s) % s  # 2^32 mod s: the draws that would bias the pick
            while low < floor:
                state += _GAMMA
                m = (_mix(state) >> _S32) * s
                low = m & _LOW32
        j = np.int64(m >> _S32)
        out[i], out[j] = out[j], out[i]
    return out


def permutation(key, n: int) -> np.ndarray:
    """A permutation of ``range(n)`` (int64) determined by ``key`` (non-negative ints)."""
    if not 0 <= n < 1 << 32:
        raise ValueError(f"permutation: n must be in [0, 2**32), got {n}")
    k = np.array([int(v) & 0xFFFFFFFFFFFFFFFF for v in key], dtype=np.uint64)
    return _permutation(k, np.int64(n))

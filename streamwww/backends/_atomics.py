"""Atomic operations on ``int64`` slots, and a wait that yields its core, for the CPU kernels.

The block pass's and the flow pass's threads hand rows to each other through ``int64``
slots: a counter taken with :func:`fetch_add`, a row's ``done`` slot written with
:func:`store_release` after its writes to ``W`` and read with :func:`load_acquire` before
another row reads them.  Numba has no atomic operations of its own: these are LLVM's
(``atomicrmw``, atomic loads and stores), emitted by ``@intrinsic``s.

:func:`wait_for` spins on a slot, then gives its core away (``sched_yield``) between reads:
on a machine with more threads than free cores the thread being waited for may be off its
core, and a spinning waiter would hold a core it needs.  ``sched_yield`` is POSIX's (libc
resolves it in the process; a symbol, so the compiled kernels stay cacheable); on Windows
the wait only spins.
"""

from __future__ import annotations

import sys

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["fetch_add", "load_acquire", "store_release", "wait_for", "SPINS"]

SPINS = 1 << 12  # reads of the slot before each yield of the core


def _item_ptr(context, builder, aryty, ary, i, ity):
    """The address of ``ary[i]`` (no bounds check)."""
    a = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, a, [context.cast(builder, i, ity, types.intp)],
                                    wraparound=False)


def _int64_vector(arr) -> bool:
    return isinstance(arr, types.Array) and arr.dtype == types.int64 and arr.ndim == 1


@intrinsic
def fetch_add(typingctx, arr, i, v):
    """``arr[i] += v`` as one atomic operation (sequentially consistent); returns the value before."""
    def codegen(context, builder, sig, args):
        ptr = _item_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        return builder.atomic_rmw("add", ptr, context.cast(builder, args[2], sig.args[2], types.int64), "seq_cst")
    if not _int64_vector(arr):
        return None
    return types.int64(arr, i, v), codegen


@intrinsic
def load_acquire(typingctx, arr, i):
    """``arr[i]`` read atomically, with acquire order (the writes before the matching
    :func:`store_release` are seen after it)."""
    def codegen(context, builder, sig, args):
        ptr = _item_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        return builder.load_atomic(ptr, "acquire", 8)
    if not _int64_vector(arr):
        return None
    return types.int64(arr, i), codegen


@intrinsic
def store_release(typingctx, arr, i, v):
    """``arr[i] = v`` written atomically, with release order."""
    def codegen(context, builder, sig, args):
        ptr = _item_ptr(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        builder.store_atomic(context.cast(builder, args[2], sig.args[2], types.int64), ptr, "release", 8)
        return context.get_dummy_value()
    if not _int64_vector(arr):
        return None
    return types.void(arr, i, v), codegen


@intrinsic
def _yield_core(typingctx):
    """Give the core to another runnable thread (POSIX ``sched_yield``; nothing on Windows)."""
    def codegen(context, builder, sig, args):
        if sys.platform != "win32":
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
            builder.call(fn, [])
        return context.get_dummy_value()
    return types.void(), codegen


@njit(cache=True, nogil=True, inline="always")
def wait_for(arr, i, v):
    """Wait until ``arr[i] == v`` (read with acquire order): :data:`SPINS` reads, then a yield
    of the core before each further :data:`SPINS`."""
    spins = 0
    while load_acquire(arr, i) != v:
        spins += 1
        if spins == SPINS:
            spins = 0
            _yield_core()

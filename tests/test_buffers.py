"""The pool of recycled shard buffers (streamwww._buffers): reuse only when nothing refers to a buffer."""

import threading

import numpy as np
import pytest
import scipy.sparse as sp

from streamwww import _buffers as buffers

BIG = buffers.MIN_BYTES // 8 * 4  # float64 elements: half a MIN_BYTES over it


@pytest.fixture
def scope():
    with buffers.recycling():
        yield
    assert buffers.pooled_bytes() == 0


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_a_freed_buffer_is_lent_again(scope):
    a = buffers.empty(BIG, np.float64)
    where = _address(a)
    del a
    b = buffers.empty(BIG, np.float64)
    assert _address(b) == where
    assert buffers.pooled_bytes() >= b.nbytes


@pytest.mark.parametrize("keep", ["slice", "reshape", "memoryview", "csr"])
def test_a_buffer_with_a_live_view_is_not_lent(scope, keep):
    a = buffers.empty(BIG, np.float64)
    a[...] = 7.0
    held = {"slice": lambda x: x[10:20], "reshape": lambda x: x.reshape(-1, 2),
            "memoryview": memoryview,
            "csr": lambda x: sp.csr_matrix((x[:4], np.arange(4, dtype=np.int32), np.array([0, 4], np.int32)),
                                           shape=(1, 10))}[keep](a)
    del a
    b = buffers.empty(BIG, np.float64)
    b[...] = -1.0
    values = np.asarray(held.data if keep == "csr" else held)
    assert np.all(values == 7.0)  # nothing wrote into the buffer still referenced


def test_shapes_dtypes_and_small_arrays(scope):
    a = buffers.empty((BIG // 4, 4), np.float32)
    assert a.shape == (BIG // 4, 4) and a.dtype == np.float32 and a.flags.c_contiguous
    b = buffers.empty(BIG, np.int32)
    assert not np.shares_memory(a, b)
    small = buffers.empty(10, np.float64)
    assert small.shape == (10,) and buffers.pooled_bytes() == _class_bytes(a) + _class_bytes(b)
    # a size within the same class reuses the buffer; the class is at most 1/8 larger
    where = _address(a)
    del a
    c = buffers.empty((BIG // 4 - 3, 4), np.float32)
    assert _address(c) == where
    assert buffers._size_class(c.nbytes) <= c.nbytes * 9 // 8 + 1


def _class_bytes(a: np.ndarray) -> int:
    return buffers._size_class(a.nbytes)


def test_scipy_keeps_pooled_csr_arrays_without_copies(scope):
    n = BIG
    data = buffers.empty(n, np.float32)
    indices = buffers.empty(n, np.int32)
    indptr = buffers.empty(2, np.int64)
    data[...] = 1.0
    indices[...] = np.arange(n) % 50
    indptr[...] = [0, n]
    X = sp.csr_matrix((data, indices, indptr.astype(np.int32)), shape=(1, 50))
    assert np.shares_memory(X.data, data) and np.shares_memory(X.indices, indices)


def test_the_pool_lends_only_inside_a_recycling_scope(scope):
    a = buffers.empty(BIG, np.float64)
    where = _address(a)
    del a
    with buffers.recycling():  # nested: the outer scope keeps the pool
        b = buffers.empty(BIG, np.float64)
        assert _address(b) == where
        del b
    assert buffers.pooled_bytes() > 0


def test_outside_a_scope_nothing_is_pooled():
    with buffers.recycling():
        pass
    a = buffers.empty(BIG, np.float64)
    assert buffers.pooled_bytes() == 0 and a.base is None


def test_idle_buffers_are_dropped(scope):
    a = buffers.empty(BIG, np.float64)
    del a
    for _ in range(buffers.IDLE_TAKES + 2 * 64):  # other sizes only: the first buffer idles
        buffers.empty(BIG * 2, np.float64)
    assert buffers._size_class(BIG * 8) not in {size for (_, size) in buffers._pool}


def test_threads_never_share_a_live_buffer(scope):
    errors = []

    def work(tag):
        for i in range(300):
            a = buffers.empty(BIG + (i % 3), np.float64)
            a[...] = tag
            if not np.all(a == tag):
                errors.append(tag)
            del a

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_a_held_beta_reuses_the_copy_before_it(scope):
    """InMemoryBetas.hold (a late certificate's epoch start) gives the copy before back to the
    pool first: one held copy of beta at a time, in pages already mapped, however many epochs
    hold; a rewind returns the held values."""
    from streamwww.state.betas import InMemoryBetas

    betas = InMemoryBetas(1, [BIG // 4], 5)
    betas.get(0)[...] = 1.0
    betas.hold()
    first = _address(betas._held[0])
    betas.get(0)[...] = 2.0
    betas.hold()
    assert _address(betas._held[0]) == first
    assert buffers.pooled_bytes() == buffers._size_class(betas.get(0).nbytes)  # one copy pooled, not two
    betas.get(0)[...] = 3.0
    betas.rewind()
    assert np.all(betas.get(0) == 2.0)

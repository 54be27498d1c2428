r"""CUDA backend: ``W`` resident on the GPU, shards streamed in, exact kernels in numba-cuda.

Same interface as :class:`streamwww.backends.cpu.CPUBackend` (see
:class:`streamwww.backends.base.Backend`); the driver never branches on the device.
Both losses: Weston-Watkins (the Walrus step, or Shark's) and Crammer-Singer (the
simplex step, ``solver=SIMPLEX``; its hinge, ``loss=CS_LOSS``), with the CPU's
results up to rounding (:mod:`streamwww.backends._cuda_kernels`).

Importing this module is cheap and imports no CUDA library: :func:`unavailable_reason`
answers "can the GPU be used?" from the installed packages and the CUDA driver
(``cuInit`` / ``cuDeviceGetCount`` through ``ctypes``), and numba-cuda is imported
only when a :class:`CUDABackend` is created.

Data movement (docs/gpu.md has the picture):

- ``W[M, D, k]`` (float64) is allocated once on the device and updated in place by
  every pass; ``to_host`` copies it back.
- ``put_block`` / ``put_beta`` copy a shard (dense or CSR) and its ``beta`` through
  two pinned host staging buffers, in chunks, with asynchronous copies on a
  *copy stream*; kernels run on a separate *compute stream* that waits on an event
  recorded after the copies.  A driver that puts shard ``s + 1`` before it calls
  ``get_beta`` for shard ``s`` therefore overlaps the next shard's transfer with the
  current shard's passes.  Device buffers are recycled through a small pool (a
  recycled buffer is rewritten only after the kernels that read it are done), so a
  stream of shards does not allocate and free device memory per shard.
- A host :class:`~streamwww.backends.base.Block` that is put again while it is
  still alive (in-memory data: the same shard every epoch) stays resident on the
  device within a byte budget instead of being copied again.  Blocks are treated
  as immutable once put.
- ``get_beta`` copies ``beta`` back (compute stream, after the passes) into a new
  host array for the driver to store on disk.

Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the same code runs with
streams and events as no-ops; ``device='cuda'`` accepts the simulator, ``device='auto'``
never picks it.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import sys
import threading
import time
import weakref
from typing import Any

import numpy as np
import scipy.sparse as sp

from streamwww.backends.base import Block, model_splits
from streamwww.backends.rowmath import CS_NEAR, PINS, SETS
from streamwww.errors import DeviceUnavailableError
from streamwww.solvers import CS_LOSS, WW_LOSS

logger = logging.getLogger(__name__)

__all__ = ["CUDABackend", "unavailable_reason", "simulator_enabled", "fix_simulator_shared_memory_race"]

_INSTALL_HINT = "install the GPU extra: pip install 'streamwww[gpu]'"


# --------------------------------------------------------------------------- availability
def simulator_enabled() -> bool:
    """Whether numba-cuda runs (or will run) the CUDA simulator in this process."""
    mod = sys.modules.get("numba.cuda")
    if mod is not None:
        try:
            from numba.cuda.core import config

            return bool(config.ENABLE_CUDASIM)
        except Exception:  # pragma: no cover - very old numba-cuda
            return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _driver_reason() -> str | None:
    """Ask the CUDA driver (through ctypes) whether there is a GPU; ``None`` if there is."""
    if sys.platform == "darwin":
        return "CUDA is not available on macOS"
    names = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return f"no CUDA driver / GPU found ({names[0]} could not be loaded)"
    rc = lib.cuInit(0)
    if rc == 100:  # CUDA_ERROR_NO_DEVICE
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hint = f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        return f"the CUDA driver found no GPU{hint}"
    if rc != 0:
        return f"the CUDA driver failed to initialize (cuInit error {rc})"
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value == 0:
        return "the CUDA driver found no GPU"
    return None


def unavailable_reason(auto: bool = False) -> str | None:
    """Why the CUDA backend cannot be used here, or ``None`` when it can.

    Cheap and never raises; imports no CUDA library.

    Parameters
    ----------
    auto : bool, default=False
        Ask on behalf of ``device='auto'``: the CUDA simulator
        (``NUMBA_ENABLE_CUDASIM=1``) is usable for an explicit ``device='cuda'`` but
        is never chosen automatically.
    """
    try:
        if importlib.util.find_spec("numba_cuda") is None:
            return f"numba-cuda is not installed ({_INSTALL_HINT})"
        if importlib.util.find_spec("cuda") is None or importlib.util.find_spec("cuda.bindings") is None:
            return f"cuda-bindings (NVIDIA's CUDA Python bindings) is not installed ({_INSTALL_HINT})"
        if simulator_enabled():
            if auto:
                return ("device='auto' does not choose Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1); "
                        "ask for device='cuda' to use it")
            return None
        return _driver_reason()
    except Exception as exc:  # noqa: BLE001 - a probe must not raise
        return f"the CUDA availability check failed: {type(exc).__name__}: {exc}"


def fix_simulator_shared_memory_race() -> None:
    """Make the CUDA simulator's ``cuda.shared.array`` thread-safe (idempotent).

    The simulator runs one Python thread per CUDA thread; every thread calls
    ``cuda.shared.array`` and the first one to reach a source line creates the
    array, but the check-then-insert is not locked.  When two threads race there
    (rarely, with several threads per block), they get *different*
    "shared" arrays and the block computes garbage.  This replaces the method by
    the same logic under a lock (and a cheaper caller lookup).  Only used under
    ``NUMBA_ENABLE_CUDASIM=1``.
    """
    try:
        from numba.cuda.simulator import kernelapi
    except Exception:  # noqa: BLE001 - not the simulator
        return
    cls = getattr(kernelapi, "FakeCUDAShared", None)
    if cls is None or getattr(cls.array, "_streamwww_locked", False):
        return
    original = cls.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0 or not hasattr(self, "_allocations"):
            return original(self, shape, dtype, alignment)
        from numba.core import types
        from numba.np import numpy_support

        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        frame = sys._getframe(1)
        caller = (frame.f_code.co_filename, frame.f_lineno)
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                res = np.empty(shape, dtype)
                self._allocations[caller] = res
        return res

    array._streamwww_locked = True
    cls.array = array


# --------------------------------------------------------------------------- device objects
class DeviceBlock:
    """A shard on the device (what :meth:`CUDABackend.put_block` returns).

    Dense rows are stored flattened (``data = X.ravel()``, ``ncols = d``); CSR rows as
    ``data, indices, indptr``, with the most nonzeros of a row (``max_row_nnz``: the block
    pass's scratch).  ``ready`` is an event after the copies.
    """

    def __init__(self, data, indices, indptr, ncols, y, sqnorms, n_rows, is_sparse, ready, nbytes,
                 weights=None, trains=None, max_row_nnz=0):
        self.max_row_nnz = int(max_row_nnz)
        self.weights = weights  # row weights, or a 0-length array: all 1
        self.trains = trains  # cross-validation split bits, or a 0-length array: none
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.ncols = int(ncols)
        self.y = y
        self.sqnorms = sqnorms
        self.n_rows = int(n_rows)
        self.is_sparse = bool(is_sparse)
        self.ready = ready
        self.nbytes = int(nbytes)


class DeviceBeta:
    """A shard's ``beta[M, n, k-1]`` on the device (what :meth:`CUDABackend.put_beta` returns)."""

    def __init__(self, array, ready):
        self.array = array
        self.ready = ready

    @property
    def shape(self):
        return tuple(self.array.shape)


class _Stager:
    """Host <-> device copies through two pinned buffers used alternately, in chunks.

    A buffer is refilled only after the copy that last used it has completed (an
    event per buffer), so host copies into one buffer overlap the DMA of the other,
    and pinned memory stays bounded (2 x ``chunk_bytes``) whatever the shard size.
    """

    def __init__(self, cuda, chunk_bytes: int):
        self._cuda = cuda
        self._chunk = int(chunk_bytes)
        self._bufs = [None, None]
        self._events = [None, None]
        self._next = 0

    def _slot(self, nbytes: int):
        i = self._next
        self._next ^= 1
        ev = self._events[i]
        if ev is not None:
            ev.synchronize()
        buf = self._bufs[i]
        if buf is None or buf.nbytes < nbytes:
            size = max(nbytes, min(self._chunk, 1 << 20))
            buf = self._cuda.pinned_array(size, dtype=np.uint8)
            self._bufs[i] = buf
        return i, buf

    def _mark(self, i, stream):
        ev = _event(self._cuda)
        ev.record(stream)
        self._events[i] = ev

    def h2d(self, host: np.ndarray, dev, stream) -> None:
        """Copy the 1-D contiguous ``host`` into the 1-D device array ``dev`` (same length)."""
        n = host.shape[0]
        per = max(1, self._chunk // host.itemsize)
        for start in range(0, n, per):
            cnt = min(per, n - start)
            i, buf = self._slot(cnt * host.itemsize)
            view = buf[:cnt * host.itemsize].view(host.dtype)
            np.copyto(view, host[start:start + cnt])
            dev[start:start + cnt].copy_to_device(view, stream=stream)
            self._mark(i, stream)

    def d2h(self, dev, out: np.ndarray, stream) -> None:
        """Copy the 1-D device array ``dev`` into the 1-D host array ``out``; returns when done."""
        n = out.shape[0]
        per = max(1, self._chunk // out.itemsize)
        pending = []  # (slot, view, start, cnt), at most two in flight
        for start in range(0, n, per):
            cnt = min(per, n - start)
            if len(pending) == 2:
                self._drain(pending.pop(0), out)
            i, buf = self._slot(cnt * out.itemsize)
            view = buf[:cnt * out.itemsize].view(out.dtype)
            dev[start:start + cnt].copy_to_host(view, stream=stream)
            self._mark(i, stream)
            pending.append((i, view, start, cnt))
        for item in pending:
            self._drain(item, out)

    def _drain(self, item, out):
        i, view, start, cnt = item
        self._events[i].synchronize()
        out[start:start + cnt] = view


class _DevicePool:
    """Recycles device buffers (1-D, by dtype) so streaming shards does not malloc/free each time.

    A buffer given back carries an event recorded on the compute stream at that
    moment (after every kernel that could read it); whoever takes it makes its own
    stream wait on that event before writing.
    """

    def __init__(self, cuda, compute_stream, max_free: int = 8):
        self._cuda = cuda
        self._compute = compute_stream
        self._free: list[tuple[Any, Any]] = []
        self._max_free = max_free
        self._lock = threading.Lock()  # buffers come back from finalizers, on any thread

    def take(self, n: int, dtype, stream):
        dtype = np.dtype(dtype)
        n = max(int(n), 1)
        with self._lock:
            best = -1
            for j, (buf, _) in enumerate(self._free):
                cap = buf.shape[0]
                if buf.dtype == dtype and n <= cap <= 2 * n + 4096:
                    if best < 0 or cap < self._free[best][0].shape[0]:
                        best = j
            hit = self._free.pop(best) if best >= 0 else None
        if hit is not None:
            buf, ev = hit
            ev.wait(stream)
            return buf
        try:
            return self._cuda.device_array(n, dtype=dtype, stream=stream)
        except Exception:
            with self._lock:
                if not self._free:
                    raise
                self._free.clear()  # out of memory: drop cached buffers and retry once
            return self._cuda.device_array(n, dtype=dtype, stream=stream)

    def give(self, bufs) -> None:
        try:
            ev = _event(self._cuda)
            ev.record(self._compute)
        except Exception:  # noqa: BLE001 - interpreter shutdown, context gone
            return
        with self._lock:
            for buf in bufs:
                self._free.append((buf, ev))
            del self._free[:-self._max_free]

    def clear(self) -> None:
        with self._lock:
            self._free.clear()


def _event(cuda):
    try:
        return cuda.event(timing=False)
    except TypeError:  # the simulator's Event takes no arguments
        return cuda.event()


def _give_back(pool_ref, bufs):
    pool = pool_ref()
    if pool is not None:
        pool.give(bufs)


# --------------------------------------------------------------------------- the backend
class CUDABackend:
    """Weights on one CUDA GPU; exact BCD kernels in numba-cuda (Weston-Watkins and
    Crammer-Singer): the sequential pass (``block_rows=1``, one thread block a model) and the
    block pass (``block_rows=m > 1``, :mod:`._cuda_block_kernels`: a grid of thread blocks a
    model, the same bits for any launch geometry).

    Parameters
    ----------
    threads_per_block : int, optional
        Threads that cooperate on a row (a power of two, 1..1024).  Default: 64 for
        ``k <= 32``, 128 for ``k <= 128``, else 256; under the CUDA simulator 8 (the
        simulator runs one Python thread per CUDA thread).
    shared_classes : int, default=1024
        Compile-time capacity of the shared-memory per-class vectors; problems with
        ``max(k, next_pow2(k - 1))`` above it keep those vectors in global memory.
    resident_bytes : int, optional
        Device memory allowed for shards kept resident between passes (a shard
        whose host ``Block`` is put again while alive is not copied again).
        Default: a quarter of the free device memory at creation.  0 disables.
    chunk_bytes : int, default=32 MiB
        Size of each of the two pinned staging buffers.
    use_cupy : {'auto', True, False}, default='auto'
        Use CuPy (when importable, never under the simulator) for the hinge loss; the numba-cuda kernels are the fallback.
    parallel_blocks : int or 'auto', optional
        Opt-in *row-parallel* mode (PASSCoDe-style, docs/gpu.md; ``device='cuda-async'``
        of the public API, with ``'auto'``: one block per multiprocessor): this many thread
        blocks per model process different rows at once and add their updates to
        ``W`` with atomics.  Faster for one model, but **not** the sequential
        algorithm: rows see scores that other blocks are changing, results depend
        on scheduling, and convergence is not guaranteed.  ``W == W(beta)`` still
        holds (atomics), so the duality gap the driver reports stays a true
        certificate; each pass is checked (dual must not decrease) and a pass that
        fails the check is undone and redone exactly, after which the backend stays
        exact (``fallbacks`` counts it).  ``None`` (default): exact passes only.
    device_id : int, default=0
    """

    name = "cuda"

    def __init__(self, *, threads_per_block: int | None = None, shared_classes: int = 1024,
                 resident_bytes: int | None = None, chunk_bytes: int = 32 << 20,
                 use_cupy="auto", parallel_blocks: int | None = None, device_id: int = 0):
        if threads_per_block is not None:
            t = int(threads_per_block)
            if t < 1 or t > 1024 or t & (t - 1):
                raise ValueError("The 'threads_per_block' parameter of CUDABackend must be a power of two "
                                 f"in [1, 1024]. Got {threads_per_block!r} instead.")
        sc = int(shared_classes)
        if sc < 1 or sc > 1024:
            raise ValueError("The 'shared_classes' parameter of CUDABackend must be an int in [1, 1024]. "
                             f"Got {shared_classes!r} instead.")
        if use_cupy not in ("auto", True, False):
            raise ValueError("The 'use_cupy' parameter of CUDABackend must be 'auto', True or False. "
                             f"Got {use_cupy!r} instead.")
        if parallel_blocks is not None and parallel_blocks != "auto" and (
                isinstance(parallel_blocks, (bool, str)) or int(parallel_blocks) < 1):
            raise ValueError("The 'parallel_blocks' parameter of CUDABackend must be None, 'auto' or an int >= 1. "
                             f"Got {parallel_blocks!r} instead.")
        reason = unavailable_reason()
        if reason is not None:
            raise DeviceUnavailableError(f"device='cuda' was requested but cannot be used: {reason}.")
        from numba import cuda

        self.simulator = simulator_enabled()
        if self.simulator:
            fix_simulator_shared_memory_race()
        else:
            if not cuda.is_available():
                raise DeviceUnavailableError(
                    "device='cuda' was requested but numba-cuda cannot use the GPU (cuda.is_available() "
                    "is False; run `python -c 'from numba import cuda; cuda.detect()'` for details).")
            cuda.select_device(int(device_id))
        from streamwww.backends import _cuda_kernels as KC

        self._cuda = cuda
        self._K = KC
        self._tpb = None if threads_per_block is None else int(threads_per_block)
        self._kc = sc
        self._stream = cuda.stream()
        self._copy_stream = cuda.stream()
        self._stager = _Stager(cuda, chunk_bytes)
        self._pool = _DevicePool(cuda, self._stream)
        self._scratch: dict[tuple, tuple] = {}
        self._tmp: list = []
        self._dummy_i32 = cuda.to_device(np.zeros(1, dtype=np.int32))
        self._dummy_i64 = cuda.to_device(np.zeros(1, dtype=np.int64))
        self._none_f64 = cuda.device_array(0, dtype=np.float64)  # "no row weights"
        self._none_i64 = cuda.device_array(0, dtype=np.int64)  # "no split bits"
        try:  # the first kernel compiles here, not in the middle of a fit
            self._fill(cuda.device_array(1, dtype=np.float64, stream=self._stream), 0.0)
        except Exception as exc:  # noqa: BLE001 - e.g. numba-cuda 0.30.4 under numpy 2.5 (np.row_stack)
            raise DeviceUnavailableError(
                f"device='cuda' was requested but numba-cuda cannot compile a kernel here "
                f"({type(exc).__name__}: {exc}); docs/gpu.md, 'Installing and selecting the device'") from exc
        if resident_bytes is None:
            try:
                free, _ = cuda.current_context().get_memory_info()
                resident_bytes = int(min(free, 1 << 62) // 4)
            except Exception:  # noqa: BLE001
                resident_bytes = 1 << 30
        self._resident_budget = int(resident_bytes)
        self._resident: dict[int, tuple[Any, DeviceBlock]] = {}  # id(host) -> (weakref, block), LRU order
        self._cupy = None
        if use_cupy is not False and not self.simulator:
            try:
                import cupy  # noqa: F401

                self._cupy = cupy
            except Exception as exc:  # noqa: BLE001
                if use_cupy is True:
                    raise ImportError(f"use_cupy=True but CuPy cannot be imported ({exc}); {_INSTALL_HINT}") from exc
        if parallel_blocks == "auto":
            parallel_blocks = _multiprocessors(cuda, self.simulator)
        self.parallel_blocks = None if parallel_blocks is None else int(parallel_blocks)
        if self.parallel_blocks is not None:
            self.name = "cuda-async"  # what a model's device_ and the run log say (select.get_backend)
        self.fallbacks = 0
        # The block pass's launch: "auto" one cooperative launch a pass, phase by phase
        # ("stepped") where that is refused; its thread blocks a model (None: from the work,
        # within what fits the device at once).  Results are the same bits either way; the
        # tests set both.
        self._block_launch = "auto"
        self._block_grid: int | None = None
        self._block_scratch_cache: dict = {}
        self._coop: dict = {}
        self._backup = None  # device copy of W taken before each row-parallel pass
        try:
            self.device_name = "CUDA simulator" if self.simulator else cuda.get_current_device().name
            if isinstance(self.device_name, bytes):
                self.device_name = self.device_name.decode()
        except Exception:  # noqa: BLE001
            self.device_name = "CUDA device"

    # ------------------------------------------------------------------ configuration
    def _threads_for(self, k: int) -> int:
        """Threads per block used for ``k`` classes."""
        if self._tpb is not None:
            return self._tpb
        if self.simulator:
            return 8
        return 64 if k <= 32 else (128 if k <= 128 else 256)

    def _kc_for(self, tpb: int) -> int:
        """Shared capacity that keeps the kernel's static shared memory within 48 KiB.

        Per block: 3 float64 and 2 int32 vectors of the capacity, 2 float64 vectors of
        ``tpb`` (reductions), a few scalars: ``32 kc + 16 tpb + 40`` bytes.
        """
        return max(1, min(self._kc, (48 * 1024 - 16 * tpb - 64) // 32))

    def _layout(self, k: int, tpb: int | None = None) -> tuple[int, bool]:
        """``(kk, use_shared)``: per-class vector length and whether they fit shared memory."""
        tpb = self._threads_for(k) if tpb is None else tpb
        kk = max(k, self._K.next_pow2(k - 1))
        return kk, kk <= self._kc_for(tpb)

    def _scratch_for(self, slots: int, kk: int):
        key = (slots, kk)
        sc = self._scratch.get(key)
        if sc is None:
            cuda = self._cuda
            sc = (cuda.device_array((slots, 4, kk), dtype=np.float64, stream=self._stream),
                  cuda.device_array((slots, 2, kk), dtype=np.int32, stream=self._stream))
            self._scratch = {key: sc}  # keep only the latest shape
        return sc

    def _small(self, a, dtype):
        """Copy a small host array to a pooled device buffer on the compute stream.

        The buffer goes back to the pool at the next :meth:`_release_small` (after the launch
        that reads it), so repeated passes do not allocate device memory.
        """
        a = np.ascontiguousarray(a, dtype=dtype)
        buf = self._pool.take(a.shape[0], a.dtype, self._stream)
        view = buf[:a.shape[0]]
        view.copy_to_device(a, stream=self._stream)
        self._tmp.append(buf)
        return view

    def _release_small(self):
        if self._tmp:
            self._pool.give(self._tmp)
            self._tmp = []

    # ------------------------------------------------------------------ weights
    def allocate_W(self, n_models: int, n_weight_rows: int, n_classes: int):
        cuda = self._cuda
        W = cuda.device_array((int(n_models), int(n_weight_rows), int(n_classes)), dtype=np.float64,
                              stream=self._stream)
        self._fill(W.reshape(W.size), 0.0)
        return W

    def _fill(self, flat, value):
        n = flat.shape[0]
        if n == 0:
            return
        tpb = 8 if self.simulator else 256
        blocks = max(1, min((n + tpb - 1) // tpb, 1024 if not self.simulator else 1))
        self._K.fill_kernel()[blocks, tpb, self._stream](flat, float(value))

    def put_W(self, W: np.ndarray):
        W = np.ascontiguousarray(W, dtype=np.float64)
        if W.ndim != 3:
            raise ValueError(f"W must have shape (n_models, n_weight_rows, n_classes). Got shape {W.shape} instead.")
        dW = self._cuda.to_device(W, stream=self._stream)
        self._stream.synchronize()
        return dW

    def overlap_pays(self, work: int, block_rows: int = 1) -> bool:
        """No: :meth:`certify_pass` runs its two parts one after the other on the stream."""
        return False

    def copy_W(self, W, out=None):
        """A device copy of device weights (the certificate's ``W_t``), into ``out`` where given."""
        if out is None or tuple(out.shape) != tuple(W.shape):
            out = self._cuda.device_array(W.shape, dtype=np.float64, stream=self._stream)
        out.copy_to_device(W, stream=self._stream)
        return out

    def to_host(self, W) -> np.ndarray:
        out = W.copy_to_host(stream=self._stream)
        self._stream.synchronize()
        return out

    def _sums(self, A, square: bool) -> np.ndarray:
        """``sum(A[m])`` (or of squares) per leading index of a 3-D device array, on the host."""
        M, a, b = A.shape
        tpb = 8 if self.simulator else 256
        nblk = max(1, min((a * b + tpb - 1) // tpb, 2 if self.simulator else 512))
        out = self._cuda.device_array((M, nblk), dtype=np.float64, stream=self._stream)
        if a * b:
            self._K.sum_kernel(tpb, bool(square))[(nblk, M), tpb, self._stream](A, out)
        else:
            self._fill(out.reshape(out.size), 0.0)
        part = out.copy_to_host(stream=self._stream)
        self._stream.synchronize()
        return part.sum(axis=1)

    def sq_frobenius(self, W) -> np.ndarray:
        return self._sums(W, True)

    # ------------------------------------------------------------------ shards
    def put_block(self, block: Block) -> DeviceBlock:
        key = id(block)
        hit = self._resident.get(key)
        if hit is not None and hit[0]() is block:
            self._resident[key] = self._resident.pop(key)  # most recently used
            return hit[1]
        dblock = self._upload(block)
        if 0 < dblock.nbytes <= self._resident_budget:
            self._remember(block, dblock)
        return dblock

    def _remember(self, block, dblock):
        key = id(block)
        self_ref = weakref.ref(self)

        def forget(_ref, key=key):
            me = self_ref()
            if me is not None:
                entry = me._resident.get(key)
                if entry is not None and entry[0] is _ref:
                    del me._resident[key]

        self._resident[key] = (weakref.ref(block, forget), dblock)
        total = sum(b.nbytes for _, b in self._resident.values())
        while total > self._resident_budget and self._resident:
            oldest = next(iter(self._resident))
            total -= self._resident.pop(oldest)[1].nbytes

    def _upload(self, block: Block) -> DeviceBlock:
        st = self._copy_stream
        X = block.X
        y = np.ascontiguousarray(block.y, dtype=np.int32)
        sq = np.ascontiguousarray(block.sqnorms, dtype=np.float64)
        if sp.issparse(X):
            X = X.tocsr() if not isinstance(X, sp.csr_matrix) else X
            if not X.has_canonical_format:  # threads of a row must not share a W entry
                X = X.copy()
                X.sum_duplicates()
            parts = [np.ascontiguousarray(X.data), np.ascontiguousarray(X.indices),
                     np.ascontiguousarray(X.indptr)]
            ncols = X.shape[1]
        else:
            Xd = np.ascontiguousarray(X)
            parts = [Xd.reshape(-1)]
            ncols = Xd.shape[1] if Xd.ndim == 2 else 0
        parts += [y, sq]
        extra = [np.ascontiguousarray(a, dtype=dt) for a, dt in ((block.weights, np.float64),
                                                                 (block.trains, np.int64)) if a is not None]
        parts += extra
        devs = []
        for h in parts:
            d = self._pool.take(h.shape[0], h.dtype, st)
            devs.append(d)
            if h.shape[0]:
                self._stager.h2d(h, d, st)
        ready = _event(self._cuda)
        ready.record(st)
        n = y.shape[0]
        views = [d[:h.shape[0]] for d, h in zip(devs, parts)]
        dweights = views.pop(len(views) - len(extra)) if block.weights is not None else self._none_f64
        dtrains = views.pop() if block.trains is not None else self._none_i64
        if sp.issparse(X):
            data, indices, indptr, dy, dsq = views
        else:
            data, dy, dsq = views
            indices, indptr = self._dummy_i32, self._dummy_i64
        nbytes = sum(h.nbytes for h in parts)
        most = int(np.diff(X.indptr).max()) if sp.issparse(X) and n else 0
        dblock = DeviceBlock(data, indices, indptr, ncols, dy, dsq, n, sp.issparse(X), ready, nbytes,
                             weights=dweights, trains=dtrains, max_row_nnz=most)
        weakref.finalize(dblock, _give_back, weakref.ref(self._pool), devs)
        return dblock

    def put_beta(self, beta: np.ndarray) -> DeviceBeta:
        beta = np.ascontiguousarray(beta, dtype=np.float64)
        if beta.ndim != 3:
            raise ValueError(f"beta must have shape (n_models, n_rows, n_classes - 1). Got shape {beta.shape} instead.")
        st = self._copy_stream
        flat = beta.reshape(-1)
        buf = self._pool.take(flat.shape[0], np.float64, st)
        if flat.shape[0]:
            self._stager.h2d(flat, buf, st)
        ready = _event(self._cuda)
        ready.record(st)
        dbeta = DeviceBeta(buf[:flat.shape[0]].reshape(beta.shape), ready)
        weakref.finalize(dbeta, _give_back, weakref.ref(self._pool), [buf])
        return dbeta

    def get_beta(self, beta: DeviceBeta) -> np.ndarray:
        out = np.empty(beta.shape, dtype=np.float64)
        if out.size:
            beta.ready.wait(self._stream)
            self._stager.d2h(beta.array.reshape(out.size), out.reshape(-1), self._stream)
        return out

    # ------------------------------------------------------------------ training
    shrinks = True  # bcd_pass and hinge_sums take near= (streamwww.engine.shrink)

    def bcd_pass(self, W, block: DeviceBlock, beta: DeviceBeta, Cs, models, order, bias, solver, eps,
                 splits=None, near=None, block_rows: int = 1, pin: bool = False) -> None:
        """One exact BCD pass over ``order`` for each model in ``models`` (asynchronous, on the
        compute stream); ``solver``: ``WALRUS``/``SHARK`` (WW's box) or ``SIMPLEX`` (Crammer-Singer's
        simplex, :mod:`streamwww.solvers`); ``near`` (host ``uint8``, ``(M, n, k - 1)``): shrinking's
        near-flags (engine.shrink; exact steps only, Shark ignores them), ``pin``: rows settled at
        their bounds skipped too (the kernels' ``shrink`` is :data:`.rowmath.PINS`).
        ``block_rows``: 1 the sequential pass (:func:`._cuda_kernels.bcd_kernel`; the row-parallel
        mode instead when ``parallel_blocks`` is set), ``m > 1`` the block pass of ``m`` rows
        (:mod:`._cuda_block_kernels`, the CPU block pass's blocks; it is the pass a run records,
        so it is run whatever ``parallel_blocks`` says)."""
        block_rows = int(block_rows)
        if block_rows < 1:
            raise ValueError(f"block_rows must be an int >= 1. Got {block_rows!r} instead.")
        models = np.ascontiguousarray(models, dtype=np.int64)
        splits = model_splits(splits, W.shape[0])
        order = np.ascontiguousarray(order, dtype=np.int64)
        if models.shape[0] == 0 or order.shape[0] == 0:
            return
        M, D, k = W.shape
        if k < 2:
            raise ValueError(f"W must have at least two classes. Got k={k}.")
        if tuple(beta.shape) != (M, block.n_rows, k - 1):
            raise ValueError(f"beta has shape {tuple(beta.shape)}, expected {(M, block.n_rows, k - 1)}.")
        exact_step = int(solver) != self._K.SHARK  # Walrus or the simplex step
        dnear = None if near is None or not exact_step else \
            (self._cuda.to_device(np.ascontiguousarray(near, dtype=np.uint8), stream=self._stream), PINS if pin else SETS)
        if block_rows > 1:
            self._block_pass(W, block, beta, Cs, models, order, bias, solver, eps, splits, dnear, block_rows)
            return
        if self.parallel_blocks is not None and exact_step:
            self._parallel_pass(W, block, beta, Cs, models, order, bias, solver, eps, splits, dnear)
            return
        self._exact_pass(W, block, beta, Cs, models, order, bias, solver, eps, splits, dnear)

    def _no_near(self):
        """The ``(near, shrink)`` kernel arguments of a pass that does not shrink."""
        if getattr(self, "_empty_near", None) is None:
            self._empty_near = self._cuda.to_device(np.zeros((1, 1, 1), dtype=np.uint8))
        return self._empty_near, 0

    def _exact_pass(self, W, block, beta, Cs, models, order, bias, solver, eps, splits, near=None):
        k = W.shape[2]
        st = self._stream
        block.ready.wait(st)
        beta.ready.wait(st)
        tpb = self._threads_for(k)
        kk, use_shared = self._layout(k, tpb)
        scr_f, scr_i = self._scratch_for(models.shape[0], kk)
        kernel = self._K.bcd_kernel(not block.is_sparse, tpb, self._kc_for(tpb))
        kernel[(1, models.shape[0]), tpb, st](
            W, block.data, block.indices, block.indptr, block.ncols, block.y, block.sqnorms, block.weights,
            block.trains, beta.array, self._small(Cs, np.float64), self._small(splits, np.int64),
            self._small(models, np.int64), self._small(order, np.int64),
            float(bias), int(solver), float(eps), scr_f, scr_i, bool(use_shared), *(near or self._no_near()))
        self._release_small()

    # ------------------------------------------------------------------ the block pass
    def _block_pass(self, W, block, beta, Cs, models, order, bias, solver, eps, splits, near, block_rows):
        """The block pass of ``block_rows`` rows (:mod:`._cuda_block_kernels`): one cooperative
        launch a pass (models in groups that fit the device at once), or phase by phase."""
        from streamwww.backends import _cuda_block_kernels as BK

        st = self._stream
        block.ready.wait(st)
        beta.ready.wait(st)
        k = W.shape[2]
        n = order.shape[0]
        m = min(int(block_rows), n)  # a shard of at most block_rows rows is one block either way
        tpb = self._threads_for(k)
        kc = BK.shared_capacity(self._kc, tpb)
        kk = max(k, self._K.next_pow2(k - 1))
        dense = not block.is_sparse
        slots = 1 if dense else max(1, min(block.data.shape[0], m * block.max_row_nnz))
        if slots >= BK.NONE:  # (a slot is an int32)
            raise ValueError(f"block_rows={block_rows}: a block of this shard holds {slots:,} nonzeros, more than "
                             f"the GPU block pass indexes ({BK.NONE - 1:,}); use fewer block_rows")
        # enough threads for a block's scores and Gram entries, and for its update of W
        per_row = block.ncols if dense else -(-block.data.shape[0] // max(block.n_rows, 1))
        items = max(m * k + m * (m - 1) // 2, (m * per_row + 1) * k)
        want = max(1, -(-items // tpb)) if self._block_grid is None else int(self._block_grid)
        L = models.shape[0]
        dCs, dsplits = self._small(Cs, np.float64), self._small(splits, np.int64)
        dorder, dmodels = self._small(order, np.int64), self._small(models, np.int64)

        def args(group, sc, scr):
            return (W, block.data, block.indices, block.indptr, block.ncols, block.y, block.sqnorms, block.weights,
                    block.trains, beta.array, dCs, dsplits, group, dorder, float(bias), int(solver), float(eps),
                    *(near or self._no_near()), int(m), sc["play"], sc["steps"], sc["nz"], sc["nlive"], sc["S"],
                    sc["U"], sc["G"], sc["nxt"], sc["head"], sc["e2j"], sc["e2p"], *scr, kk <= kc)

        if self._block_launch != "stepped":
            kernel = BK.block_pass_kernel(dense, tpb, kc)
            done = 0
            try:
                def typed():  # the launch's arguments, on tiny arrays of the scratch's types (made once)
                    probe = self._coop.get("probe") or self._coop.setdefault(
                        "probe", self._block_scratch(1, 1, 1, 1, 1, keep=False))
                    return args(dmodels, probe, probe["scr"])

                limit = self._coop_limit(kernel, typed, tpb)
                # models a launch: as many as fit; under the simulator one (it runs a grid's blocks one
                # after another, so a block could not read the other models' counts of blocks)
                size = 1 if limit is None else min(L, limit)
                B = 1 if limit is None else max(1, min(limit // size, want))
                sc = self._block_scratch(size, n, m, k, slots)
                scr = self._scratch_for(size, kk)
                for g0 in range(0, L, size):
                    group = dmodels if size == L else self._small(models[g0:g0 + size], np.int64)
                    kernel[(B, group.shape[0]), tpb, st](*args(group, sc, scr))
                    done += 1
            except Exception as exc:  # noqa: BLE001 - e.g. no cooperative launch here (cudadevrt, grid size)
                if done or self._block_launch == "cooperative":
                    raise
                logger.warning("the block pass's cooperative launch failed (%s: %s); launching it phase by phase "
                               "from now on (the same results)", type(exc).__name__, exc)
                self._block_launch = "stepped"
            else:
                self._release_small()
                return
        sc = self._block_scratch(L, n, m, k, slots)
        full = args(dmodels, sc, self._scratch_for(L, kk))
        kernel = BK.block_step_kernel(dense, tpb, kc)
        kernel[(want, L), tpb, st](BK.LIVE, 0, *full)
        kernel[(1, L), tpb, st](BK.SCAN, 0, *full)
        nlive = sc["nlive"].copy_to_host(stream=st)
        st.synchronize()  # (the blocks' count decides the launches)
        for b in range(int(-(-nlive.max() // m))):
            kernel[(want, L), tpb, st](BK.PREPARE, b, *full)
            kernel[(1, L), tpb, st](BK.CHAIN, b, *full)
            kernel[(want, L), tpb, st](BK.UPDATE, b, *full)
        self._release_small()

    def _coop_limit(self, kernel, typed, tpb):
        """Thread blocks of ``kernel`` the device holds at once (a cooperative grid's most) for
        the launch whose arguments ``typed()`` gives; ``None`` under the simulator, which runs a
        grid's blocks one after another (one block, one model a launch)."""
        if self.simulator:
            return None
        argtypes = tuple(kernel.typeof_pyval(a) for a in typed())
        key = (id(kernel), argtypes, int(tpb))
        limit = self._coop.get(key)
        if limit is None:
            limit = int(kernel.compile(argtypes).max_cooperative_grid_blocks(int(tpb)))
            if limit < 1:
                raise RuntimeError(f"no block of {tpb} threads of the block pass fits a multiprocessor")
            self._coop[key] = limit
        return limit

    def _block_scratch(self, L, n, m, k, slots, keep=True):
        """The block pass's device scratch (module docstring of :mod:`._cuda_block_kernels`),
        made once and kept: rows and slots grow to the largest shard seen.  ``keep=False``: new
        arrays of these shapes, not kept, with those of ``bcd_kernel``'s scratch (``"scr"``):
        tiny ones type a launch."""
        sc = self._block_scratch_cache
        if keep and sc.get("key") == (L, m, k) and sc["n"] >= n and sc["slots"] >= slots:
            return sc
        if keep and sc.get("key") == (L, m, k):
            n, slots = max(n, sc["n"]), max(slots, sc["slots"])
        cuda, st = self._cuda, self._stream

        def arr(shape, dtype):
            return cuda.device_array(shape, dtype=dtype, stream=st)

        sc = {"key": (L, m, k), "n": n, "slots": slots,
              "play": arr((L, n), np.int32), "steps": arr((L, n), np.int64), "nz": arr((L, n + 1), np.int64),
              "nlive": arr(L, np.int64), "S": arr((L, m, k), np.float64), "U": arr((L, m, k), np.float64),
              "G": arr((L, max(1, m * (m - 1) // 2)), np.float64), "nxt": arr((L, 2, slots), np.int32),
              "head": arr((L, 2, slots), np.int32), "e2j": arr((L, 2, slots), np.int32),
              "e2p": arr((L, 2, slots), np.int64)}
        if keep:
            self._block_scratch_cache = sc
        else:
            sc["scr"] = (arr((L, 4, 1), np.float64), arr((L, 2, 1), np.int32))  # (bcd_kernel's scratch types)
        return sc

    # ------------------------------------------------------------------ parallel (opt-in) mode
    def _dual_parts(self, W, beta, models):
        """``(||W_m||^2, sum(beta_m))`` on the host for the listed models (device reductions)."""
        return self._sums(W, True)[models], self._sums(beta.array, False)[models]

    def _parallel_pass(self, W, block, beta, Cs, models, order, bias, solver, eps, splits, near=None):
        """Row-parallel pass with a safeguard: undo and redo exactly if the dual decreased.

        ``solver``: Walrus or the simplex step (the dual ``sum(beta) - ||W||^2 / 2`` is the
        same function for both losses, only the feasible set differs)."""
        cuda = self._cuda
        st = self._stream
        block.ready.wait(st)
        beta.ready.wait(st)
        if np.unique(order).shape[0] != order.shape[0]:
            # a row visited twice could be solved by two blocks at once: not supported
            self._exact_pass(W, block, beta, Cs, models, order, bias, solver, eps, splits, near)
            return
        wsq0, bs0 = self._dual_parts(W, beta, models)
        if self._backup is None or self._backup[0].shape != W.shape:
            self._backup = (cuda.device_array(W.shape, dtype=np.float64, stream=st), None)
        W0 = self._backup[0]
        W0.copy_to_device(W, stream=st)
        nb = beta.array.size
        B0buf = self._pool.take(nb, np.float64, st)
        B0 = B0buf[:nb].reshape(beta.array.shape)
        B0.copy_to_device(beta.array, stream=st)
        k = W.shape[2]
        tpb = self._threads_for(k)
        kk, use_shared = self._layout(k, tpb)
        nblk = max(1, min(int(self.parallel_blocks), order.shape[0]))
        scr_f, scr_i = self._scratch_for(models.shape[0] * nblk, kk)
        kernel = self._K.parallel_bcd_kernel(not block.is_sparse, tpb, self._kc_for(tpb))
        kernel[(nblk, models.shape[0]), tpb, st](
            W, block.data, block.indices, block.indptr, block.ncols, block.y, block.sqnorms, block.weights,
            block.trains, beta.array, self._small(Cs, np.float64), self._small(splits, np.int64),
            self._small(models, np.int64), self._small(order, np.int64),
            float(bias), int(solver), 0.0, scr_f, scr_i, bool(use_shared), *(near or self._no_near()))
        self._release_small()
        wsq1, bs1 = self._dual_parts(W, beta, models)
        d0 = bs0 - 0.5 * wsq0
        d1 = bs1 - 0.5 * wsq1
        tol = 1e-12 * np.maximum(1.0, np.abs(d0)) + 1e-12 * np.maximum(1.0, np.abs(bs0) + 0.5 * np.abs(wsq0))
        if np.all(d1 >= d0 - tol):
            self._pool.give([B0buf])
            return
        logger.warning("row-parallel pass decreased the dual (%s -> %s); undoing it, redoing it exactly "
                       "and staying exact from now on", d0.tolist(), d1.tolist())
        W.copy_to_device(W0, stream=st)
        beta.array.copy_to_device(B0, stream=st)
        self._pool.give([B0buf])
        self.fallbacks += 1
        self.parallel_blocks = None
        self._exact_pass(W, block, beta, Cs, models, order, bias, solver, eps, splits, near)

    # ------------------------------------------------------------------ objective
    def hinge_sums(self, W, block: DeviceBlock, bias, models, splits=None, near=None, reach=0.0,
                   loss: int = WW_LOSS, cs_near: float = CS_NEAR) -> np.ndarray:
        """Per listed model, the block's weighted hinge loss (float64, host): ``loss`` ``WW_LOSS``
        (WW, the sum over the classes) or ``CS_LOSS`` (Crammer-Singer, their maximum;
        :mod:`streamwww.solvers`); with ``near`` (host ``uint8``, ``(M, n, k - 1)``), also
        shrinking's near-flags of the listed models (engine.shrink; ``reach`` and ``cs_near`` as
        for the CPU), filled in place."""
        models = np.ascontiguousarray(models, dtype=np.int64)
        splits = model_splits(splits, W.shape[0])
        loss = _loss_id(loss)
        L = models.shape[0]
        if L == 0 or block.n_rows == 0:
            return np.zeros(L)
        if near is not None:
            return self._objective_rows(W, block, bias, models, splits, near, reach, loss=loss,
                                        cs_near=cs_near)[0].sum(axis=1)
        if self._cupy is not None:
            try:
                return self._hinge_cupy(W, block, float(bias), models, splits, loss)
            except Exception as exc:  # noqa: BLE001
                self._cupy_failed(exc)
        tpb = 8 if self.simulator else 128
        nblk = (block.n_rows + tpb - 1) // tpb
        part = self._row_kernel(self._K.hinge_kernel(not block.is_sparse, tpb), tpb, nblk, (L, nblk),
                                np.float64, W, block, bias, models, with_y=True, splits=splits,
                                extra=(self._no_rows(), self._no_near()[0], 0.0, CS_NEAR, False, False, loss))
        return part.sum(axis=1)

    def _no_rows(self):
        if getattr(self, "_empty_rows", None) is None:
            self._empty_rows = self._cuda.to_device(np.zeros((1, 1), dtype=np.float64))
        return self._empty_rows

    def _objective_rows(self, W, block, bias, models, splits, near, reach, keep_rows: bool = False,
                        loss: int = WW_LOSS, cs_near: float = CS_NEAR):
        """The hinge kernel (``loss``: the loss id) with shrinking's near-flags (``near``, host,
        filled for the listed models) and, with ``keep_rows``, each row's loss:
        ``(block partial sums, h or None)``."""
        L = models.shape[0]
        st = self._stream
        dnear = self._no_near()[0] if near is None else self._cuda.device_array(near.shape, dtype=np.uint8,
                                                                                  stream=st)
        dh = self._cuda.device_array((L, block.n_rows), dtype=np.float64, stream=st) if keep_rows else \
            self._no_rows()
        tpb = 8 if self.simulator else 128
        nblk = (block.n_rows + tpb - 1) // tpb
        part = self._row_kernel(self._K.hinge_kernel(not block.is_sparse, tpb), tpb, nblk, (L, nblk),
                                np.float64, W, block, bias, models, with_y=True, splits=splits,
                                extra=(dh, dnear, float(reach), float(cs_near), near is not None, bool(keep_rows),
                                       int(loss)))
        h = dh.copy_to_host(stream=st) if keep_rows else None
        if near is not None:
            host = dnear.copy_to_host(stream=st)
            st.synchronize()
            for mdl in models:  # (the listed models' flags: the others' were not computed)
                near[mdl] = host[mdl]
        st.synchronize()
        return part, h

    def certify_pass(self, W_cert, W, block: DeviceBlock, beta: DeviceBeta, Cs, models, order, bias, solver, eps,
                     splits=None, near=None, reach=0.0, block_rows: int = 1,
                     loss: int = WW_LOSS, cs_near: float = CS_NEAR, pin: bool = False) -> tuple[np.ndarray, float]:
        """The objective terms (of ``loss``, as in :meth:`hinge_sums`) of ``W_cert`` row by row,
        with the near-flags ``near``, then :meth:`bcd_pass` with them (one after the other on
        the device's stream); as
        :meth:`CPUBackend.certify_pass <streamwww.backends.cpu.CPUBackend.certify_pass>`."""
        models = np.ascontiguousarray(models, dtype=np.int64)
        loss = _loss_id(loss)
        t0 = time.perf_counter()
        _, h = self._objective_rows(W_cert, block, bias, models, model_splits(splits, W.shape[0]), near, reach,
                                    keep_rows=True, loss=loss, cs_near=cs_near)
        waited = time.perf_counter() - t0
        self.bcd_pass(W, block, beta, Cs, models, order, bias, solver, eps, splits, near=near, block_rows=block_rows,
                      pin=pin)
        return h, waited

    def _row_kernel(self, kernel, tpb, nblk, out_shape, dtype, W, block: DeviceBlock, bias, models,
                    with_y: bool = False, splits=None, extra=()) -> np.ndarray:
        """Launch a per-row kernel (grid ``(nblk, len(models))``) over ``block``; its output on the host."""
        st = self._stream
        block.ready.wait(st)
        out = self._cuda.device_array(out_shape, dtype=dtype, stream=st)
        head = (W, block.data, block.indices, block.indptr, block.ncols) + ((block.y,) if with_y else ())
        if splits is not None:
            head += (block.weights, block.trains, self._small(splits, np.int64))
        kernel[(nblk, len(models)), tpb, st](*head, block.n_rows, float(bias), self._small(models, np.int64), out,
                                             *extra)
        self._release_small()
        res = out.copy_to_host(stream=st)
        st.synchronize()
        return res

    # CuPy paths (optional; real GPU only) -----------------------------------------
    def _cupy_failed(self, exc):
        logger.warning("CuPy path failed (%s: %s); using the numba-cuda kernels from now on",
                       type(exc).__name__, exc)
        self._cupy = None

    def _scores_cupy(self, W, block, bias, models, max_bytes: int = 256 << 20):
        """Yield, per listed model, the dense ``(n, k)`` float64 score matrix on the device."""
        cp = self._cupy
        block.ready.synchronize()
        self._stream.synchronize()
        n, k = block.n_rows, W.shape[2]
        if block.is_sparse:
            import cupyx.scipy.sparse as csp

            d = W.shape[1] - (1 if bias != 0.0 else 0)
            X = csp.csr_matrix((cp.asarray(block.data).astype(cp.float64),
                                cp.asarray(block.indices).astype(cp.int32, copy=False),
                                cp.asarray(block.indptr).astype(cp.int32, copy=False)), shape=(n, d))
        else:
            X = cp.asarray(block.data).reshape(n, block.ncols).astype(cp.float64)
            d = block.ncols
        rows = max(1, max_bytes // (8 * k))
        for mdl in models:
            Wm = cp.asarray(W[int(mdl)])
            S = cp.empty((n, k), dtype=cp.float64)
            for r0 in range(0, n, rows):
                r1 = min(n, r0 + rows)
                Sc = X[r0:r1] @ Wm[:d]
                if bias != 0.0:
                    Sc += bias * Wm[d]
                S[r0:r1] = Sc
            yield S

    def _hinge_cupy(self, W, block, bias, models, splits, loss: int = WW_LOSS, max_bytes: int = 256 << 20):
        cp = self._cupy
        y = cp.asarray(block.y).astype(cp.int64)
        weights = cp.asarray(block.weights) if block.weights.shape[0] else None
        out = np.zeros(models.shape[0])
        for j, S in enumerate(self._scores_cupy(W, block, bias, models, max_bytes)):
            r = cp.arange(S.shape[0])
            sy = S[r, y]
            H = cp.maximum(0.0, 1.0 - (sy[:, None] - S))
            H[r, y] = 0.0
            w = weights
            split = int(splits[int(models[j])])
            if split >= 0:  # the same weights as rowmath.row_weight
                held = ((cp.asarray(block.trains) >> split) & 1).astype(cp.float64)
                w = held if w is None else w * held
            if loss == CS_LOSS:  # the row's largest term
                Hr = H.max(axis=1)
                out[j] = float(Hr.sum() if w is None else (Hr * w).sum())
            else:
                out[j] = float(H.sum() if w is None else (H.sum(axis=1) * w).sum())
        return out

    # ------------------------------------------------------------------ housekeeping
    def synchronize(self) -> None:
        """Wait for all queued copies and kernels."""
        self._copy_stream.synchronize()
        self._stream.synchronize()

    def close(self) -> None:
        """Drop cached device memory (resident shards, pooled buffers, scratch)."""
        self.synchronize()
        self._resident.clear()
        self._pool.clear()
        self._scratch.clear()
        self._block_scratch_cache = {}
        self._backup = None

    def __repr__(self) -> str:
        mode = "exact" if self.parallel_blocks is None else f"row-parallel x{self.parallel_blocks}"
        return f"CUDABackend(device={self.device_name!r}, mode={mode})"


def _loss_id(loss) -> int:
    """The hinge id the objective kernels take (:mod:`streamwww.solvers`): ``WW_LOSS`` or ``CS_LOSS``."""
    loss = int(loss)
    if loss not in (WW_LOSS, CS_LOSS):
        raise ValueError(f"The 'loss' argument must be a loss id, {WW_LOSS} (WW_LOSS) or {CS_LOSS} (CS_LOSS). "
                         f"Got {loss!r} instead.")
    return loss


def _multiprocessors(cuda, simulator: bool) -> int:
    """The device's multiprocessor count: the row-parallel mode's blocks per model for
    ``parallel_blocks='auto'`` (one resident block per SM at the exact kernels' register use,
    docs/gpu.md); 4 under the simulator (one Python thread per CUDA thread)."""
    if simulator:
        return 4
    try:
        return max(1, int(cuda.get_current_device().MULTIPROCESSOR_COUNT))
    except Exception:  # noqa: BLE001 - an attribute a driver did not report: the H100/H200 count
        return 132


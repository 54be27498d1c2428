"""Backend selection: ``device`` ('auto', 'cpu', 'cuda', 'cuda-async') to a
:class:`~streamwww.backends.base.Backend`."""

from __future__ import annotations

import importlib
import logging

from streamwww._params import DEVICES
from streamwww.backends.base import Backend
from streamwww.backends.cpu import CPUBackend
from streamwww.errors import DeviceUnavailableError

logger = logging.getLogger(__name__)

__all__ = ["get_backend", "gpu_pays"]

_BACKENDS = {"cpu": "streamwww.backends.cpu", "cuda": "streamwww.backends.cuda"}

# Where 'auto' takes a usable GPU: the exact kernel runs one thread block per model
# (one SM), so a single model is latency-bound there and slower than the CPU backend;
# only many models of many classes in one launch beat the CPU (docs/gpu.md, "On an
# H200").
AUTO_GPU_MIN_MODELS = 10
AUTO_GPU_MIN_CLASSES = 100


def gpu_pays(n_models: int | None, n_classes: int | None) -> bool:
    """Whether ``device='auto'`` trains ``n_models`` models of ``n_classes`` classes on a usable
    GPU (``None``: not known, the GPU)."""
    if n_models is None or n_classes is None:
        return True
    return int(n_models) >= AUTO_GPU_MIN_MODELS and int(n_classes) >= AUTO_GPU_MIN_CLASSES


def get_backend(device: str = "auto", n_models: int | None = None, n_classes: int | None = None,
                n_threads: int | None = None, block_rows: int = 1) -> Backend:
    """Return the backend for ``device`` ('auto', 'cpu', 'cuda' or 'cuda-async').

    'auto' picks CUDA when a usable GPU and its libraries are present and, where the
    run's ``n_models`` (C values x folds) and ``n_classes`` are given, when the GPU's
    exact kernel was measured faster than the CPU for such a run (:func:`gpu_pays`:
    at least 10 models of at least 100 classes; a smaller run does not probe for a GPU);
    else the CPU, saying why at INFO.
    'cuda' without a usable GPU raises :class:`~streamwww.errors.DeviceUnavailableError`.
    ``n_threads``: the CPU backend's threads (None: numba's setting).  The block pass
    (``block_rows > 1``): 'cuda' runs it on the GPU (:mod:`._cuda_block_kernels`); 'auto'
    takes the CPU for it, the GPU block pass not having been measured on a device yet
    (docs/gpu.md, "The block pass on the device").

    'cuda-async' is the GPU's row-parallel pass (:class:`~streamwww.backends.cuda.CUDABackend`
    with ``parallel_blocks='auto'``; docs/gpu.md, "Row-parallel mode"): one model's rows are
    solved many at a time and their updates added to ``W`` with atomics.  Its stops are
    certified by the duality gap as every run's are, but its models are not reproducible bit
    for bit, so it is only ever taken by name ('auto' never chooses it), and it has no block
    pass (``block_rows`` must be 1).
    """
    if device not in DEVICES:
        raise ValueError(f"The 'device' parameter must be one of {', '.join(map(repr, DEVICES))}. "
                         f"Got {device!r} instead.")
    if device == "cuda-async" and int(block_rows) > 1:
        raise ValueError(f"device='cuda-async' runs the GPU's row-parallel pass, not the block pass: "
                         f"block_rows must be 1. Got block_rows={int(block_rows)} instead.")
    if int(block_rows) > 1 and device == "auto":
        logger.info("device='auto': training on the CPU (the block pass, block_rows=%d, is measured on the CPU "
                    "only; device='cuda' runs it on the GPU)", int(block_rows))
        device = "cpu"
    if device in ("auto", "cuda", "cuda-async"):
        reason = None
        if device == "auto" and not gpu_pays(n_models, n_classes):
            # the CPU whatever the hardware: no probe of the driver, a cost every fit of a small problem would pay
            reason = (f"{n_models} model(s) of {n_classes} classes: the GPU's exact kernel, one thread block "
                      f"per model, was measured slower than the CPU below {AUTO_GPU_MIN_MODELS} models of "
                      f"{AUTO_GPU_MIN_CLASSES} classes; device='cuda' uses a GPU anyway")
        else:
            try:
                cuda = importlib.import_module(_BACKENDS["cuda"])
            except ModuleNotFoundError as exc:
                if exc.name != _BACKENDS["cuda"]:
                    raise
                reason = "this build of streamwww has no CUDA backend"
            else:
                # 'auto' asks the stricter question (e.g. it never picks the CUDA simulator).
                reason = cuda.unavailable_reason(auto=device == "auto")
        if reason is None:
            try:
                return cuda.CUDABackend(parallel_blocks="auto" if device == "cuda-async" else None)
            except DeviceUnavailableError as exc:
                if device != "auto":
                    raise
                reason = str(exc)
        if device != "auto":
            raise DeviceUnavailableError(f"device={device!r} was requested but cannot be used: {reason}.")
        # said once per fit at INFO: a user who asked for 'auto' can see why no GPU was used
        logger.info("device='auto': training on the CPU (%s)", reason)
    return CPUBackend(n_threads)

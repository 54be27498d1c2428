"""Backend selection: ``device`` ('auto', 'cpu', 'cuda') to a :class:`~streamwww.backends.base.Backend`."""

from __future__ import annotations

import importlib
import logging

from streamwww.backends.base import Backend
from streamwww.backends.cpu import CPUBackend
from streamwww.errors import DeviceUnavailableError

logger = logging.getLogger(__name__)

__all__ = ["get_backend"]

_BACKENDS = {"cpu": "streamwww.backends.cpu", "cuda": "streamwww.backends.cuda"}


def get_backend(device: str = "auto") -> Backend:
    """Return the backend for ``device`` ('auto', 'cpu' or 'cuda').

    'auto' picks CUDA when a usable GPU and its libraries are present, else CPU.
    'cuda' without a usable GPU raises :class:`~streamwww.errors.DeviceUnavailableError`.
    """
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"The 'device' parameter must be one of 'auto', 'cpu', 'cuda'. Got {device!r} instead.")
    if device in ("auto", "cuda"):
        reason = None
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
                    return cuda.CUDABackend()
                except DeviceUnavailableError as exc:
                    if device == "cuda":
                        raise
                    reason = str(exc)
        if device == "cuda":
            raise DeviceUnavailableError(f"device='cuda' was requested but cannot be used: {reason}.")
        # said once per fit at INFO: a user who asked for 'auto' can see why no GPU was used
        logger.info("device='auto': training on the CPU (%s)", reason)
    return CPUBackend()

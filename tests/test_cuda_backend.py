"""The CUDA backend on a machine without a GPU: selection, messages, and its per-row math."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import streamwww as sw
from streamwww.backends import cuda as cuda_backend
from streamwww.backends import get_backend
from streamwww.backends.rowmath import c_index, v_entry, walrus_sweep_cpu
from streamwww.errors import DeviceUnavailableError
from streamwww.solvers.walrus import walrus_kernel

ROOT = Path(__file__).resolve().parents[1]
NO_GPU = cuda_backend.unavailable_reason() is not None
HAS_NUMBA_CUDA = cuda_backend.importlib.util.find_spec("numba_cuda") is not None


def _python(code, **env):
    full = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    full.update(env)
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout.strip()


def test_import_does_not_load_numba_cuda():
    out = _python("import sys, streamwww; from streamwww.backends import cuda\n"
                  "r = cuda.unavailable_reason(); a = cuda.unavailable_reason(auto=True)\n"
                  "print('numba.cuda' in sys.modules, r is None)")
    loaded, usable = out.split()
    assert loaded == "False"


@pytest.mark.skipif(not NO_GPU, reason="a CUDA GPU is usable here")
def test_device_cuda_without_gpu_fails_clearly_and_auto_uses_cpu(rng):
    reason = cuda_backend.unavailable_reason()
    assert isinstance(reason, str) and reason
    with pytest.raises(DeviceUnavailableError, match=r"device='cuda' was requested but cannot be used: "):
        get_backend("cuda")
    X, y = rng.normal(size=(10, 3)), np.arange(10) % 2
    with pytest.raises(DeviceUnavailableError, match="device='cuda'"):
        sw.WWClassifier(device="cuda").fit(X, y)
    assert get_backend("auto").name == "cpu"
    with pytest.raises(DeviceUnavailableError, match=r"device='cuda-async' was requested but cannot be used: "):
        sw.WWClassifier(device="cuda-async").fit(X, y)


def test_cuda_async_is_the_row_parallel_pass_and_has_no_block_pass():
    with pytest.raises(ValueError, match=r"device='cuda-async' runs the GPU's row-parallel pass, not the block "
                                         r"pass: block_rows must be 1. Got block_rows=4 instead."):
        get_backend("cuda-async", block_rows=4)
    with pytest.raises(ValueError, match=r"must be one of 'auto', 'cpu', 'cuda', 'cuda-async'. Got 'gpu'"):
        get_backend("gpu")
    with pytest.raises(ValueError, match=r"'device' parameter of WWClassifier must be"):
        sw.WWClassifier(device="gpu").fit(np.eye(4), np.arange(4) % 2)


@pytest.mark.skipif(not NO_GPU, reason="a CUDA GPU is usable here")
def test_auto_says_why_it_uses_the_cpu_and_the_model_says_where(rng, caplog, monkeypatch):
    """A run too small for the GPU (one model of 3 classes) says so without probing for one;
    a caller that does not know the run's size gets the probe's reason."""
    X, y = rng.normal(size=(30, 3)), np.arange(30) % 3
    reason = cuda_backend.unavailable_reason(auto=True)
    probed = []
    monkeypatch.setattr(cuda_backend, "unavailable_reason", lambda auto=False: probed.append(auto) or reason)
    with caplog.at_level(logging.INFO, logger="streamwww.backends"):
        model = sw.WWClassifier(device="auto", max_iter=5, tol=1e-1).fit(X, y)
        assert probed == []
        assert get_backend("auto").name == "cpu"
        assert probed == [True]
    assert model.device_ == "cpu"
    said = [r.getMessage() for r in caplog.records if r.name == "streamwww.backends.select"]
    assert said == ["device='auto': training on the CPU (1 model(s) of 3 classes: the GPU's exact kernel, one "
                    "thread block per model, was measured slower than the CPU below 10 models of 100 classes; "
                    "device='cuda' uses a GPU anyway)",
                    f"device='auto': training on the CPU ({reason})"]


def test_unavailable_reason_never_raises(monkeypatch):
    import importlib.util

    def boom(name, *a, **k):
        raise RuntimeError("broken environment")

    monkeypatch.setattr(importlib.util, "find_spec", boom)
    assert "availability check failed" in cuda_backend.unavailable_reason()


def test_unavailable_reason_messages(monkeypatch):
    import ctypes
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None)
    assert "numba-cuda is not installed" in cuda_backend.unavailable_reason()
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "cuda.bindings" else object())
    assert "cuda-bindings" in cuda_backend.unavailable_reason()
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object())  # both installed

    monkeypatch.setattr(cuda_backend, "simulator_enabled", lambda: True)
    assert cuda_backend.unavailable_reason() is None
    assert "simulator" in cuda_backend.unavailable_reason(auto=True)
    monkeypatch.setattr(cuda_backend, "simulator_enabled", lambda: False)

    def no_lib(name):
        raise OSError(name)

    monkeypatch.setattr(cuda_backend.sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", no_lib)
    assert "no CUDA driver / GPU found" in cuda_backend.unavailable_reason()

    class Lib:
        def __init__(self, init_rc, count):
            self.init_rc, self.count = init_rc, count

        def cuInit(self, flags):
            return self.init_rc

        def cuDeviceGetCount(self, ptr):
            ptr._obj.value = self.count
            return 0

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Lib(100, 0))
    assert "found no GPU" in cuda_backend.unavailable_reason()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: Lib(999, 0))
    assert "cuInit error 999" in cuda_backend.unavailable_reason()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: Lib(0, 0))
    assert "found no GPU" in cuda_backend.unavailable_reason()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: Lib(0, 2))
    assert cuda_backend.unavailable_reason() is None


@pytest.mark.skipif(not HAS_NUMBA_CUDA, reason="numba-cuda (which provides the simulator) is not installed")
def test_auto_never_picks_the_simulator():
    out = _python("from streamwww.backends import get_backend\n"
                  "print(get_backend('auto').name, get_backend('cuda').name)",
                  NUMBA_ENABLE_CUDASIM="1")
    assert out == "cpu cuda"


@pytest.mark.parametrize("kw, match", [
    (dict(threads_per_block=48), "power of two"),
    (dict(threads_per_block=2048), "power of two"),
    (dict(shared_classes=4096), "shared_classes"),
    (dict(use_cupy="yes"), "use_cupy"),
    (dict(parallel_blocks=0), "parallel_blocks"),
])
def test_backend_parameters_are_validated(kw, match):
    with pytest.raises(ValueError, match=match):
        cuda_backend.CUDABackend(**kw)


def test_index_map_and_v():
    for y in range(5):
        cs = [c_index(t, y) for t in range(4)]
        assert sorted(cs + [y]) == list(range(5))  # c(.) is a bijection onto the classes != y
    assert v_entry(2.0, 0.5, 4.0, 0.25, 1.0) == (1.0 - (2.0 - 0.5)) / 4.0 + 0.25 + 1.0


def _sweep_solution(v, C):
    """b from the shared sweep, with the GPU kernels' ordering (value desc, index asc)."""
    pos = np.flatnonzero(v > 0)
    srt = pos[np.lexsort((pos, -v[pos]))].astype(np.int32)
    b = np.zeros_like(v)
    if srt.size == 0:
        return b
    nu, nm, gamma, _ = walrus_sweep_cpu(v, srt, srt.size, C)
    b[srt[:nu]] = C
    inside = srt[nu:nu + nm]
    b[inside] = np.minimum(np.maximum(v[inside] - gamma, 0.0), C)
    return b


def test_walrus_sweep_matches_the_cpu_solver():
    rng = np.random.default_rng(0)
    cases = []
    for m in (1, 2, 5, 30, 49, 200, 1500):
        for C in (0.01, 1.0, 30.0):
            cases.append((rng.normal(size=m) * 3, C))
            cases.append((np.round(rng.normal(size=m), 1), C))  # heavy ties
            cases.append((np.full(m, 0.7), C))  # all tied
            cases.append((-np.abs(rng.normal(size=m)), C))  # nothing positive
    checked = 0
    for v, C in cases:
        want = np.empty_like(v)
        walrus_kernel(v, C, want, np.empty(v.size, dtype=np.int64))
        got = _sweep_solution(v, C)
        scale = max(1.0, np.abs(v).max())
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * scale)
        gamma = got.sum()  # optimality: b = clip(v - sum(b), 0, C)
        np.testing.assert_allclose(got, np.clip(v - gamma, 0, C), rtol=0, atol=1e-11 * scale)
        checked += 1
    assert checked == len(cases)


def test_auto_takes_the_gpu_only_where_it_was_measured_faster(monkeypatch, caplog):
    """With a usable GPU (stood in for here), 'auto' trains on it only for runs of at least
    10 models of at least 100 classes (backends.select.gpu_pays); 'cuda' always does."""
    from streamwww.backends import select

    made = []

    class FakeCUDA:
        name = "cuda"

        def __init__(self, parallel_blocks=None):
            assert parallel_blocks is None  # never the row-parallel mode: only by name
            made.append(self)

    monkeypatch.setattr(cuda_backend, "unavailable_reason", lambda auto=False: None)
    monkeypatch.setattr(cuda_backend, "CUDABackend", FakeCUDA)
    with caplog.at_level(logging.INFO, logger="streamwww.backends"):
        assert get_backend("auto", n_models=10, n_classes=100).name == "cuda"
        assert get_backend("auto").name == "cuda"  # a caller that does not know the run
        for M, k in ((1, 1000), (9, 105), (10, 99), (50, 26)):
            assert get_backend("auto", n_models=M, n_classes=k).name == "cpu", (M, k)
        assert get_backend("cuda", n_models=1, n_classes=3).name == "cuda"
    assert len(made) == 3
    said = [r.getMessage() for r in caplog.records if r.name == "streamwww.backends.select"]
    assert len(said) == 4 and said[0].startswith("device='auto': training on the CPU (1 model(s) of 1000 classes:")
    assert select.gpu_pays(None, 3) and not select.gpu_pays(1, 1000)


def test_a_fit_tells_auto_its_models_and_classes(monkeypatch, rng):
    """The engine passes the run's model count (C values) and classes to the selection."""
    from streamwww.backends import select
    from streamwww.engine import run as engine_run

    seen = []
    real = select.get_backend

    def spy(device="auto", n_models=None, n_classes=None, n_threads=None, block_rows=1):
        seen.append((device, n_models, n_classes))
        return real("cpu")

    monkeypatch.setattr(engine_run, "get_backend", spy)
    X, y = rng.normal(size=(40, 3)), np.arange(40) % 4
    sw.train((X, y), C=[0.5, 1.0, 2.0], max_iter=2, tol=1e-1, device="auto")
    assert seen == [("auto", 3, 4)]

"""Compile every CUDA kernel to PTX for sm_90 without a GPU (needs NVVM; skipped otherwise).

The simulator runs the kernels as Python, so it cannot catch what only the real
CUDA target rejects (typing, unsupported operations, shared-memory limits).  With
NVIDIA's NVVM library installed (e.g. ``pip install nvidia-cuda-nvcc nvidia-nvvm``
and ``CUDA_HOME`` pointing at it) this compiles each kernel as the GPU would,
without a driver.  Runs in a child process: it patches numba-cuda so that device
functions compile for a fixed compute capability instead of asking the driver.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r'''
import sys

def probe(a):
    a[0] = 1.0

try:  # numba-cuda and the toolchain (NVVM, NVRTC, libdevice), on a kernel that cannot be wrong
    import numba_cuda  # noqa: F401 - not numba's deprecated built-in CUDA target
    from numba import cuda, types as T
    import numba.cuda.dispatcher as disp

    class Dev:
        compute_capability = (9, 0)

    disp.get_current_device = lambda: Dev()
    cuda.compile_ptx(probe, (T.Array(T.float64, 1, "C"),), cc=(9, 0))
except Exception as exc:
    print("CUDA compiler libraries unavailable:", type(exc).__name__, str(exc).splitlines()[0])
    sys.exit(77)
from streamwww.backends import _cuda_block_kernels as BK
from streamwww.backends import _cuda_kernels as K

f64, i64, i32, f32, u8 = T.float64, T.int64, T.int32, T.float32, T.uint8
A = lambda dt, nd: T.Array(dt, nd, "C")
jobs = []
for dense in (True, False):
    ip = i64 if dense else i32  # a dense block's indptr is a dummy int64 array; CSR's is scipy's int32
    # (W, data, indices, indptr, ncols, y, sqnorms, weights, trains, beta, Cs, splits, models, order,
    #  bias, solver, eps, scr_f, scr_i, use_shared, near, shrink)
    pass_sig = lambda dt: (A(f64, 3), A(dt, 1), A(i32, 1), A(ip, 1), i64, A(i32, 1), A(f64, 1), A(f64, 1),
                           A(i64, 1), A(f64, 3), A(f64, 1), A(i64, 1), A(i64, 1), A(i64, 1), f64, i64, f64,
                           A(f64, 3), A(i32, 3), T.boolean, A(u8, 3), T.boolean)
    for dt in (f64, f32):
        jobs.append((K.bcd_kernel(dense, 256, 1024), pass_sig(dt)))
    jobs.append((K.parallel_bcd_kernel(dense, 256, 1024), pass_sig(f64)))
    # the block pass: (W, ..., eps as above, near, shrink, m, play, steps, nz, nlive, S, U, G, nxt, head, e2j,
    #  e2p, scr_f, scr_i, use_shared); the one-phase kernel takes (phase, b) first
    block_sig = lambda dt: (pass_sig(dt)[:17] + (A(u8, 3), T.boolean, i64, A(i32, 2), A(i64, 2), A(i64, 2),
                                                 A(i64, 1), A(f64, 3), A(f64, 3), A(f64, 2), A(i32, 3), A(i32, 3),
                                                 A(i32, 3), A(i64, 3), A(f64, 3), A(i32, 3), T.boolean))
    kc = BK.shared_capacity(1024, 256)
    for dt in (f64, f32):
        jobs.append((BK.block_pass_kernel(dense, 256, kc), block_sig(dt)))  # (grid-wide barriers: cooperative)
    jobs.append((BK.block_step_kernel(dense, 256, kc), (i64, i64) + block_sig(f64)))
    # (W, data, indices, indptr, ncols, y, weights, trains, splits, n, bias, models, out, h, near, reach,
    #  cs_near, record, keep_rows, loss_id)
    jobs.append((K.hinge_kernel(dense, 128), (A(f64, 3), A(f64, 1), A(i32, 1), A(ip, 1), i64, A(i32, 1), A(f64, 1),
                                              A(i64, 1), A(i64, 1), i64, f64, A(i64, 1), A(f64, 2), A(f64, 2),
                                              A(u8, 3), f64, f64, T.boolean, T.boolean, i64)))
jobs.append((K.sum_kernel(256, True), (A(f64, 3), A(f64, 2))))
jobs.append((K.fill_kernel(), (A(f64, 1), f64)))
for kernel, sig in jobs:
    cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0), launch_bounds=(256,))
print("compiled", len(jobs))
'''


def test_kernels_compile_to_ptx():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    res = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    if res.returncode == 77:
        pytest.skip(res.stdout.strip() or "NVVM unavailable")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-6000:]
    # 2 layouts x (2 row dtypes + the parallel pass + the hinge + the block pass's 2 row dtypes and its
    # one-phase kernel) + 2
    assert "compiled 16" in res.stdout

"""Run the CUDA kernel suite (tests/cuda_sim) under Numba's CUDA simulator.

``NUMBA_ENABLE_CUDASIM`` only takes effect before ``numba.cuda`` is first
imported, so the suite runs in child processes (all at once, one per file, to
use the cores); each test here reports one child's result.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/cuda_sim/test_kernels.py", "tests/cuda_sim/test_backend.py", "tests/cuda_sim/test_cs.py",
         "tests/cuda_sim/test_block.py"]
MISSING = [name for name in ("numba_cuda", "cuda.bindings")
           if importlib.util.find_spec(name.split(".")[0]) is None or importlib.util.find_spec(name) is None]

pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"{' and '.join(MISSING)} not installed: the simulator "
                                "comes with numba-cuda (pip install 'numba-cuda[cu13]')")


@pytest.fixture(scope="module")
def children():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env.pop("STREAMWWW_CUDA_SUITE", None)
    procs = {}
    for f in FILES:
        cmd = [sys.executable, "-m", "pytest", f, "-q", "-p", "no:cacheprovider", "-o", "addopts=-ra"]
        procs[f] = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
    yield procs
    for p in procs.values():
        if p.poll() is None:
            p.kill()


@pytest.mark.parametrize("path", FILES)
def test_cuda_kernels_under_simulator(children, path):
    out, _ = children[path].communicate(timeout=900)
    assert children[path].returncode == 0, f"{path} failed under NUMBA_ENABLE_CUDASIM=1:\n{out[-8000:]}"
    assert " passed" in out and " skipped" not in out.splitlines()[-1], out[-2000:]

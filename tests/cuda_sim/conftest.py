"""The CUDA kernel suite: runs under Numba's CUDA simulator, or on a real GPU.

``NUMBA_ENABLE_CUDASIM`` must be set before ``numba.cuda`` is first imported, so
this folder is collected only in a process started for it:

- on any machine, ``tests/test_cuda_sim.py`` (part of the default ``pytest``
  run) starts ``python -m pytest tests/cuda_sim`` with ``NUMBA_ENABLE_CUDASIM=1``;
- on a GPU, ``tests/test_cuda_gpu.py`` (``pytest -m gpu``) starts it with
  ``STREAMWWW_CUDA_SUITE=1`` and the simulator off.

In any other process the folder is ignored (see ``collect_ignore_glob``).
"""

import os
import sys

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
ENABLED = SIMULATED or os.environ.get("STREAMWWW_CUDA_SUITE") == "1"

if not ENABLED:
    collect_ignore_glob = ["test_*.py"]
elif SIMULATED:
    # The simulator runs one Python thread per CUDA thread and its block manager
    # polls them; the default 5 ms GIL switch interval makes every syncthreads()
    # cost ~6 ms.  0.1 ms makes the suite ~20x faster.
    sys.setswitchinterval(1e-4)
    # The simulator's cuda.shared.array is not thread-safe (see the function); the
    # backend applies this fix itself, the direct kernel launches of the suite need it too.
    from streamwww.backends.cuda import fix_simulator_shared_memory_race

    fix_simulator_shared_memory_race()

    # The CPU side of the comparisons runs the generic builds, which the main run compiles
    # anyway, not a build per class count (k = 2, 3, 4, 7, ...: minutes of compiling in a
    # cold run): the suite's build policy (tests/conftest.py) with no small-k build.
    from tests import conftest as suite

    suite.LANES_K = ()

#!/usr/bin/env bash
# One call on a lent GPU machine (docs/gpu.md, "How the GPU numbers were taken"): the
# environment, the GPU tests, the CLI path against the CPU, and the GPU benchmark, each
# step under its own time limit, logs written to $OUT (or /tmp/gpu-out).
#
# Here, before the call (the machine reaches no package registry, and ../shared does not travel):
#   rm -rf .whl && python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl \
#     numpy==2.4.6 zarr==3.1.6 numcodecs==0.16.6 dask==2026.7.1 distributed==2026.7.1 donfig partd locket \
#     tblib zict tornado google-crc32c crc32c
#   (the versions of this project's tested environment; the image's numpy 2.5 breaks its numba-cuda
#   0.30.4, which still registers np.row_stack, and its zarr 3.4 needs msgspec, absent there)
#   mkdir -p .gpudata && cp ../shared/data/libsvm/{dna,letter,sector}.scale{,.t}.xz .gpudata/
#   (both folders ignored through .git/info/exclude; name them in the call's carry)
# There:
#   bash tools/gpu_session.sh [STEP ...]     STEP: tests, cli, bench (default: all three)
# BENCH_ARGS (environment) replaces the benchmark's arguments.
set -u
O=${OUT:-/tmp/gpu-out}
mkdir -p "$O"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD || exit 1
export PYTHONUNBUFFERED=1 STREAMWWW_DATA=$PWD/.gpudata
steps=${*:-tests cli bench}
T0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - T0 )) s] $*"; }

{
  date -u; nvidia-smi; nproc; free -g | head -2
  python3 - <<'EOF'
import sys
from importlib.metadata import version, PackageNotFoundError
print(sys.version)
for n in ("numpy", "numba", "numba-cuda", "cuda-bindings", "cupy-cuda13x", "dask", "distributed", "zarr",
          "numcodecs", "pyarrow", "scikit-learn", "pytest"):
    try:
        print(n, version(n))
    except PackageNotFoundError:
        print(n, "-")
from streamwww.backends.cuda import unavailable_reason
print("unavailable_reason(auto=True):", unavailable_reason(auto=True))
EOF
} > "$O/env.log" 2>&1
stamp "env: $(grep -m1 -o 'NVIDIA [A-Z0-9 ]*' "$O/env.log"); $(grep unavailable_reason "$O/env.log")"

run_tests() {
  # the kernel suite on the real GPU (what tests/test_cuda_gpu.py starts), then the other GPU tests
  STREAMWWW_CUDA_SUITE=1 timeout 300 python3 -m pytest tests/cuda_sim -q -p no:cacheprovider -o addopts=-ra \
    --durations=8 > "$O/tests.log" 2>&1
  echo "kernel suite rc=$?" >> "$O/tests.log"
  timeout 200 python3 -m pytest tests/test_cuda_gpu.py tests/test_cuda_backend.py -m "gpu or not gpu" \
    -k "not kernel_suite" -q -p no:cacheprovider -o addopts=-ra --durations=8 >> "$O/tests.log" 2>&1
  echo "gpu tests rc=$?" >> "$O/tests.log"
}
run_cli() {
  timeout 300 python3 tools/gpu_cli_check.py --datasets letter,dna --epochs 8 > "$O/cli.log" 2>&1
  echo "cli rc=$?" >> "$O/cli.log"
}

pids=()
case " $steps " in *" tests "*) run_tests & pids+=($!);; esac
case " $steps " in *" cli "*) run_cli & pids+=($!);; esac
for p in "${pids[@]}"; do wait "$p"; done
[ -f "$O/tests.log" ] && stamp "tests: $(grep -E 'passed|failed|error|rc=' "$O/tests.log" | tr '\n' ' ')"
[ -f "$O/cli.log" ] && { stamp "cli:"; cat "$O/cli.log"; }

case " $steps " in *" bench "*)
  cp docs/benchmarks.md "$O/benchmarks.md"
  # shellcheck disable=SC2086
  timeout 240 python3 tools/bench_gpu.py --out "$O/benchmarks.md" \
    ${BENCH_ARGS:---datasets sector,letter,aloi --rows 15000 --epochs 3 --cpu-epochs 2} > "$O/bench.log" 2>&1
  echo "bench rc=$?" >> "$O/bench.log"
  stamp "bench:"; tail -n 40 "$O/bench.log";;
esac
stamp "done"
tail -n 30 "$O/tests.log" 2>/dev/null

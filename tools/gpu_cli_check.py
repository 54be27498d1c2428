"""The CLI path on a real GPU, side by side with the CPU (issue 19, step 1).

    python tools/gpu_cli_check.py [--data-dir DIR] [--datasets letter,dna] [--epochs 8]

For each LIBSVM data set (``NAME.scale.xz`` and ``NAME.scale.t.xz`` in DIR):
``streamwww convert`` → ``streamwww train --device cuda`` killed (SIGKILL) after its
first committed checkpoint → ``streamwww resume`` → ``streamwww evaluate``, then the
same ``train`` on the CPU, uninterrupted. Both run the same fixed number of epochs
(``--tol 0``, same seed, so the same row orders) with objectives after every epoch
and without shrinking (``--no-shrinking``; docs/gpu.md, "Agreement with the CPU", says
why: shrinking's sets are a discontinuous function of ``W``, and on data with exact
ties, such as dna's binary features, rounding-level differences change them);
the script prints, per data set, the relative differences of the final primal and
dual objectives and of the weights, and the two test accuracies, and exits 1 when the
objectives differ by more than 1e-8 (relative) or an accuracy differs.

Without a usable GPU it says why and exits 0 (nothing checked).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CLI = "import sys; from streamwww.cli import main; sys.exit(main())"


def sw(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise SystemExit(f"streamwww {' '.join(args)} failed ({res.returncode}):\n{res.stderr[-4000:]}")
    return res


def newest_step(ck: Path) -> int:
    man = ck / "manifest.json"
    if not man.exists():
        return 0
    try:
        return int(json.loads(man.read_text()).get("step", 0))
    except (ValueError, OSError):
        return 0


def check(name: str, data_dir: Path, tmp: Path, epochs: int, device: str = "cuda") -> tuple[bool, str]:
    import streamwww as sw_api

    files = {}
    for suffix in ("", ".t"):
        src = data_dir / f"{name}.scale{suffix}.xz"
        dst = tmp / f"{name}{suffix}.libsvm"
        with lzma.open(src) as f, open(dst, "wb") as g:
            shutil.copyfileobj(f, g)
        files[suffix] = dst
    train_store, test_store = tmp / f"{name}.zarr", tmp / f"{name}.t.zarr"
    sw("-q", "convert", str(files[""]), str(train_store))
    sw("-q", "convert", str(files[".t"]), str(test_store), "--like", str(train_store))
    common = ["--C", "1", "--seed", "3", "--tol", "0", "--max-iter", str(epochs), "--eval-every", "1",
              "--checkpoint-interval", "0", "--no-shrinking"]
    # GPU: killed after its first checkpoint, then resumed
    ck = tmp / f"{name}-ck-gpu"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CLI, "-q", "train", str(train_store), "--device", device,
                             "--checkpoint-dir", str(ck), "--model-out", str(tmp / f"{name}-gpu.npz"), *common],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while proc.poll() is None and newest_step(ck) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    killed_at = newest_step(ck)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = True
    else:
        killed = False
        if proc.returncode != 0:
            raise SystemExit(f"{name}: GPU train failed ({proc.returncode}):\n{proc.stderr.read()[-4000:]}")
    sw("-q", "resume", str(ck), "--model-out", str(tmp / f"{name}-gpu.npz"))
    t_gpu = time.perf_counter() - t0
    t0 = time.perf_counter()
    sw("-q", "train", str(train_store), "--device", "cpu", "--checkpoint-dir", str(tmp / f"{name}-ck-cpu"),
       "--model-out", str(tmp / f"{name}-cpu.npz"), *common)
    t_cpu = time.perf_counter() - t0
    g, c = sw_api.load_model(tmp / f"{name}-gpu.npz"), sw_api.load_model(tmp / f"{name}-cpu.npz")
    hg, hc = g.history_[-1], c.history_[-1]
    dP = abs(hg["primal"] - hc["primal"]) / abs(hc["primal"])
    dD = abs(hg["dual"] - hc["dual"]) / abs(hc["dual"])
    dW = float(np.abs(g.coef_ - c.coef_).max() / np.abs(c.coef_).max())
    acc = []
    for m in ("gpu", "cpu"):
        out = sw("evaluate", str(tmp / f"{name}-{m}.npz"), str(test_store)).stdout
        acc.append(float(re.search(r"accuracy: ([0-9.]+) %", out).group(1)))
    ok = dP <= 1e-8 and dD <= 1e-8 and acc[0] == acc[1] and g.n_iter_ == c.n_iter_ == epochs
    line = (f"| {name} | {epochs} | {'killed at step ' + str(killed_at) if killed else 'finished before the kill'} "
            f"| {hg['primal']:.10g} | {hc['primal']:.10g} | {dP:.1e} | {dD:.1e} | {dW:.1e} | {acc[0]:.2f} | "
            f"{acc[1]:.2f} | {t_gpu:.1f} | {t_cpu:.1f} | {'ok' if ok else 'FAIL'} |")
    return ok, line


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=os.environ.get("STREAMWWW_DATA", str(HERE.parent.parent / "shared" / "data"
                                                                                / "libsvm")))
    p.add_argument("--datasets", default="letter,dna")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--device", default="cuda", help="the device checked against the CPU (cpu: test this tool)")
    args = p.parse_args(argv)
    from streamwww.backends.cuda import unavailable_reason

    reason = unavailable_reason(auto=True) if args.device == "cuda" else None
    if reason is not None:
        print(f"gpu_cli_check: no usable CUDA GPU here ({reason}); nothing checked.")
        return 0
    print("| data | epochs | GPU run | primal GPU | primal CPU | rel. ΔP | rel. ΔD | max ΔW/max W | acc GPU % "
          "| acc CPU % | GPU s (kill+resume) | CPU s | |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|",
          flush=True)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            ok, line = check(name, Path(args.data_dir), Path(tmp), args.epochs, args.device)
            print(line, flush=True)
            bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""streamwww benchmark suite (issue 6): the paper's claims, peers, scaling, subproblem solver.

    python tools/bench.py SECTION [SECTION ...] [--quick] [--out docs/benchmarks.md]
                          [--plots-dir docs] [--data-dir ../shared/data/libsvm] [--workdir DIR]

SECTION is one of

  solvers     Walrus vs the Shark-style block solver: time to gap <= delta * gap_1 (delta = 0.01,
              0.001) over C = 2^-6 .. 2^3 on dna, satimage, letter, sector and a generated k = 1000
              set; the ratio plot of the paper's Figure 2 and the convergence curves of Figure 1.
  accuracy    Test accuracy table like the paper's Table 5, the paper's numbers beside ours.
  peers       LinearSVC (Crammer-Singer, one-vs-rest), liblinear-official -s 4, SGDClassifier
              partial_fit over the shards, Vowpal Wabbit --oaa hinge: time, time to within 0.5
              points of the final accuracy, final accuracy, peak memory.
  scaling     Out-of-core scaling: rows/s, MB/s and peak RSS vs store size, in memory vs streamed.
  subproblem  Walrus subproblem time vs k against a generic QP solver (the paper's Tables 8-9).
  all         All of the above, in this order.

Each section replaces its own marked block (``<!-- bench-NAME -->``) of the report and writes
its PNG figures to --plots-dir; every block carries machine, versions, date and the command.
``--quick`` runs everything on tiny inputs (the test suite checks that it runs) and, unless
--out is given, writes the report to a temporary folder instead of docs/.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _benchenv import BenchContext, header, replace_section  # noqa: E402

# section name -> (module in tools/, function, title of the report block)
SECTIONS = {
    "solvers": ("bench_solvers", "run_solvers", "Walrus vs the Shark-style solver (issue 6.1, paper Figures 1-2)"),
    "accuracy": ("bench_solvers", "run_accuracy", "Test accuracy (issue 6.2, paper Table 5)"),
    "peers": ("bench_peers", "run", "Peers on the same data (issue 6.3)"),
    "scaling": ("bench_scaling", "run", "Out-of-core scaling (issue 6.4)"),
    "subproblem": ("bench_qp", "run", "Subproblem solver vs a generic QP solver (issue 6.5, paper Tables 8-9)"),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sections", nargs="+", choices=[*SECTIONS, "all"], metavar="SECTION")
    p.add_argument("--quick", action="store_true", help="tiny inputs, whole suite in under five minutes")
    p.add_argument("--out", help="report to update (default docs/benchmarks.md; with --quick a temporary file)")
    p.add_argument("--plots-dir", help="folder for PNG figures (default: beside the report)")
    p.add_argument("--data-dir", default=os.path.join(HERE, "..", "..", "shared", "data", "libsvm"))
    p.add_argument("--workdir", help="scratch folder, kept for reuse (default: a temporary folder)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    names = list(SECTIONS) if "all" in args.sections else list(dict.fromkeys(args.sections))

    tmp = tempfile.TemporaryDirectory(prefix="streamwww-bench-")
    with tmp:
        out = args.out or (os.path.join(tmp.name, "benchmarks.md") if args.quick
                           else os.path.join(HERE, "..", "docs", "benchmarks.md"))
        ctx = BenchContext(quick=args.quick, data_dir=os.path.abspath(args.data_dir),
                           workdir=os.path.abspath(args.workdir or os.path.join(tmp.name, "work")),
                           plots_dir=os.path.abspath(args.plots_dir or os.path.dirname(os.path.abspath(out))),
                           doc=os.path.abspath(out), seed=args.seed)
        for name in names:
            module, func, title = SECTIONS[name]
            t0 = time.perf_counter()
            body = getattr(importlib.import_module(module), func)(ctx)
            text = header(title) + "\n" + body.strip() + "\n"
            replace_section(ctx.doc, f"bench-{name}", text)
            print(text, flush=True)
            print(f"[{name}: {time.perf_counter() - t0:.0f} s, wrote {ctx.doc}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

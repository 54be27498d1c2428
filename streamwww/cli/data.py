"""Subcommands ``convert``, ``info`` and ``make-data`` of the ``streamwww`` CLI."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from streamwww.io.sniff import what_is

logger = logging.getLogger(__name__)


def add_storage_option(p: argparse.ArgumentParser) -> None:
    """``--storage-option KEY=VALUE`` (repeatable): options of the file system of URL arguments."""
    p.add_argument("--storage-option", action="append", default=None, metavar="KEY=VALUE",
                   dest="storage_options",
                   help="an option of the file system of s3://, gs://, az://... arguments, e.g. "
                        "endpoint_url=http://localhost:9000 or anon=true (VALUE read as JSON when it "
                        "is; a dotted KEY nests: client_kwargs.region_name=eu-west-1); repeatable. "
                        "Credentials come from the usual places (environment, config files, "
                        "instance roles) when not given; never recorded (docs/STORAGE.md)")


def storage_options(args: argparse.Namespace) -> dict | None:
    """The ``--storage-option`` pairs of ``args`` as a dict (None: none given)."""
    from streamwww.storage.location import parse_storage_options

    return parse_storage_options(getattr(args, "storage_options", None))


def register(subparsers) -> None:
    """Add the I/O subcommands to the top-level parser's ``subparsers``."""
    p = subparsers.add_parser(
        "convert", help="convert a LIBSVM text file into a shard store",
        description="Convert a LIBSVM/SVMlight text file (optionally .gz/.bz2/.xz) into a "
                    "Zarr or Parquet shard store, in two streaming passes with bounded memory.")
    p.add_argument("input", metavar="INPUT", help="LIBSVM text file (a path or a URL: s3://...)")
    p.add_argument("output", metavar="OUTPUT", help="store directory to create (a path or a URL)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--shard-rows", type=int, metavar="N", help="rows per shard")
    size.add_argument("--shard-mb", type=float, metavar="M",
                      help="maximum in-memory MiB per shard (default 128; 16 for Parquet)")
    p.add_argument("--format", choices=("zarr", "parquet"),
                   help="on-disk format (default zarr, or that of --like)")
    p.add_argument("--layout", choices=("auto", "sparse", "dense"), default="auto",
                   help="dense or CSR shards (auto: dense when >= 50%% of values present)")
    p.add_argument("--dtype", choices=("float32", "float64"),
                   help="value type (default float32, or that of --like)")
    p.add_argument("--shuffle", action="store_true",
                   help="globally permute the rows (external shuffle, bounded memory)")
    p.add_argument("--seed", type=int, metavar="S", help="seed of --shuffle")
    p.add_argument("--n-features", type=int, metavar="D",
                   help="number of features (an index beyond it is an error)")
    p.add_argument("--like", metavar="STORE",
                   help="use the classes and number of features of STORE (e.g. for a test set)")
    p.add_argument("--zero-based", action="store_true", help="indices start at 0")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip and count malformed lines instead of stopping")
    p.add_argument("--weights", metavar="FILE",
                   help="per-row sample weights stored with the rows (LIBLINEAR's -W file: one "
                        "number >= 0 per line, one line per data row, in input order; they "
                        "follow their rows through --shuffle)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    add_storage_option(p)
    p.set_defaults(func=_convert)

    p = subparsers.add_parser("info", help="describe a shard store, a model file or a checkpoint directory",
                              description="Print a shard store's metadata and a per-shard summary; a "
                                          "model file's classes, settings and final duality gap; or a "
                                          "checkpoint directory's run (settings, C values, position, each "
                                          "model's gap) and health (do the latest and the previous commit "
                                          "verify; while a run trains into it, each is checked from a "
                                          "snapshot the run kept while it was read).")
    p.add_argument("store", metavar="PATH",
                   help="shard store directory, model file (.npz) or checkpoint directory")
    p.add_argument("--json", action="store_true",
                   help="print it as one JSON object (a store: its whole metadata)")
    p.add_argument("--max-shards", type=int, default=50, metavar="N",
                   help="list at most N shards of a store (default 50; 0 for all)")
    p.add_argument("--verify", action="store_true",
                   help="a store: also read every shard and check it against its recorded checksums "
                        "(exit status 1 and the damaged file named if one does not match); a checkpoint: "
                        "also read every beta version the kept commits name and check their sums")
    add_storage_option(p)
    p.set_defaults(func=_info)

    p = subparsers.add_parser(
        "make-data", help="write synthetic LIBSVM data for tests and benchmarks",
        description="Write a synthetic LIBSVM file whose classes a linear model can learn "
                    "(class prototypes on class-dependent sparse support, plus noise).")
    p.add_argument("output", metavar="OUTPUT", help="file to write (.gz/.bz2/.xz compress)")
    p.add_argument("--rows", type=int, required=True, metavar="N", help="rows (lines) to write")
    p.add_argument("--features", type=int, required=True, metavar="D", help="number of features")
    p.add_argument("--nnz-per-row", type=int, required=True, metavar="Z",
                   help="values per row (dense when equal to --features)")
    p.add_argument("--classes", type=int, required=True, metavar="K", help="number of classes")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--noise", type=float, default=0.5, help="noise level (default 0.5)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    p.set_defaults(func=_make_data)


def _convert(args: argparse.Namespace) -> int:
    from streamwww.io.convert import convert_with_summary

    if args.seed is not None and not args.shuffle:
        raise ValueError("--seed only applies with --shuffle.")
    convert_with_summary(
        args.input, args.output, show_progress=args.show_progress, summary=sys.stdout,
        shard_rows=args.shard_rows, shard_mb=args.shard_mb, format=args.format, layout=args.layout,
        dtype=args.dtype, shuffle=args.shuffle, seed=args.seed, n_features=args.n_features,
        like=args.like, zero_based=args.zero_based, skip_bad_lines=args.skip_bad_lines,
        overwrite=args.overwrite, weights=args.weights, storage_options=storage_options(args))
    return 0


def _info(args: argparse.Namespace) -> int:
    from streamwww.storage.location import located

    where = located(args.store, storage_options(args))
    kind = what_is(where, required=True)
    if kind != "store":
        # Models and checkpoints belong to the layers above io: the training CLI
        # (streamwww.cli.commands) registers their reader on this parser.
        describe = getattr(args, "describe_run", None)
        if describe is None:
            raise ValueError(f"{args.store}: a {kind}; this CLI reads only shard stores")
        return describe(args, kind)
    from streamwww.io.store import open_store
    from streamwww.labels import format_label, summarize_classes  # (SciPy, Zarr: a store's only)
    store = open_store(where)
    meta = store.metadata
    if args.json:
        if args.verify:  # a damaged shard raises ChecksumError: the one-line error, no JSON
            store.verify()
        print(json.dumps(meta, indent=1))
        return 0
    cells = store.n_rows * store.n_features
    density = store.nnz / cells if cells else 0.0
    print(f"store        {store.path}")
    print(f"format       {store.format}, {store.layout}, {store.dtype.name}, "
          f"format version {meta['format_version']}")
    print(f"rows         {store.n_rows}")
    print(f"features     {store.n_features}")
    print(f"nnz          {store.nnz} (density {density:.4g})")
    counts = meta.get("class_counts", [])
    print(f"classes      {store.n_classes}: {summarize_classes(store.classes)}")
    if counts:
        pairs = ", ".join(f"{format_label(c)}: {n}" for c, n in zip(store.classes[:8], counts))
        print(f"class rows   {pairs}{', ...' if len(counts) > 8 else ''}")
    if store.has_weights:  # (they change every model trained on it: never left unsaid)
        source = meta.get("provenance", {}).get("weights") or {}
        print("weights      per row, stored with the rows; train uses them (a row of weight w has the "
              "dual box [0, C w])" + (f"; from {source['path']}" if source.get("path") else ""))
    print(f"shards       {store.n_shards}, "
          f"{int(store.shard_rows.min())}..{int(store.shard_rows.max())} rows, up to "
          f"{max(store.shard_nbytes(i) for i in range(store.n_shards)) / 2**20:.2f} MiB in "
          f"memory")
    print(f"fingerprint  {store.fingerprint}")
    print("checksums    " + ("crc32c of every stored chunk, checked on every read" if store.verified
                             else f"none (format version {store.format_version}): convert again "
                                  f"to add them"))
    if store.metadata_verified:
        print("metadata     sha256 of streamwww.json, checked on open" +
              (", and crc32c of each array's zarr.json, checked on read" if store.format == "zarr"
               else ""))
    else:
        print(f"metadata     not checksummed (format version {store.format_version}): convert "
              f"again to cover it")
    prov = meta.get("provenance", {})
    source = prov.get("source", {})
    if source.get("path"):
        print(f"source       {source['path']} ({source['size']} bytes"
              f"{', ' + source['compression'] if source.get('compression') else ''}; "
              f"text sha256 {source['sha256']})")
        if source.get("skipped_lines"):
            print(f"skipped      {source['skipped_lines']} malformed line(s)")
    options = prov.get("options", {})
    if options:
        print("options      " + ", ".join(f"{k}={v}" for k, v in options.items()
                                          if k != "like") +
              (f", like={options['like']['path']}" if options.get("like") else ""))
    print(f"created      {meta.get('created')} by streamwww {meta.get('streamwww_version')}")
    print()
    print(f"{'shard':>6} {'rows':>10} {'offset':>12} {'nnz':>12} {'MiB':>8} {'classes':>8}  name")
    limit = store.n_shards if args.max_shards <= 0 else min(args.max_shards, store.n_shards)
    for i, s in enumerate(meta["shards"][:limit]):
        print(f"{i:>6} {s['rows']:>10} {s['offset']:>12} {s['nnz']:>12} "
              f"{store.shard_nbytes(i) / 2**20:>8.2f} {s['classes_present']:>8}  {s['name']}")
    if limit < store.n_shards:
        print(f"... {store.n_shards - limit} more shard(s) (--max-shards 0 lists all)")
    if args.verify:
        start = time.monotonic()
        n = store.verify()  # a damaged shard raises ChecksumError: the CLI's one-line error
        what = "checksums and metadata" if store.verified else "metadata only (no checksums)"
        print(f"\nverified     {n} shard(s), {what}, in {time.monotonic() - start:.1f} s")
    return 0


def _make_data(args: argparse.Namespace) -> int:
    from streamwww.io.datagen import make_data

    from streamwww.progress import StageBars

    bars = StageBars() if args.show_progress else None
    start = time.monotonic()
    try:
        result = make_data(args.output, rows=args.rows, features=args.features,
                           nnz_per_row=args.nnz_per_row, classes=args.classes, seed=args.seed,
                           noise=args.noise, overwrite=args.overwrite, progress=bars)
    finally:
        if bars is not None:
            bars.close()
    elapsed = time.monotonic() - start
    print(f"{result['path']}: {result['rows']} rows, {result['bytes'] / 2**20:.1f} MiB of text "
          f"in {elapsed:.1f} s ({result['bytes'] / 2**20 / max(elapsed, 1e-9):.0f} MiB/s)")
    return 0

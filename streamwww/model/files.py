"""Saving and loading fitted models.

A model file is a NumPy ``.npz`` archive (no pickle) with arrays ``coef``
(n_classes, n_features, float64), ``intercept`` (n_classes,), ``classes``
(n_classes,; numbers or unicode strings) and ``meta``: a JSON document
(``format``, ``version``, estimator ``params`` (with ``loss: "cs"`` for a Crammer-Singer
model; none: Weston-Watkins), ``n_iter``, ``converged``,
``seed``, ``history``, ``n_features_in``, ``feature_names_in``).  It is written to a
temporary name, fsynced and renamed, so a model file is complete or absent; on an
object store (a URL, or a :class:`~streamwww.storage.location.Location` with its storage
options) it is one PUT, complete or absent as well.  See docs/MODEL.md.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from streamwww.errors import DataFormatError, OutputPathError, StorageError
from streamwww.model.fitted import FittedModel
from streamwww.storage.fsutil import not_regular, remove_dead_temporaries, same_or_inside, temporary_beside, write_failure
from streamwww.storage.location import Location, is_url, located, location

__all__ = ["save_model", "load_fitted", "model_paths", "check_writable", "check_not_input",
           "refuse_not_regular", "MODEL_FORMAT",
           "MODEL_VERSION"]

MODEL_FORMAT = "streamwww-model"
MODEL_VERSION = 1


def _remote(path) -> Location | None:
    """The Location of ``path`` when it is on an object store, else None (a local path)."""
    if isinstance(path, Location) or is_url(path):
        loc = location(path)
        return None if loc.is_local else loc
    return None


def save_model(model, path) -> Path | Location:
    """Write a fitted :class:`~streamwww.WWClassifier` (or its
    :class:`~streamwww.model.fitted.FittedModel`) to ``path`` (``.npz``) atomically.

    ``path`` is a local path, or a URL or :class:`~streamwww.storage.location.Location` on an
    object store; returns the :class:`~pathlib.Path`, or the Location, written.
    """
    if not isinstance(model, FittedModel):
        model = FittedModel.of(model)  # NotFittedError for an unfitted estimator
    remote = _remote(path)
    path = remote if remote is not None else Path(location(path).path if isinstance(path, Location) else path)
    meta = {"format": MODEL_FORMAT, "version": MODEL_VERSION, "params": dict(model.params),
            "n_iter": int(model.n_iter_), "converged": bool(getattr(model, "converged_", False)),
            "seed": int(getattr(model, "seed_", -1)), "history": list(model.history_),
            "n_features_in": int(model.n_features_in_),
            "feature_names_in": (list(map(str, model.feature_names_in_))
                                 if hasattr(model, "feature_names_in_") else None)}
    meta["params"]["random_state"] = meta["params"]["random_state"] if isinstance(
        meta["params"]["random_state"], (int, type(None))) else None
    cw = meta["params"].get("class_weight")
    if isinstance(cw, dict):  # JSON keys are strings: stored per class, in classes_ order
        meta["params"]["class_weight"] = {"per_class": [float(cw.get(c, 1.0)) for c in model.classes_.tolist()]}
    arrays = dict(coef=model.coef_, intercept=model.intercept_, classes=np.asarray(model.classes_),
                  meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    if remote is not None:
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        remote.write_bytes(buf.getvalue())
        return remote
    refuse_not_regular(path, "the model")  # (also here: save_model is called without check_writable)
    remove_dead_temporaries(path)
    tmp = temporary_beside(path)
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a full disk, a lost mount: one line naming the model, no temporary left
        tmp.unlink(missing_ok=True)
        raise write_failure(path, exc, "the model") from None
    return path


def check_writable(path, what: str = "the model") -> None:
    """Raise :class:`~streamwww.errors.OutputPathError` unless a file can be written at
    ``path`` (a local path, a URL or a Location): found before any work, not after it.
    ``what`` names the file in the message (a model, or the command line's predictions)."""
    where = located(path)
    if not where.is_local:  # an object store: has no folders; a probe object checks access
        probe = where.parent.child(f".{where.name}.probe-{os.getpid()}")
        try:
            if where.isdir():
                raise OutputPathError(f"{where}: cannot write {what} there: it is a directory")
            probe.write_bytes(b"")
            probe.remove()
        except OutputPathError:
            raise
        except Exception as exc:  # credentials, a missing bucket, an unreachable endpoint
            raise OutputPathError(f"{where}: cannot write {what} ({type(exc).__name__}: {exc})") from None
        return
    path = where.local_path
    refuse_not_regular(path, what)
    if path.is_dir():
        raise OutputPathError(f"{path}: cannot write {what} there: it is a directory")
    if not path.parent.is_dir():
        raise OutputPathError(f"{path}: cannot write {what}: the folder {path.parent} does not exist")
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.probe-"):
            pass
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot write {what} ({exc.strerror or exc})") from None


def refuse_not_regular(path, what: str = "the model") -> None:
    """Raise :class:`~streamwww.errors.OutputPathError` when the local ``path`` is a
    symlink, a FIFO, a device or a socket: an output is renamed into place, which would
    replace that node with a regular file (never write through it)."""
    kind = not_regular(path)
    if kind is not None:
        raise OutputPathError(f"{path}: cannot write {what} there: it is {kind}, not a regular file; "
                              f"give a regular file path")


def check_not_input(output, inputs, what: str = "the model") -> None:
    """Raise :class:`~streamwww.errors.OutputPathError` when the local ``output`` is one of
    the command's ``inputs`` (local paths or URLs; URLs and None are skipped), the same
    file through another name, or inside an input directory: found before any work,
    since writing it would destroy what the command reads."""
    local = [None if i is None or is_url(i) else i for i in inputs]
    if output is None or is_url(output):
        return
    hit = same_or_inside(output, local)
    if hit is not None:
        inside = "" if os.path.realpath(output) == os.path.realpath(hit) or not os.path.isdir(hit) \
            else " (a path inside it)"
        raise OutputPathError(f"{output}: cannot write {what} there: it is an input of this command "
                              f"({hit}){inside}; give another output path")


def _not_a_model_directory(path: Path) -> str:
    """The one-line error for a directory given as a model file, saying what it is."""
    from streamwww.io.sniff import what_is  # (what `streamwww info` tells apart)

    kind = what_is(location(str(path)))
    if kind == "checkpoint":
        return (f"{path}: a checkpoint directory, not a model file (.npz); its run writes the model "
                f"to its --model-out file (`streamwww info {path}` names it) when it ends")
    if kind == "store":
        return f"{path}: a shard store, not a model file (.npz)"
    return f"{path}: a directory, not a model file (.npz)"


def load_fitted(path) -> FittedModel:
    """:func:`streamwww.load_model`'s model as a :class:`~streamwww.model.fitted.FittedModel` record, without
    importing scikit-learn (the command line's ``predict``, ``evaluate``, ``info``, ``plot``, ``demo``)."""
    remote = _remote(path)
    path = remote if remote is not None else Path(location(path).path if isinstance(path, Location) else path)
    if remote is None and path.is_dir():
        raise ValueError(_not_a_model_directory(path))
    try:
        source = io.BytesIO(remote.read_bytes()) if remote is not None else path
        with np.load(source, allow_pickle=False) as z:
            arrays = {k: z[k] for k in ("coef", "intercept", "classes", "meta")}
        meta = json.loads(arrays["meta"].tobytes().decode())
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        # (a damaged archive: zipfile checks each member's CRC-32 as it reads it)
        if isinstance(exc, StorageError):
            raise
        if isinstance(exc, FileNotFoundError):
            raise FileNotFoundError(f"{path}: no such model file") from None
        from streamwww.io.sniff import misplaced  # (data given for a model: say what it is)

        wrong = None if remote is not None else misplaced(location(str(path)), "model", str(path))
        raise ValueError(wrong or f"{path}: not a streamwww model file, or a damaged one "
                         f"({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path}: not a streamwww model file")
    if meta.get("version") != MODEL_VERSION:
        raise ValueError(f"{path}: model format version {meta.get('version')} is not supported")
    _check_model(path, arrays, meta)
    params = meta["params"]
    if isinstance(params.get("class_weight"), dict):
        params["class_weight"] = {c: w for c, w in zip(arrays["classes"].tolist(), params["class_weight"]["per_class"])
                                  if w != 1.0}
    attributes = {"classes_": arrays["classes"], "coef_": arrays["coef"], "intercept_": arrays["intercept"],
                  "n_iter_": meta["n_iter"], "history_": meta["history"], "converged_": meta["converged"],
                  "seed_": meta["seed"], "n_features_in_": meta["n_features_in"]}
    if meta.get("feature_names_in"):
        attributes["feature_names_in_"] = np.asarray(meta["feature_names_in"], dtype=object)
    return FittedModel(params, attributes)


def _model_problem(arrays: dict, meta: dict) -> str | None:
    """What makes a model file's arrays and metadata unusable, or None when they are
    consistent: numeric finite ``coef`` (n_classes, n_features) and ``intercept``
    (n_classes,), ``classes`` one distinct sorted label per row of ``coef`` (``predict``
    indexes ``classes`` by a row of ``coef``, ``evaluate`` searches it), and the
    metadata fields :func:`load_fitted` reads, of their types."""
    coef, intercept, classes = arrays["coef"], arrays["intercept"], arrays["classes"]
    if coef.ndim != 2 or coef.dtype.kind not in "fiu":
        return f"coef is a {coef.dtype} array of shape {coef.shape}, not a 2-d numeric one"
    if intercept.ndim != 1 or intercept.dtype.kind not in "fiu":
        return f"intercept is a {intercept.dtype} array of shape {intercept.shape}, not a 1-d numeric one"
    k, n_features = coef.shape
    if k < 2:
        return f"coef has {k} row(s): a model has one per class, at least 2"
    if intercept.shape != (k,):
        return f"intercept has {intercept.shape[0]} values for the {k} rows of coef"
    if classes.ndim != 1 or classes.shape[0] != k:
        return f"{classes.size} classes for the {k} rows of coef"
    for name, a in (("coef", coef), ("intercept", intercept)):
        bad = np.argwhere(~np.isfinite(a))  # (NaN or inf scores every row alike, silently)
        if len(bad):
            where = ", ".join(map(str, bad[0]))
            return f"{name}[{where}] is {a[tuple(bad[0])]}: every coefficient must be a finite number"
    if classes.dtype.kind not in "biufU" or not np.all(classes[1:] > classes[:-1]):
        return "the classes are not distinct labels in sorted order"
    for key, kinds in (("params", dict), ("n_iter", int), ("history", list), ("converged", bool),
                       ("seed", int), ("n_features_in", int)):
        if not isinstance(meta.get(key), kinds):
            return f"its metadata has no {key!r} of type {kinds.__name__}"
    if meta["n_features_in"] != n_features:
        return f"its metadata says {meta['n_features_in']} features, coef has {n_features}"
    names = meta.get("feature_names_in")
    if names is not None and (not isinstance(names, list) or len(names) != n_features):
        return f"feature_names_in does not name the {n_features} features"
    if meta["params"].get("loss", "ww") not in ("ww", "cs"):  # (a model of a loss this version does not know)
        return f"its loss {meta['params']['loss']!r} is not one of 'ww', 'cs'"
    cw = meta["params"].get("class_weight")
    if isinstance(cw, dict) and len(cw.get("per_class", ())) != k:
        return f"class_weight does not give one weight per class ({k})"
    return None


def _check_model(path, arrays: dict, meta: dict) -> None:
    """Raise :class:`~streamwww.errors.DataFormatError` naming ``path`` and the problem
    where :func:`_model_problem` finds one: a model is never used half-valid."""
    problem = _model_problem(arrays, meta)
    if problem is not None:
        raise DataFormatError(f"{path}: not a streamwww model file, or a damaged one ({problem})")


def model_paths(model_out, Cs, many: bool) -> list[Location]:
    """The model file(s) for ``model_out`` (a path, URL or Location): the file itself, or
    ``<stem>-C<value><suffix>`` per ``C`` beside it."""
    out = located(model_out)
    if not many:
        return [out]
    stem, suffix = os.path.splitext(out.name)
    return [out.parent.child(f"{stem}-C{c:g}{suffix or '.npz'}") for c in Cs]

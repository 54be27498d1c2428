"""What ``streamwww info`` says about a model file or a checkpoint directory.

:func:`describe_model` and :func:`describe_checkpoint` read one and return a
JSON-ready summary (``streamwww info PATH --json`` prints it as it is);
:func:`format_model` and :func:`format_checkpoint` turn a summary into the
human lines; :func:`gap_histories` gives the gap series that
``streamwww plot`` draws.  A checkpoint's health is checked without training: the latest
commit's manifest checksum and the hash of the weights it names, and, on
request, the sums of every ``beta`` version it names (read from disk); the same
for the previous commit, which a resume falls back to.  Only the CLI
(:mod:`streamwww.cli.commands`) uses this module.

A checkpoint may be read while a run trains into it (:func:`describe_checkpoint`):
each commit is checked from a snapshot, and a failure is damage only when the
commit read is still one of the two the run keeps once the read is over (see
:func:`_settled`).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any, Callable

import numpy as np

from streamwww.errors import CheckpointError, StorageError, StreamwwwError
from streamwww.model.files import load_fitted, model_paths
from streamwww.state.checkpoint import MANIFEST, PREVIOUS, CheckpointDir, manifest_checksum
from streamwww.storage.fsutil import lock_held
from streamwww.storage.location import located

__all__ = ["describe_model", "describe_checkpoint", "format_model", "format_checkpoint", "gap_histories",
           "plain", "json_label"]


def json_label(v):
    """A class label for JSON: a string stays one, an integral number becomes an int."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def plain(value):
    """``value`` with numpy types as Python ones and non-finite floats as None (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _last(history: list[dict]) -> dict[str, Any]:
    h = history[-1] if history else {}
    return {k: h.get(k) for k in ("epoch", "primal", "dual", "gap", "rel_gap", "time")}


def describe_model(path, storage_options: dict | None = None) -> dict[str, Any]:
    """A model file's classes, features, settings, and how its training ended.

    Parameters
    ----------
    path : str or Path
        A model file (``.npz``) written by :func:`streamwww.save_model` or ``streamwww train``
        (a path or a URL).
    storage_options : dict, optional
        Options of a URL's file system.

    Returns
    -------
    dict
        ``kind`` ('model'), ``path``, ``loss`` ('ww' or 'cs'), ``classes``, ``n_classes``, ``n_features``, ``C``,
        ``class_weight``, ``settings`` (the estimator parameters), ``epochs``,
        ``converged``, ``seed``, ``final`` (the last evaluated epoch: ``epoch``,
        ``primal``, ``dual``, ``gap``, ``rel_gap``, ``time``), ``history_length``.

    Raises
    ------
    ValueError
        If the file is not a streamwww model.
    """
    path = located(path, storage_options)
    model = load_fitted(path)
    params = dict(model.params)
    cw = params.get("class_weight")
    if isinstance(cw, dict):
        cw = [{"label": json_label(c), "weight": float(w)} for c, w in cw.items()]
    return plain({"kind": "model", "path": str(path), "loss": model.loss, "classes": [json_label(c) for c in model.classes_],
                  "n_classes": len(model.classes_), "n_features": int(model.n_features_in_),
                  "C": float(model.C), "class_weight": cw,
                  "settings": {k: v for k, v in params.items() if k not in ("class_weight", "loss")},
                  "epochs": int(model.n_iter_), "converged": bool(model.converged_), "seed": int(model.seed_),
                  "final": _last(model.history_), "history_length": len(model.history_)})


#: snapshots of a commit a reader takes before it gives up on a run that replaces its
#: commits faster than they are read (each try reads the commit's files once)
SNAPSHOT_TRIES = 8


def _check_commit(ckpt: CheckpointDir, name: str, check_beta: Callable[[dict], str] | None
                  ) -> tuple[dict[str, Any], str | None, StorageError | None]:
    """One snapshot of one commit's health: present, manifest checksum, weights hash, and
    (``check_beta``) its beta; with the identity of the manifest read (None: none was
    read whole) and the I/O error that stopped the check, if one did."""
    out: dict[str, Any] = {"file": name, "present": ckpt.location.child(name).isfile()}
    if not out["present"]:
        return out, None, None
    ident = None
    try:
        manifest = ckpt.load_manifest(name)
        ident = manifest_checksum(manifest)
        out.update(step=manifest.get("step"), epoch=manifest["cursor"]["epoch"], pos=manifest["cursor"]["pos"])
        ckpt.load_W(manifest)
        ckpt.load_W_sets(manifest)
        out["beta"] = check_beta(manifest) if check_beta is not None else "not checked (--verify checks it)"
    except StorageError as exc:  # a file that cannot be read says nothing of its bytes: an error, not damage
        return out, ident, exc
    except (CheckpointError, KeyError, ValueError, OSError) as exc:
        out.update(intact=False, error=str(exc))
        return out, ident, None
    out["intact"] = True
    return out, ident, None


def _kept(ckpt: CheckpointDir) -> dict[str, str | None]:
    """The identity of each manifest there now (None: absent): the checksum of its
    content, or a hash of bytes that are no manifest's."""
    kept: dict[str, str | None] = {}
    for name in (MANIFEST, PREVIOUS):
        try:
            raw = ckpt.location.child(name).read_bytes()
        except FileNotFoundError:
            kept[name] = None
            continue
        try:
            body = json.loads(raw.decode())
        except (ValueError, UnicodeDecodeError):
            body = None
        kept[name] = (manifest_checksum(body) if isinstance(body, dict)
                      else "bytes " + hashlib.blake2b(raw, digest_size=16).hexdigest())
    return kept


def _settled(ckpt: CheckpointDir, name: str, check_beta: Callable[[dict], str] | None,
             live: bool = False) -> dict[str, Any]:
    """One commit's health from a snapshot that a run training into the directory cannot
    have changed while it was read.

    A run never changes or deletes a file that ``manifest.json`` or ``manifest.prev.json``
    names (it deletes what a commit superseded only once the manifests moved past it, and
    replaces manifests by rename or one PUT, never in place). So a failure is damage when
    the manifest read is still one of those two after the read (it then was throughout);
    a manifest that failed to load is damage when the same bytes were there before and
    after. Otherwise the run moved on during the read: the newer commit is read, up to
    :data:`SNAPSHOT_TRIES` times (then ``checked`` is False). With ``live`` (a trainer
    holds LOCK) a missing ``manifest.json`` is looked for on every try, and is never
    reported absent: a commit renames the latest to the previous, then the new one into
    place, and a trainer paused between the two leaves none for as long as it is paused.
    No lock is taken, and the trainer does nothing for readers.
    """
    for attempt in range(SNAPSHOT_TRIES):
        before = _kept(ckpt)
        out, ident, io_error = _check_commit(ckpt, name, check_beta)
        out["tries"] = attempt + 1
        if out.get("intact"):
            return out
        after = _kept(ckpt)
        if not out["present"]:
            settled = before[name] is None and after[name] is None and not (live and name == MANIFEST)
        else:
            settled = ident in after.values() if ident is not None else before[name] == after[name]
        if settled:
            if io_error is not None:
                raise io_error
            return out
        time.sleep(min(0.2, 0.005 * 2 ** attempt))  # (the run's renames of the manifests take moments)
    return {"file": name, "present": True, "checked": False, "tries": SNAPSHOT_TRIES}


def _beta_check(path, settings: dict[str, Any], storage_options: dict | None = None) -> Callable[[dict], str]:
    """A check of a manifest's ``beta`` (read and sum every version it names; needs the
    store for the shard sizes), the store opened once for every snapshot."""
    from streamwww.engine.run import check_manifest
    from streamwww.io import open_store

    data = settings.get("data", {})
    if data.get("kind") != "store":
        return lambda manifest: "not checked (the run trained on in-memory arrays)"
    try:
        store = open_store(located(data["path"], storage_options))
    except (StreamwwwError, FileNotFoundError, ValueError) as exc:
        reason = f"not checked (the store cannot be opened: {exc})"
        return lambda manifest: reason

    def check(manifest: dict[str, Any]) -> str:
        if str(manifest.get("data", {}).get("fingerprint", "")).split(":")[0] != store.fingerprint:
            return f"not checked (the store at {data['path']} is not the data of this checkpoint)"
        check_manifest(path, manifest, store)  # raises CheckpointError naming the damaged shard
        return "verified"

    return check


def describe_checkpoint(path, verify: bool = False, storage_options: dict | None = None) -> dict[str, Any]:
    """A checkpoint directory's run: settings, data, position, each model's state, and health.

    Nothing is trained or changed; the directory's lock is not taken, and a run may be
    training into it: each commit is checked from a snapshot that the run cannot have
    changed while it was read (a commit it replaced meanwhile is read again, see
    :func:`_settled`), so what the run replaces as it goes is never reported as damage,
    and damage to a commit it keeps is.

    Parameters
    ----------
    path : str or Path
        A checkpoint directory (``train --checkpoint-dir``).
    verify : bool, default=False
        Also read every ``beta`` version the kept commits name and compare
        their sums with the manifests' (reads the whole dual state; needs the
        data store, at the path the checkpoint recorded, for the shard sizes).
    storage_options : dict, optional
        Options of the file system of URLs (the directory, the recorded store).

    Returns
    -------
    dict
        ``kind`` ('checkpoint'), ``path``, ``settings`` (the solver
        configuration), ``estimator_params``, ``data``, ``run``, ``Cs``,
        ``model_files`` (where the run writes its model(s)), ``cursor`` (``epoch``, ``pos``, ``train_time``), ``step``, ``finished``,
        ``created``, ``models`` (per model: ``C``, ``epochs``, ``status``, the
        ``last`` evaluated epoch, ``history_length``) and ``health``:
        ``latest`` and ``previous`` (each: ``present``, ``intact``, ``step``,
        ``epoch``, ``beta``, ``error``), ``ok`` (the latest commit is intact)
        and ``resumes_from`` (the commit a resume would use, or None), and
        ``in_progress``: a trainer holds the directory's ``LOCK`` (local
        directories). Each commit also has ``tries`` (the snapshots read); one that
        the run replaced on every try has ``checked`` False (then ``ok`` is None).

    Raises
    ------
    CheckpointError
        If neither manifest can be read (no run's settings at all).
    """
    path = located(path, storage_options)
    in_progress = path.is_local and lock_held(path.local_path / "LOCK")
    with CheckpointDir(path, lock=False) as ckpt:
        manifest = ckpt.load_settings()
        check_beta = _beta_check(ckpt.path, manifest, storage_options) if verify else None
        latest = _settled(ckpt, MANIFEST, check_beta, in_progress)
        previous = _settled(ckpt, PREVIOUS, check_beta, in_progress)
    models = [{"C": float(r["C"]), "epochs": int(r["n_iter"]), "status": r["status"],
               "last": _last(r["history"]), "history_length": len(r["history"])}
              for r in manifest.get("results", [])]
    resumes_from = (MANIFEST if latest.get("intact") else
                    PREVIOUS if previous.get("intact") and latest.get("checked") is not False else None)
    run = dict(manifest.get("run", {}))
    Cs = manifest.get("config", {}).get("Cs", [])
    if run.get("model_out") and not run.get("cv"):
        files = model_paths(run["model_out"], Cs, many=run.get("C_is_list", len(Cs) > 1))
    else:  # a cross-validation run writes its best model only
        files = [run["model_out"]] if run.get("model_out") else []
    return plain({"kind": "checkpoint", "path": str(path), "format_version": manifest.get("version"),
                  "settings": manifest.get("config", {}), "estimator_params": manifest.get("estimator_params", {}),
                  "data": manifest.get("data", {}), "run": run, "Cs": Cs,
                  "model_files": [str(f) for f in files],
                  "cursor": manifest.get("cursor", {}), "step": manifest.get("step"),
                  "finished": bool(manifest.get("finished", False)), "created": manifest.get("created"),
                  "models": models,
                  "health": {"latest": latest, "previous": previous, "in_progress": in_progress,
                             "ok": None if latest.get("checked") is False else bool(latest.get("intact")),
                             "resumes_from": resumes_from}})


LOSS_NAMES = {"ww": "Weston-Watkins (ww)", "cs": "Crammer-Singer (cs)"}


def _g(x, fmt: str = ".8g") -> str:
    return "-" if x is None else format(x, fmt)


def format_model(info: dict[str, Any]) -> list[str]:
    """The human lines of :func:`describe_model`'s summary."""
    classes = info["classes"]
    shown = ", ".join(map(str, classes[:10])) + (", ..." if len(classes) > 10 else "")
    s = info["settings"]
    f = info["final"]
    cw = info["class_weight"]
    cw_text = ("none" if cw is None else cw if isinstance(cw, str)
               else ", ".join(f"{d['label']}: {d['weight']:g}" for d in cw))
    return [f"model        {info['path']}",
            f"loss         {LOSS_NAMES[info['loss']]}",
            f"classes      {info['n_classes']}: {shown}",
            f"features     {info['n_features']}",
            f"C            {info['C']:g}",
            f"class weight {cw_text}",
            "settings     " + ", ".join(f"{k}={v}" for k, v in s.items()),
            f"training     {info['epochs']} epochs, {'converged' if info['converged'] else 'not converged'}, "
            f"seed {info['seed']}",
            f"final        primal {_g(f['primal'])}, dual {_g(f['dual'])}, relative gap {_g(f['rel_gap'], '.3e')}"
            f" (epoch {_g(f['epoch'], 'd')}; {info['history_length']} evaluated epochs in the history)"]


def _commit_line(c: dict[str, Any]) -> str:
    if not c["present"]:
        return "absent"
    if c.get("checked") is False:
        return (f"not checked: the run was replacing it on each of {c['tries']} tries to read it; run "
                f"info again, or once the run ends")
    where = f"step {c.get('step')}, epoch {c.get('epoch')}, shard {c.get('pos')}" if "step" in c else ""
    if c.get("intact"):
        return f"intact ({where}; manifest checksum and weights hash match; beta {c['beta']})"
    return f"DAMAGED{' (' + where + ')' if where else ''}: {c.get('error')}"


def format_checkpoint(info: dict[str, Any]) -> list[str]:
    """The human lines of :func:`describe_checkpoint`'s summary."""
    cfg, data, run, cur, health = info["settings"], info["data"], info["run"], info["cursor"], info["health"]
    created = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["created"]))
               if info.get("created") else "?")
    lines = [f"checkpoint   {info['path']} (format version {info['format_version']})",
             f"data         {data.get('path', data.get('kind'))}: {data.get('n_rows')} rows, "
             f"{data.get('n_features')} features",
             "C values     " + ", ".join(f"{c:g}" for c in info["Cs"][:12]) + (", ..." if len(info["Cs"]) > 12 else ""),
             f"loss         {LOSS_NAMES[cfg.get('loss', 'ww')]}",
             "settings     " + ", ".join(f"{k}={v}" for k, v in cfg.items() if k not in ("Cs", "splits", "loss")),
             f"class weight {info['estimator_params'].get('class_weight')}",
             f"position     epoch {cur.get('epoch')}, {cur.get('pos')} shard(s) into the next; solver time "
             f"{_g(cur.get('train_time'), '.1f')} s; step {info['step']}, committed {created}"
             + ("; finished" if info["finished"] else "; not finished (continue: streamwww resume "
                + info["path"] + ")")]
    if run.get("cv"):
        lines.append(f"cross-val.   {run['cv']} folds over C in {run.get('cv_Cs')}")
    if info["model_files"]:
        lines.append("model files  " + ", ".join(info["model_files"]) + " (written when the run ends)")
    lines.append("")
    lines.append(f"{'model':>5} {'C':>10} {'epochs':>7} {'status':>10} {'rel. gap':>10} {'primal':>14} "
                 f"{'dual':>14} {'history':>8}")
    for i, m in enumerate(info["models"]):
        last = m["last"]
        lines.append(f"{i:>5} {m['C']:>10g} {m['epochs']:>7d} {m['status']:>10} {_g(last['rel_gap'], '.3e'):>10} "
                     f"{_g(last['primal'], '.8g'):>14} {_g(last['dual'], '.8g'):>14} {m['history_length']:>8d}")
    lines.append("")
    if health.get("in_progress"):
        c = health["latest"]
        state = ("not checked" if c.get("checked") is False or not c["present"] else
                 "intact" if c.get("intact") else "DAMAGED")
        lines.append(f"health       commit at step {c.get('step', '?')}, epoch {c.get('epoch', '?')}: {state}; a run "
                     f"is still training (it holds LOCK; each commit is checked from a snapshot it kept "
                     f"while it was read)")
    lines.append(f"latest       {_commit_line(health['latest'])}")
    lines.append(f"previous     {_commit_line(health['previous'])}")
    if health["latest"].get("checked") is False:
        lines.append("resume uses  not known until a commit is checked")
        return lines
    lines.append("resume uses  " + (health["resumes_from"] or "nothing: no intact commit is left; train again "
                                    "with a new --checkpoint-dir"))
    return lines


def gap_histories(path, storage_options: dict | None = None) -> tuple[list[dict[str, Any]], str]:
    """Each model's relative duality gap per evaluated epoch, from a checkpoint directory or a model file.

    Parameters
    ----------
    path : str or Path
        A checkpoint directory (its newest readable manifest: every model of
        the run, as far as it got) or a model file (``.npz``); a path or a URL.
    storage_options : dict, optional
        Options of a URL's file system.

    Returns
    -------
    series : list of dict
        Per model: ``label`` ('C=...'), ``C``, and lists ``epoch``, ``time``
        (solver seconds) and ``rel_gap``.
    title : str
        A title naming the path.
    """
    path = located(path, storage_options)
    if path.child(MANIFEST).isfile() or path.child(PREVIOUS).isfile():
        with CheckpointDir(path, lock=False) as ckpt:
            manifest = ckpt.load_settings()
        runs = [(float(r["C"]), r["history"]) for r in manifest.get("results", [])]
        title = f"{path} (checkpoint, epoch {manifest.get('cursor', {}).get('epoch')})"
    else:
        model = load_fitted(path)
        runs = [(float(model.C), list(model.history_))]
        title = f"{path} (model)"
    counts: dict[float, int] = {}
    for C, _ in runs:
        counts[C] = counts.get(C, 0) + 1
    series = []
    for i, (C, history) in enumerate(runs):
        label = f"C={C:g}" if counts[C] == 1 else f"C={C:g} (model {i})"  # e.g. cross-validation folds
        series.append({"label": label, "C": C, "epoch": [h["epoch"] for h in history],
                       "time": [h.get("time", float("nan")) for h in history],
                       "rel_gap": [h.get("rel_gap") for h in history]})
    return series, title

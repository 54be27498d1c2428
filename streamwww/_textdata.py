"""A LIBSVM text file given where training expects a shard store: converted into a store
first, as ``streamwww convert FILE`` with its defaults would. The command line's
``streamwww train FILE``, :func:`streamwww.train` and :meth:`streamwww.WWClassifier.fit`
share this one path."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

# where a LIBSVM file given for training is converted: in the run's checkpoint directory
TEXT_STORE = "data.zarr"


def is_text_file(data: Any, storage_options: dict | None = None) -> bool:
    """Whether ``data`` names a file (not a directory): LIBSVM text for training to convert.

    Parameters
    ----------
    data : object
        What training was given: a path or URL is looked at; arrays, store objects,
        directories and paths where nothing is are not text files.
    storage_options : dict, optional
        Options of the file system of a URL.

    Returns
    -------
    bool
    """
    if not isinstance(data, (str, os.PathLike)):
        return False
    from streamwww.storage.location import located

    where = located(data, storage_options)
    return where.exists() and not where.isdir()


def convert_into_run(data: str | os.PathLike, checkpoint_dir: Any, *, storage_options: dict | None = None,
                     zero_based: bool = False, show_progress: bool = False,
                     summary: IO[str] | None = None, dir_name: str = "checkpoint_dir") -> str:
    """Convert the LIBSVM file ``data`` into ``CHECKPOINT_DIR/data.zarr`` and return the store's path.

    Converted on every run, never trusted unseen: a store is known by its fingerprint, and
    telling that the file is still the one converted would mean reading it all anyway. The
    same file gives the same store, bit for bit, so a checkpoint of it continues (``resume``
    reads the store and converts nothing); a store already there that a checkpoint trains on
    is never replaced by other data.

    Parameters
    ----------
    data : str or path-like
        The LIBSVM text file (optionally .gz/.bz2/.xz), a path or a URL.
    checkpoint_dir : str, path-like or Location
        The run's checkpoint directory (made if missing; removed again if this call made
        it and the conversion fails).
    storage_options : dict, optional
        Options of the file system of URLs among ``data`` and ``checkpoint_dir``.
    zero_based : bool, default=False
        The file's indices start at 0.
    show_progress : bool, default=False
        Progress bars while converting.
    summary : text stream, optional
        Where the one-line summary of the conversion goes (None: nowhere).
    dir_name : str, default='checkpoint_dir'
        What errors call ``checkpoint_dir`` (the command line: ``--checkpoint-dir``).

    Returns
    -------
    str
        The store's path (or URL).

    Raises
    ------
    ValueError
        If ``checkpoint_dir`` holds a run on other data (nothing is changed then).
    """
    from streamwww.io import open_store
    from streamwww.io.convert import convert_with_summary
    from streamwww.io.sniff import is_store
    from streamwww.state.checkpoint import CheckpointDir
    from streamwww.storage.location import located

    ck = located(checkpoint_dir, storage_options)
    out = ck.child(TEXT_STORE)

    def convert(to):
        # (the summary names the store trained on: the temporary name is an implementation detail)
        return convert_with_summary(data, to.local_path if to.is_local else to.url,
                                    show_progress=show_progress, summary=summary, shown=out.url,
                                    zero_based=zero_based, overwrite=True, storage_options=storage_options)

    made = not ck.exists()
    with CheckpointDir(ck) as held:  # under the directory's lock: never replaced under a run on it
        if not is_store(out):
            try:
                return convert(out).path
            except BaseException:
                if made:  # (a bad file: the directory this call made goes with its conversion)
                    held.close()
                    ck.remove(recursive=True)
                raise
        incoming = ck.child(f".{TEXT_STORE}.incoming")
        try:
            new = convert(incoming).fingerprint
        finally:
            incoming.remove(recursive=True)
        old = open_store(out)
        if new == old.fingerprint:  # the same data: the store there is this one, bit for bit
            return old.path
        if held.has_checkpoint():
            source = old.metadata.get("provenance", {}).get("source", {}).get("path", "another file")
            raise ValueError(f"{ck.url} holds a run on the data of {source} ({out.url}); {data} is other "
                             f"data: give another {dir_name} (nothing was changed)")
        return convert(out).path  # a store without a run: replaced


@contextmanager
def text_as_store(data: Any, checkpoint_dir: Any = None, *,
                  storage_options: dict | None = None) -> Iterator[Any]:
    """``data`` as training takes it: a LIBSVM text file converted into a store, anything else as it is.

    With a ``checkpoint_dir`` the store is ``CHECKPOINT_DIR/data.zarr`` (as ``streamwww train
    FILE`` makes it: :func:`convert_into_run`), kept with the run; without one it is made in
    a temporary directory that is removed when the ``with`` block ends.

    Parameters
    ----------
    data : object
        A path or URL of a LIBSVM file (optionally .gz/.bz2/.xz); anything else is yielded unchanged.
    checkpoint_dir : str, path-like or Location, optional
        The run's checkpoint directory.
    storage_options : dict, optional
        Options of the file system of URLs.

    Yields
    ------
    object
        The converted store's path, or ``data``.
    """
    if not is_text_file(data, storage_options):
        yield data
        return
    if checkpoint_dir is not None:
        yield convert_into_run(data, checkpoint_dir, storage_options=storage_options)
        return
    from streamwww.io.convert import convert_with_summary

    tmp = tempfile.mkdtemp(prefix="streamwww-text-")
    try:
        yield convert_with_summary(data, os.path.join(tmp, TEXT_STORE), show_progress=False, summary=None,
                                   storage_options=storage_options).path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

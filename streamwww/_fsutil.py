"""Durability helpers shared by store writers and checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["fsync_path", "fsync_tree"]


def fsync_path(path) -> None:
    """fsync one file or directory (a directory's fsync makes renames in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root) -> None:
    """fsync every file and directory below ``root`` (and ``root`` itself)."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            fsync_path(os.path.join(dirpath, name))
        fsync_path(Path(dirpath))

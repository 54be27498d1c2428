"""streamwww: exact Weston-Watkins linear multiclass SVMs on data larger than memory."""

__version__ = "0.1.0"

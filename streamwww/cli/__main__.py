"""``python -m streamwww.cli``: the ``streamwww`` command."""

if __name__ == "__main__":  # (imported, e.g. by a walk over the package, it runs nothing)
    from streamwww.cli import run

    run()

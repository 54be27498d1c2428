"""The dual state of a run: ``beta`` per shard (:mod:`.betas`: versions on disk, resident or
in a scratch file, :mod:`.scratch`) and the checkpoint that commits it with ``W``
(:mod:`.checkpoint`)."""

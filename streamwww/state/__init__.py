"""The dual state of a run: ``beta`` per shard (:mod:`.betas`: the current versions, resident
or in a scratch file, :mod:`.scratch`; the stored versions, :mod:`.versions`) and the
checkpoint that commits it with ``W`` (:mod:`.checkpoint`, by the protocol of :mod:`.commit`)."""

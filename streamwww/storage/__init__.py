"""Where bytes live: local paths and object-store URLs (:mod:`.location`, :mod:`.obstore`)
and file-system helpers (:mod:`.fsutil`: fsync, scratch directories, one-line I/O errors).
Nothing here knows stores, models or training."""

"""The trained model: its arrays and scores (:mod:`.fitted`), its file format
(:mod:`.files`: ``save_model``, ``load_fitted``; ``streamwww.load_model`` makes an estimator of it) and prediction over a store (:mod:`.predict`)."""

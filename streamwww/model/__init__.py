"""The trained model: its arrays and scores (:mod:`.fitted`), its file format
(:mod:`.files`: ``load_model``, ``save_model``) and prediction over a store (:mod:`.predict`)."""

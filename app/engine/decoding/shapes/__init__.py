"""The shapes a GPU compiles for: pass sizes fixed to buckets (`buckets.py`) and keys padded to a
few widths (`padded_cache.py`), so that no pass meets a shape the warm-up did not build."""

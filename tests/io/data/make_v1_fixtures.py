"""Make the tiny version-1 fixture stores (run once, with streamwww at commit 4a462c6)."""
import numpy as np, scipy.sparse as sp
from streamwww.io import write_store
rng = np.random.default_rng(20261124)
X = sp.random(60, 7, density=0.4, format="csr", random_state=rng, dtype=np.float64)
X.data = np.round(X.data * 4 - 2, 3)
y = rng.integers(0, 3, 60) * 2 - 1.0   # labels -1, 1, 3
for fmt in ("zarr", "parquet"):
    s = write_store(f"tests/io/data/v1-{fmt}", X, y, shard_rows=25, format=fmt, dtype=np.float32)
    print(fmt, s, s.fingerprint)
np.savez("tests/io/data/v1-arrays.npz", data=X.data, indices=X.indices, indptr=X.indptr, y=y)

"""Shrink a botocore wheel to the services S3 needs, for a lent GPU machine's 64 MiB carry.

    python tools/trim_botocore_wheel.py .whl/botocore-*.whl

botocore's wheel (about 16 MB) holds the API models of every AWS service; moto's S3
server, s3fs and boto3 load those of S3 and the credential services alone. The wheel is
rewritten in place without the other services' ``botocore/data/<service>/`` folders (and
their lines of ``RECORD``), about 1 MB. For the benchmark's carry only (tools/gpu_session.sh,
step ``storage``), never for an installation of streamwww.
"""

from __future__ import annotations

import os
import re
import sys
import zipfile

KEEP = {"s3", "s3control", "sts", "sso", "sso-oidc"}
_SERVICE = re.compile(r"botocore/data/([^/]+)/")


def _dropped(name: str) -> bool:
    m = _SERVICE.match(name)
    return bool(m) and m.group(1) not in KEEP


def trim(path: str) -> None:
    tmp = path + ".tmp"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            if _dropped(item.filename):
                continue
            data = zin.read(item.filename)
            if item.filename.endswith(".dist-info/RECORD"):
                data = "".join(line for line in data.decode().splitlines(keepends=True)
                               if not _dropped(line)).encode()
            zout.writestr(item, data)
    os.replace(tmp, path)
    print(f"{path}: {os.path.getsize(path) / 2**20:.1f} MiB")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        trim(p)

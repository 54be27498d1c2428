"""Whole-object GETs on S3 through obstore, where s3fs costs the reading process its CPU.

Why not s3fs for these reads: a streamed epoch from ``s3://`` fetches every shard's
objects (four per Zarr shard, one per Parquet shard), and s3fs's client
(aiobotocore: request signing, header parsing and the body's reads in Python)
spends far more of the reading process's CPU per GET than obstore (Rust's
``object_store``) does (docs/STORAGE.md, "The S3 client of reads"). On a machine whose
cores train, that CPU is the difference between an epoch from S3 and one from
the local disk. Not pyarrow's S3 file system either: it sends a HEAD before
every GET (twice the requests and round trips).

What goes through here: :meth:`~streamwww.storage.location.Location.read_bytes` and
:meth:`~streamwww.storage.location.Location.read_many` of ``s3://`` (and ``s3a://``)
locations — shard chunks and objects, manifests, checkpoint files — and the metadata
reads of the Zarr arrays a shard read opens (:meth:`Reader.zarr_root`), when obstore
is installed (the ``s3`` extra) and every storage option has an obstore
equivalent (:func:`s3_config`); anything else (writes, listings, deletes,
opening a store) stays with s3fs, and so do reads whose options obstore cannot
express. Credentials are resolved as s3fs resolves them: explicit options, else
botocore's chain (environment, shared files, profiles, instance roles), handed
to obstore by a credential provider. ``STREAMWWW_S3_CLIENT=s3fs`` turns this off.

A read that fails here is retried through s3fs by the caller; where s3fs then
succeeds (a region or endpoint obstore resolved differently), obstore is not
used again for that bucket and options, and a warning says so once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

__all__ = ["reader", "s3_config", "give_up"]

logger = logging.getLogger(__name__)

PROTOCOLS = ("s3", "s3a")
# s3fs options that need no equivalent here: read behaviour of s3fs itself
_IGNORED = {"max_concurrency", "default_block_size", "default_fill_cache", "default_cache_type",
            "skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths",
            "cache_regions", "asynchronous", "loop"}
_CLIENT_KWARGS = {"region_name", "endpoint_url"}
_CONFIG_KWARGS = {"connect_timeout", "read_timeout", "retries"}
# botocore's defaults, so that both clients give up after about the same time
_CONNECT_TIMEOUT_S = 60.0
_READ_TIMEOUT_S = 60.0
_ATTEMPTS = 5


def _bool(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def s3_config(storage_options: Mapping[str, Any]) -> dict | None:
    """obstore's settings for s3fs's ``storage_options``, or None when an option has no
    equivalent (the reads then stay with s3fs). Returned keys: ``config`` (S3Store's),
    ``client_options``, ``retry_config`` and ``profile`` (botocore's, for credentials)."""
    opts = dict(storage_options)
    client_kwargs = dict(opts.pop("client_kwargs", None) or {})
    config_kwargs = dict(opts.pop("config_kwargs", None) or {})
    key = opts.pop("key", None) or opts.pop("username", None)
    secret = opts.pop("secret", None) or opts.pop("password", None)
    token = opts.pop("token", None)
    anon = _bool(opts.pop("anon", False))
    nested_endpoint = client_kwargs.pop("endpoint_url", None)
    endpoint = opts.pop("endpoint_url", None) or nested_endpoint
    use_ssl = _bool(opts.pop("use_ssl", True))
    profile = opts.pop("profile", None)
    region = client_kwargs.pop("region_name", None)
    retries = config_kwargs.pop("retries", None) or {}
    connect = config_kwargs.pop("connect_timeout", _CONNECT_TIMEOUT_S)
    read = config_kwargs.pop("read_timeout", _READ_TIMEOUT_S)
    for name in _IGNORED:
        opts.pop(name, None)
    extra_retry = set(retries) - {"max_attempts", "total_max_attempts", "mode"}
    if opts or client_kwargs or config_kwargs or extra_retry or (key is None) != (secret is None):
        return None
    if endpoint is None:  # as botocore: the environment may name the endpoint
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    config: dict[str, Any] = {}
    if endpoint:
        if "://" not in endpoint:
            endpoint = ("https://" if use_ssl else "http://") + endpoint
        config["endpoint"] = endpoint
    if region:
        config["region"] = region
    if anon:
        config["skip_signature"] = True
    elif key is not None:
        config.update(access_key_id=str(key), secret_access_key=str(secret))
        if token:
            config["session_token"] = str(token)
    attempts = int(retries.get("total_max_attempts", retries.get("max_attempts", _ATTEMPTS)))
    return {"config": config,
            "client_options": {"allow_http": bool(endpoint and endpoint.startswith("http://")),
                               "connect_timeout": timedelta(seconds=float(connect)),
                               "timeout": timedelta(seconds=float(read))},
            "retry_config": {"max_retries": max(0, attempts - 1),
                             "retry_timeout": timedelta(seconds=float(connect) + float(read))},
            "profile": profile, "signed": not anon and key is None}


class _BotocoreCredentials:
    """obstore's credential provider over botocore's chain (what s3fs would use)."""

    def __init__(self, profile: str | None):
        import botocore.session

        self._session = botocore.session.Session(profile=profile)
        self._credentials = self._session.get_credentials()
        if self._credentials is None:
            raise ValueError("botocore found no credentials")

    def region(self) -> str | None:
        return self._session.get_config_variable("region")

    def __call__(self) -> dict:
        frozen = self._credentials.get_frozen_credentials()
        # asked again within minutes: botocore refreshes temporary credentials itself
        return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key,
                "token": frozen.token, "expires_at": datetime.now(timezone.utc) + timedelta(minutes=5)}


class Reader:
    """Whole-object GETs on one bucket, concurrent, from any thread."""

    def __init__(self, bucket: str, settings: dict):
        from obstore.store import S3Store

        config = dict(settings["config"])
        provider = None
        if settings["signed"]:  # (no key in the options: botocore's chain finds one)
            provider = _BotocoreCredentials(settings["profile"])
            if "region" not in config and provider.region():
                config["region"] = provider.region()
        if "region" not in config:
            config["region"] = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        self.bucket = bucket
        self._zarr = None
        self._store = S3Store(bucket, config=config, client_options=settings["client_options"],
                              retry_config=settings["retry_config"], credential_provider=provider)

    def get_many(self, paths: Sequence[str]) -> list[Any]:
        """The objects ``bucket/key`` in ``paths`` as read-only buffers (obstore's ``Bytes``,
        no copy), ``None`` for a missing one; all requests at once (on fsspec's I/O event
        loop, which serves every calling thread)."""
        import fsspec.asyn

        keys = [self.key(p) for p in paths]
        return fsspec.asyn.sync(fsspec.asyn.get_loop(), self._gather, keys)

    def get(self, path: str) -> Any:
        """One object as a read-only buffer (FileNotFoundError when there is none)."""
        got = self.get_many([path])[0]
        if got is None:
            raise FileNotFoundError(f"{path}: no such object")
        return got

    def zarr_root(self):
        """A read-only Zarr store at the bucket's root over this reader's client (Zarr's
        ``ObjectStore``): arrays opened through it read their metadata with obstore too."""
        if self._zarr is None:
            from zarr.storage import ObjectStore  # (ImportError before Zarr 3.0.3)

            self._zarr = ObjectStore(self._store, read_only=True)
        return self._zarr

    def key(self, path: str) -> str:
        """The key of ``bucket/key`` in this reader's bucket."""
        bucket, _, key = path.partition("/")
        if bucket != self.bucket or not key:
            raise ValueError(f"{path} is not an object of bucket {self.bucket}")
        return key

    async def _gather(self, keys: list[str]) -> list[Any]:
        import asyncio

        return list(await asyncio.gather(*(self._one(k) for k in keys)))

    async def _one(self, key: str) -> Any:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            got = await obstore.get_async(self._store, key)
            return await got.bytes_async()
        except (NotFoundError, FileNotFoundError):
            return None


_READERS: dict[tuple, Reader | None] = {}
_LOCK = threading.Lock()


def _cache_key(protocol: str, bucket: str, storage_options: Mapping[str, Any]) -> tuple:
    from fsspec.utils import tokenize

    return (os.getpid(), protocol, bucket, tokenize(sorted(storage_options.items(), key=lambda kv: kv[0])))


def reader(protocol: str, path: str, storage_options: Mapping[str, Any]) -> Reader | None:
    """The obstore reader for ``path``'s bucket (``bucket/key``), or None where reads stay
    with s3fs: another protocol, obstore not installed, options it cannot express,
    ``STREAMWWW_S3_CLIENT=s3fs``, or a reader given up on (:func:`give_up`)."""
    if protocol not in PROTOCOLS or os.environ.get("STREAMWWW_S3_CLIENT", "").lower() == "s3fs":
        return None
    bucket = path.partition("/")[0]
    key = _cache_key(protocol, bucket, storage_options)
    with _LOCK:
        if key in _READERS:
            return _READERS[key]
        made = None
        settings = s3_config(storage_options)
        if settings is not None:
            try:
                made = Reader(bucket, settings)
            except ImportError:
                logger.debug("obstore is not installed: s3:// reads go through s3fs")
            except Exception as exc:  # no credentials, a setting obstore refuses: s3fs, as without obstore
                logger.debug("s3://%s: reads go through s3fs (%s: %s)", bucket, type(exc).__name__, exc)
        _READERS[key] = made
        return made


def give_up(protocol: str, path: str, storage_options: Mapping[str, Any], exc: BaseException) -> None:
    """Read ``path``'s bucket through s3fs from now on in this process: obstore failed
    (``exc``) where s3fs then succeeded."""
    bucket = path.partition("/")[0]
    with _LOCK:
        _READERS[_cache_key(protocol, bucket, storage_options)] = None
    logger.warning("s3://%s: obstore's read failed where s3fs's succeeded (%s: %s); reads of this "
                   "bucket go through s3fs from now on", bucket, type(exc).__name__, str(exc).splitlines()[0]
                   if str(exc) else "")

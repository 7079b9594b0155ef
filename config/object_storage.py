"""Where uploaded files live: Django's ``STORAGES`` from the environment.

``STORAGE_BACKEND=local`` (the default) keeps them under ``MEDIA_ROOT``; ``STORAGE_BACKEND=s3``
puts them in an S3-compatible bucket through django-storages (AWS S3, MinIO, SeaweedFS, Ceph...),
which every machine of a deployment reads and writes:

- ``STORAGE_S3_BUCKET`` (required), ``STORAGE_S3_PREFIX`` (a key prefix, default none);
- ``STORAGE_S3_ENDPOINT_URL`` (empty: AWS), ``STORAGE_S3_REGION``,
  ``STORAGE_S3_ADDRESSING_STYLE`` (``path``, ``virtual`` or ``auto``; most self-hosted servers
  want ``path``);
- ``STORAGE_S3_ACCESS_KEY_ID`` and ``STORAGE_S3_SECRET_ACCESS_KEY``, or neither (boto3's own
  chain then: instance role, ``AWS_*`` variables, shared config);
- ``STORAGE_S3_MEMORY_BYTES``: a stored file read back (sandbox input, download) is held in
  memory up to this size and spilled to a temporary file past it (default 2 MiB);
- ``STORAGE_S3_TIMEOUT``: seconds to connect and between bytes of an answer (default 10), with
  ``STORAGE_S3_ATTEMPTS`` tries per request (default 3): a storage that stops answering fails a
  request within about a minute instead of holding a worker (and the row it locked) for many.

``manage.py check --deploy`` asks the bucket once (documents.E020 when it does not answer).

The keys go only to the storage's options; Django's error reports hide settings whose names hold
``KEY`` or ``SECRET``, and nothing here logs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STATICFILES = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
S3_BACKEND = "storages.backends.s3.S3Storage"
ADDRESSING_STYLES = ("path", "virtual", "auto")


def storages_from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """Django's ``STORAGES`` for this environment (``ImproperlyConfigured`` when incomplete)."""
    from django.core.exceptions import ImproperlyConfigured

    backend = environ.get("STORAGE_BACKEND", "local").strip().lower() or "local"
    if backend == "local":
        # No location of its own: it follows MEDIA_ROOT (and the tests' overrides of it).
        return {
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": STATICFILES,
        }
    if backend != "s3":
        raise ImproperlyConfigured(f"STORAGE_BACKEND must be local or s3, not {backend!r}")
    bucket = environ.get("STORAGE_S3_BUCKET", "").strip()
    if not bucket:
        raise ImproperlyConfigured("STORAGE_BACKEND=s3 needs STORAGE_S3_BUCKET")
    style = environ.get("STORAGE_S3_ADDRESSING_STYLE", "").strip() or None
    if style is not None and style not in ADDRESSING_STYLES:
        raise ImproperlyConfigured(
            f"STORAGE_S3_ADDRESSING_STYLE must be one of {', '.join(ADDRESSING_STYLES)}"
        )
    access_key = environ.get("STORAGE_S3_ACCESS_KEY_ID", "")
    secret_key = environ.get("STORAGE_S3_SECRET_ACCESS_KEY", "")
    if bool(access_key) != bool(secret_key):
        raise ImproperlyConfigured(
            "set both STORAGE_S3_ACCESS_KEY_ID and STORAGE_S3_SECRET_ACCESS_KEY, or neither"
        )
    options: dict[str, Any] = {
        "bucket_name": bucket,
        "location": environ.get("STORAGE_S3_PREFIX", "").strip("/"),
        "endpoint_url": environ.get("STORAGE_S3_ENDPOINT_URL", "") or None,
        "region_name": environ.get("STORAGE_S3_REGION", "") or None,
        "addressing_style": style,
        # Generated names never collide, but a name that exists is never overwritten (as on disk).
        "file_overwrite": False,
        # The platform streams files itself; it hands out no bucket URLs.
        "querystring_auth": True,
        "default_acl": None,
        # 0 would keep a whole file in memory while it is read (a 50 MB upload, per reader).
        "max_memory_size": int(environ.get("STORAGE_S3_MEMORY_BYTES", 2 * 1024 * 1024)),
    }
    options["client_config"] = client_config(environ)
    if access_key:
        options["access_key"] = access_key
        options["secret_key"] = secret_key
    return {"default": {"BACKEND": S3_BACKEND, "OPTIONS": options}, "staticfiles": STATICFILES}


def client_config(environ: Mapping[str, str]) -> Any:
    """boto3's client settings: bounded waits and retries (``STORAGE_S3_TIMEOUT``, ``..._ATTEMPTS``)."""
    from botocore.config import Config
    from django.core.exceptions import ImproperlyConfigured

    try:
        timeout = float(environ.get("STORAGE_S3_TIMEOUT", "") or 10)
        attempts = int(environ.get("STORAGE_S3_ATTEMPTS", "") or 3)
    except ValueError:
        raise ImproperlyConfigured("STORAGE_S3_TIMEOUT and STORAGE_S3_ATTEMPTS are numbers") from None
    if not 0 < timeout <= 600 or not 1 <= attempts <= 10:
        raise ImproperlyConfigured("STORAGE_S3_TIMEOUT is 0-600 seconds and STORAGE_S3_ATTEMPTS 1-10")
    return Config(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"max_attempts": attempts, "mode": "standard"},
    )

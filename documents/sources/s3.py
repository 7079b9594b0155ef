"""S3-compatible bucket sources (docs/sources.md, "S3-compatible buckets"), through boto3.

Settings: ``endpoint`` (https; http only with ``SOURCES_S3_ALLOW_HTTP``; a private, loopback or
link-local address only in ``SOURCES_S3_ALLOWED_NETWORKS`` or with ``SOURCES_S3_ALLOW_PRIVATE``,
checked at each stage and every connection pinned to the checked address, ``s3net``; empty: AWS),
``region``, ``bucket`` and ``prefix``; secrets ``access_key_id`` and ``secret_access_key``.
An item is an object under the prefix, by its key relative to the prefix, with a change marker
of its ETag and size; "folder" keys (ending in ``/``) are left out. An object's user metadata
``access`` (``x-amz-meta-access``: principal keys separated by commas) becomes its document's
access list.

Every request has connect and read timeouts and a bounded number of attempts. A bucket that
cannot be reached (or refuses the keys) while a stage runs fails the sync with
``bucket_unavailable``; refusals name no host or key other than what the user gave.
"""

# long-module: a bucket kind's whole contract in one place: its settings and keys checked for the
# API's 400s, the endpoint rules, and the connector with its S3 error mapping (per item or the sync).

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.translation import gettext_noop

from documents.causes import BUCKET_UNAVAILABLE
from documents.outbound import TargetRefused, resolve
from documents.sources import s3net
from documents.sources.connectors import (
    MAX_KEY_LENGTH,
    READ_CHUNK,
    Fetched,
    Listed,
    Refused,
    SourceKind,
    sha256_of,
)
from jobs.errors import StageFailure

if TYPE_CHECKING:
    from documents.sources.models import Source

CREDENTIAL_KEYS = ("access_key_id", "secret_access_key")
ACCESS_METADATA = "access"  # x-amz-meta-access
MAX_PREFIX_LENGTH = 512
MAX_MARKER_LENGTH = 200
# Bytes of an object held in memory while it is read; past this it spills to a temporary file.
SPOOL_BYTES = 1024 * 1024
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_REGION = re.compile(r"^[a-z0-9-]{1,40}$")
DEFAULT_REGION = "us-east-1"
# Error codes of an S3 answer that mean the keys were refused, and that the bucket does not exist.
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "401", "Forbidden"}
_NO_BUCKET = {"NoSuchBucket", "404", "NotFound"}
_NO_KEY = {"NoSuchKey", "404", "NotFound"}


class S3Refused(Refused):
    pass


def _invalid(code: str, message: str, field: str) -> NoReturn:
    raise S3Refused(code, message, field)


# --- settings ---------------------------------------------------------------------------------


def check_endpoint(endpoint: str) -> str:
    """``endpoint`` as stored (no trailing slash), if its scheme and addresses are allowed now."""
    return _checked(endpoint)[0]


def _checked(endpoint: str) -> tuple[str, list[str]]:
    """``endpoint`` as stored and the addresses its host resolves to now, every one allowed
    (``s3net``); none for AWS itself (an empty endpoint)."""
    text = endpoint.strip()
    if not text:
        return "", []  # AWS itself, by region
    parts = urlsplit(text)
    schemes = ("https", "http") if settings.SOURCES_S3_ALLOW_HTTP else ("https",)
    if parts.scheme not in schemes or not parts.hostname:
        message = (
            gettext_noop("Give the endpoint as an http:// or https:// URL with a host.")
            if settings.SOURCES_S3_ALLOW_HTTP
            else gettext_noop("Give the endpoint as an https:// URL with a host.")
        )
        _invalid("invalid_endpoint", message, "endpoint")
    if parts.username or parts.password or parts.query or parts.fragment or parts.path not in ("", "/"):
        _invalid(
            "invalid_endpoint",
            gettext_noop("The endpoint is a scheme and a host (and a port), without a path or a user."),
            "endpoint",
        )
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        _invalid("invalid_endpoint", gettext_noop("The endpoint's port is not a number."), "endpoint")
    try:
        addresses = resolve(parts.hostname, port, settings.WEBHOOK_RESOLVE_TIMEOUT)
    except TargetRefused:
        addresses = []
    if not addresses:
        _invalid(
            "endpoint_unresolvable",
            gettext_noop("The endpoint's host could not be resolved."),
            "endpoint",
        )
    networks = s3net.allowed_networks()
    if not all(s3net.allowed(address, networks) for address in addresses):
        _invalid(
            "endpoint_not_allowed",
            gettext_noop(
                "The endpoint points to a private, loopback or link-local address, which the "
                "operator does not allow."
            ),
            "endpoint",
        )
    return text.rstrip("/"), addresses


def _text(config: dict[str, Any], name: str) -> str:
    value = config.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        _invalid(f"invalid_{name}", gettext_noop("This setting must be text."), name)
    return value.strip() if name != "prefix" else value


def clean_config(config: Any) -> dict[str, Any]:
    """``{"endpoint", "region", "bucket", "prefix"}`` as stored, each checked."""
    if not isinstance(config, dict):
        _invalid("invalid_bucket", gettext_noop("Give the bucket's settings."), "bucket")
    unknown = sorted(set(config) - {"endpoint", "region", "bucket", "prefix"})
    if unknown:
        _invalid("invalid_config", gettext_noop("Unknown setting for a bucket source."), unknown[0][:60])
    bucket = _text(config, "bucket")
    if not _BUCKET.match(bucket) or ".." in bucket:
        _invalid(
            "invalid_bucket",
            gettext_noop(
                "Give the bucket's name: 3 to 63 lower-case letters, digits, dots and hyphens, "
                "starting and ending with a letter or digit."
            ),
            "bucket",
        )
    region = _text(config, "region") or DEFAULT_REGION
    if not _REGION.match(region):
        _invalid(
            "invalid_region", gettext_noop("The region is lower-case letters, digits and hyphens."), "region"
        )
    prefix = _text(config, "prefix")
    if len(prefix) > MAX_PREFIX_LENGTH or "\x00" in prefix or prefix.startswith("/"):
        _invalid(
            "invalid_prefix",
            gettext_noop("The prefix is a key prefix of at most 512 characters, not starting with /."),
            "prefix",
        )
    if prefix and not prefix.endswith("/"):
        prefix += "/"  # a folder of the bucket: "docs" must not take in "docs2/..."
    endpoint = check_endpoint(_text(config, "endpoint"))
    return {"endpoint": endpoint, "region": region, "bucket": bucket, "prefix": prefix}


def clean_credentials(given: Any, stored: dict[str, str]) -> dict[str, str]:
    """Both keys, from ``given`` or (for one left out or empty) as ``stored``."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        _invalid("invalid_credentials", gettext_noop("Give the credentials as an object."), "credentials")
    unknown = sorted(set(given) - set(CREDENTIAL_KEYS))
    if unknown:
        _invalid(
            "invalid_credentials",
            gettext_noop("A bucket source takes the credentials access_key_id and secret_access_key only."),
            "credentials",
        )
    values: dict[str, str] = {}
    for name in CREDENTIAL_KEYS:
        value = given.get(name)
        if value is not None and not isinstance(value, str):
            _invalid("invalid_credentials", gettext_noop("Credentials are text."), f"credentials.{name}")
        value = (value or "").strip() or stored.get(name, "")
        if not value or len(value) > 1024 or any(ch.isspace() for ch in value):
            _invalid(
                "invalid_credentials",
                gettext_noop("Give both access_key_id and secret_access_key, without spaces."),
                f"credentials.{name}",
            )
        values[name] = value
    return values


# --- the connector ----------------------------------------------------------------------------


def _client(source: Source, credentials: dict[str, str], endpoint: str, addresses: list[str]) -> Any:
    """The stage's boto3 client; with an endpoint, every connection goes to its first checked
    address (``s3net.pin``)."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3",
        endpoint_url=endpoint or None,
        region_name=str(source.config.get("region") or DEFAULT_REGION),
        aws_access_key_id=credentials.get("access_key_id", ""),
        aws_secret_access_key=credentials.get("secret_access_key", ""),
        config=Config(
            connect_timeout=settings.SOURCES_S3_CONNECT_TIMEOUT,
            read_timeout=settings.SOURCES_S3_READ_TIMEOUT,
            retries={"max_attempts": settings.SOURCES_S3_MAX_ATTEMPTS, "mode": "standard"},
            # Self-hosted servers (MinIO, SeaweedFS, Ceph) want the bucket in the path.
            s3={"addressing_style": "path" if endpoint else "auto"},
            user_agent_extra="document-sources",
        ),
    )
    if endpoint:
        s3net.pin(client, urlsplit(endpoint).hostname or "", addresses[0])
    return client


def _code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    found = response.get("Error", {}).get("Code") or response.get("ResponseMetadata", {}).get(
        "HTTPStatusCode", ""
    )
    return str(found)


def _unavailable(what: str, error: Exception) -> StageFailure:
    """The stage's failure when the bucket stops answering: its detail names the operation and
    the error's class or S3 code, never a host or key."""
    return StageFailure(BUCKET_UNAVAILABLE.code, f"bucket unavailable during {what}: {_kind_of(error)}")


def _kind_of(error: Exception) -> str:
    return _code(error) or type(error).__name__


def _connection_errors() -> tuple[type[Exception], ...]:
    from botocore.exceptions import BotoCoreError

    return (BotoCoreError,)


class S3Connector:
    """A bucket source opened for one stage (``connectors.Connector``)."""

    def __init__(self, client: Any, bucket: str, prefix: str) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix

    def _call(self, what: str, method: str, **params: Any) -> Any:
        from botocore.exceptions import ClientError

        try:
            return getattr(self.client, method)(Bucket=self.bucket, **params)
        except ClientError as error:
            code = _code(error)
            if "Key" not in params and (code in _DENIED or code in _NO_BUCKET):
                raise _unavailable(what, error) from None
            if code.startswith("5") or code in ("SlowDown", "ServiceUnavailable", "InternalError"):
                raise _unavailable(what, error) from None
            raise
        except _connection_errors() as error:
            raise _unavailable(what, error) from None

    def listing(self) -> Iterator[Listed | tuple[str, str]]:
        token: str | None = None
        while True:
            params: dict[str, Any] = {"Prefix": self.prefix, "MaxKeys": 1000}
            if token:
                params["ContinuationToken"] = token
            page = self._call("listing", "list_objects_v2", **params)
            for entry in page.get("Contents", ()):
                full = str(entry["Key"])
                key = full[len(self.prefix) :]
                if not key or key.endswith("/"):
                    continue  # the prefix itself, or a "folder" marker object
                if len(key) > MAX_KEY_LENGTH:
                    yield (key[:MAX_KEY_LENGTH], "key_too_long")
                    continue
                yield Listed(key, marker_of(entry.get("ETag", ""), int(entry.get("Size", 0))))
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")
            if not token:
                return

    def _item_call(self, what: str, method: str, key: str) -> Any:
        """An object's request: a missing object is ``OSError`` (gone since it was listed), one
        the keys may not read is a per-item refusal."""
        from botocore.exceptions import ClientError

        try:
            return self._call(what, method, Key=self.prefix + key)
        except ClientError as error:
            code = _code(error)
            if code in _NO_KEY:
                raise FileNotFoundError(key) from None
            raise Refused(
                "object_unreadable", gettext_noop("The bucket refused to give this object.")
            ) from None

    @contextmanager
    def fetch(self, key: str) -> Iterator[Fetched]:
        answer = self._item_call("fetch", "get_object", key)
        body = answer["Body"]
        try:
            limit = settings.DOCUMENTS_MAX_UPLOAD_BYTES
            if int(answer.get("ContentLength") or 0) > limit:
                raise _too_large()
            spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 (closed below)
            try:
                _copy_bounded(body, spool, limit)
                spool.seek(0)
                size = int(answer.get("ContentLength") or spool.seek(0, 2))
                spool.seek(0)
                yield Fetched(
                    spool,
                    marker_of(answer.get("ETag", ""), size),
                    key.rsplit("/", 1)[-1],
                    access=access_of(answer.get("Metadata") or {}),
                )
            finally:
                spool.close()
        finally:
            body.close()

    def digest(self, key: str) -> str:
        answer = self._item_call("digest", "get_object", key)
        body = answer["Body"]
        try:
            return sha256_of(_Reader(body))  # type: ignore[arg-type]
        finally:
            body.close()

    def exists(self, key: str) -> bool:
        try:
            self._item_call("exists", "head_object", key)
        except FileNotFoundError:
            return False
        except Refused:
            return True  # there, but not ours to read: not removed
        return True


class _Reader:
    """A body's ``read`` with the stage's failure for a connection lost while reading."""

    def __init__(self, body: Any) -> None:
        self.body = body

    def read(self, size: int = -1) -> bytes:
        try:
            data: bytes = self.body.read(size)
        except _connection_errors() as error:
            raise _unavailable("read", error) from None
        return data


def _copy_bounded(body: Any, out: IO[bytes], limit: int) -> None:
    reader = _Reader(body)
    copied = 0
    while block := reader.read(READ_CHUNK):
        copied += len(block)
        if copied > limit:
            raise _too_large()
        out.write(block)


def _too_large() -> Refused:
    return Refused("file_too_large", gettext_noop("The object is larger than the upload limit."))


def marker_of(etag: str, size: int) -> str:
    return f"{str(etag).strip().strip(chr(34))}:{size}"[:MAX_MARKER_LENGTH]


def access_of(metadata: dict[str, str]) -> list[str] | None:
    """The principal keys of an object's ``access`` metadata; ``None`` when it has none."""
    value = {str(k).lower(): v for k, v in metadata.items()}.get(ACCESS_METADATA)
    if value is None:
        return None
    return [part.strip() for part in str(value).split(",") if part.strip()]


def connect(source: Source, credentials: dict[str, str]) -> S3Connector:
    """The bucket opened for a stage: its endpoint allowed now, and the bucket answering the keys
    (a HEAD of the bucket); :class:`Refused` otherwise."""
    endpoint, addresses = _checked(str(source.config.get("endpoint") or ""))
    client = _client(source, credentials, endpoint, addresses)
    connector = S3Connector(client, str(source.config["bucket"]), _prefix(source))
    from botocore.exceptions import ClientError

    try:
        connector.client.head_bucket(Bucket=connector.bucket)
    except ClientError as error:
        code = _code(error)
        if code in _DENIED:
            raise Refused("access_denied", gettext_noop("The bucket refused the source's keys.")) from None
        if code in _NO_BUCKET:
            raise Refused("bucket_not_found", gettext_noop("No such bucket at this endpoint.")) from None
        raise Refused("bucket_unreachable", gettext_noop("The bucket did not answer.")) from None
    except _connection_errors():
        raise Refused(
            "bucket_unreachable", gettext_noop("The bucket's endpoint could not be reached.")
        ) from None
    return connector


def _prefix(source: Source) -> str:
    return str(source.config.get("prefix") or "")


def check_now(source: Source) -> None:
    """The endpoint's scheme and addresses, as allowed now (the operator's settings or the DNS
    may have changed since the source was made)."""
    check_endpoint(str(source.config.get("endpoint") or ""))


KIND = SourceKind(
    kind="s3",
    clean_config=clean_config,
    connect=connect,
    unavailable=BUCKET_UNAVAILABLE,
    clean_credentials=clean_credentials,
    check_now=check_now,
)

"""Bucket sources on a real S3 server (SeaweedFS): first sync, an unchanged re-sync that parses
and embeds nothing, a changed object as a new version, a removed object, access lists from the
objects' metadata, per-item refusals, a bucket that refuses or does not answer, the keys
re-encrypted after a ``SECRET_KEY`` rotation, and the endpoint's network rules: an address no
longer allowed fails the sync, and every connection goes to the checked address (a stand-in DNS
that rebinds after the check; an https front keeps the endpoint's TLS name)."""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from documents.embedders import configured_embedder
from documents.kinds import INGEST
from documents.models import Deletion, Document, DocumentVersion
from documents.search import search
from documents.services.collections import default_collection
from documents.sources.credentials import credentials_of
from documents.sources.models import Source, SourceItem, SourceSync
from documents.sources.services import source_create, source_update, sync_start
from jobs.models import Job, JobEvent, StageRun, Status
from tests.documents.access_helpers import member, tenant_of, viewer
from tests.documents.helpers import (
    embeddings_server,
    found_versions,
    make_tenant,
    run_until_idle,
    top_hit,
    use_http_embeddings,
)
from tests.documents.source_helpers import ingest_all, sync, sync_job

pytestmark = pytest.mark.django_db

PREFIX = "handbook/"
OBJECTS = {
    "guide/onboarding.md": "# Onboarding\n\nEvery newcomer receives a brass compass on the first day.\n",
    "guide/holidays.txt": "Holidays: the office closes for the lantern festival each autumn.\n",
    "notes.txt": "The cafeteria serves saffron risotto on Thursdays.\n",
}


@pytest.fixture
def bucket(seaweed: Any, s3_bucket: str, settings: Any) -> str:
    """The test's bucket with the handbook under its prefix, a "folder" key and an object
    outside the prefix; the local SeaweedFS (http, loopback) allowed."""
    settings.SOURCES_S3_ALLOW_HTTP = True
    settings.SOURCES_S3_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    client = seaweed.client()
    for key, text in OBJECTS.items():
        client.put_object(Bucket=s3_bucket, Key=PREFIX + key, Body=text.encode())
    client.put_object(Bucket=s3_bucket, Key=PREFIX + "guide/", Body=b"")
    client.put_object(Bucket=s3_bucket, Key="elsewhere.txt", Body=b"Outside the prefix: the walrus.\n")
    return s3_bucket


def put(seaweed: Any, bucket: str, key: str, text: str, **metadata: str) -> None:
    seaweed.client().put_object(Bucket=bucket, Key=PREFIX + key, Body=text.encode(), Metadata=metadata)


def bucket_source(tenant: Any, seaweed: Any, bucket: str, **fields: Any) -> Source:
    secret = fields.pop("secret", seaweed.secret_key)
    return source_create(
        tenant=tenant,
        collection=default_collection(tenant),
        name="Handbook bucket",
        kind="s3",
        config={
            "endpoint": seaweed.endpoint,
            "bucket": bucket,
            "prefix": "handbook",
            **fields.pop("config", {}),
        },
        credentials={"access_key_id": seaweed.access_key, "secret_access_key": secret},
        **fields,
    )


def live_documents(tenant: Any) -> list[Document]:
    return list(Document.objects.filter(tenant=tenant, deleted_at=None))


def test_first_sync_ingests_every_object_under_the_prefix(seaweed, bucket):
    tenant = make_tenant()
    source = bucket_source(tenant, seaweed, bucket)
    assert source.config["prefix"] == "handbook/"
    done = sync(source)
    assert done.counts == {"found": 3, "new": 3, "changed": 0, "removed": 0, "unchanged": 0, "failed": 0}
    assert sorted(SourceItem.objects.values_list("key", flat=True)) == sorted(OBJECTS)
    documents = live_documents(tenant)
    assert len(documents) == 3 and all(d.published_version_id for d in documents)
    assert {d.versions.get().original_name for d in documents} == {
        "onboarding.md",
        "holidays.txt",
        "notes.txt",
    }
    hit = top_hit(tenant, "brass compass")
    assert (
        hit is not None and hit.document_id == SourceItem.objects.get(key="guide/onboarding.md").document_id
    )
    assert found_versions(tenant, "walrus") == set()  # outside the prefix: not synced
    etag = seaweed.client().head_object(Bucket=bucket, Key=PREFIX + "notes.txt")["ETag"].strip('"')
    assert SourceItem.objects.get(key="notes.txt").marker == f"{etag}:{len(OBJECTS['notes.txt'])}"


@pytest.fixture
def counted_embedder(settings: Any) -> Iterator[Any]:
    """The platform's embedder is a real HTTP embeddings server that counts what it is asked."""
    with embeddings_server() as server:
        use_http_embeddings(settings, server)
        configured_embedder.cache_clear()
        yield server
    configured_embedder.cache_clear()


def test_an_unchanged_resync_reads_parses_and_embeds_nothing(seaweed, bucket, counted_embedder):
    tenant = make_tenant()
    source = bucket_source(tenant, seaweed, bucket)
    sync(source)
    embedded = sum(len(request.inputs) for request in counted_embedder.received)
    assert embedded > 0
    jobs, versions = Job.objects.filter(kind=INGEST).count(), DocumentVersion.objects.count()
    again = sync(source)
    assert again.counts == {"found": 3, "new": 0, "changed": 0, "removed": 0, "unchanged": 3, "failed": 0}
    assert Job.objects.filter(kind=INGEST).count() == jobs
    assert DocumentVersion.objects.count() == versions
    assert sum(len(request.inputs) for request in counted_embedder.received) == embedded
    assert again.batch is None


def test_a_changed_object_is_a_new_version_and_the_old_serves_until_it_publishes(seaweed, bucket):
    tenant = make_tenant()
    source = bucket_source(tenant, seaweed, bucket)
    sync(source)
    item = SourceItem.objects.get(key="notes.txt")
    old = Document.objects.get(pk=item.document_id).published_version_id
    put(seaweed, bucket, "notes.txt", "The cafeteria now serves juniper dumplings on Thursdays.\n")
    job = sync_job(source)
    assert SourceSync.objects.get(job=job).counts["changed"] == 1
    document = Document.objects.get(pk=item.document_id)
    assert document.latest_number == 2 and document.published_version_id == old
    assert old in found_versions(tenant, "saffron risotto")
    assert found_versions(tenant, "juniper dumplings") == set()
    assert ingest_all() == 1
    document.refresh_from_db()
    assert found_versions(tenant, "juniper dumplings") == {document.published_version_id}
    assert old not in found_versions(tenant, "saffron risotto")


def test_a_removed_object_is_deleted_with_its_audit_record(seaweed, bucket):
    tenant = make_tenant()
    source = bucket_source(tenant, seaweed, bucket)
    sync(source)
    document_id = SourceItem.objects.get(key="notes.txt").document_id
    seaweed.client().delete_object(Bucket=bucket, Key=PREFIX + "notes.txt")
    done = sync(source)
    assert done.counts["removed"] == 1 and done.counts["unchanged"] == 2
    assert found_versions(tenant, "saffron risotto") == set()
    assert document_id not in {d.pk for d in live_documents(tenant)}
    assert Deletion.objects.filter(document_id=document_id, via="source").exists()


def _finds(user: Any, query: str) -> set[Any]:
    who = viewer(user)
    return {hit.document_id for hit in search(tenant_of(user), query, 10, viewer=who)}


def test_access_metadata_becomes_the_documents_list_and_follows_a_change(seaweed, bucket):
    ann = member("ann")
    ben = member("ben")
    tenant = tenant_of(ann)
    put(
        seaweed,
        bucket,
        "payroll.txt",
        "Payroll of the quartermaster and deckhands.\n",
        access=f"user:{ann.pk}",
    )
    source = bucket_source(tenant, seaweed, bucket)
    sync(source)
    payroll = SourceItem.objects.get(key="payroll.txt").document
    assert payroll is not None and payroll.access == [f"user:{ann.pk}"]
    assert _finds(ann, "quartermaster") == {payroll.pk}
    assert _finds(ben, "quartermaster") == set()
    assert _finds(ben, "saffron risotto") != set()  # no metadata: the collection's list
    # New bytes with a new list: ben is granted, ann no longer.
    put(seaweed, bucket, "payroll.txt", "Payroll of the quartermaster, revised.\n", access=f"user:{ben.pk}")
    sync(source)
    payroll.refresh_from_db()
    assert payroll.access == [f"user:{ben.pk}"]
    assert _finds(ben, "quartermaster") == {payroll.pk}
    assert _finds(ann, "quartermaster") == set()


def test_access_metadata_naming_no_member_is_a_per_item_failure(seaweed, bucket):
    tenant = make_tenant()
    put(
        seaweed,
        bucket,
        "secret.txt",
        "The vault code is kept by the lighthouse keeper.\n",
        access="user:999999",
    )
    source = bucket_source(tenant, seaweed, bucket)
    done = sync(source)
    assert done.counts["new"] == 4 and done.counts["failed"] == 1
    failed = SourceItem.objects.get(key="secret.txt")
    assert failed.error_code == "unknown_principal" and failed.document_id is None
    assert "user:999999" in failed.error_message
    assert found_versions(tenant, "lighthouse keeper") == set()


def test_an_object_over_the_upload_limit_is_refused_without_reading_it(seaweed, bucket, settings):
    settings.DOCUMENTS_MAX_UPLOAD_BYTES = 1000
    put(seaweed, bucket, "big.txt", "A very long minute of the harbour board. " * 100)
    tenant = make_tenant()
    done = sync(bucket_source(tenant, seaweed, bucket))
    assert done.counts["failed"] == 1 and done.counts["new"] == 4
    failed = SourceItem.objects.get(key="big.txt")
    assert (failed.error_code, failed.document_id) == ("file_too_large", None)
    assert len(live_documents(tenant)) == 3


def _failed_sync(source: Source) -> Job:
    job = run_until_idle(sync_start(source=source).sync.job_id)
    assert job.status == Status.FAILED, (job.status, job.error_code)
    return job


def _detail(job: Job) -> str:
    """The operator's detail of the failed stage (the job itself carries the cause's words)."""
    return StageRun.objects.filter(job=job).order_by("-started_at").values_list("error_detail", flat=True)[0]


def _no_secret(secret: str, job: Job, caplog: Any) -> None:
    texts = [job.error_message, job.error_code, str(job.checkpoint)]
    texts += [f"{run.error_type} {run.error_detail}" for run in StageRun.objects.filter(job=job)]
    texts += [str(event) for event in JobEvent.objects.filter(job=job).values()]
    texts += [record.getMessage() for record in caplog.records]
    assert not [text for text in texts if secret in text]


def test_wrong_keys_fail_the_sync_with_the_bucket_cause_and_no_secret_anywhere(seaweed, bucket, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "Wr0ng-" + "s" * 30
    source = bucket_source(make_tenant(), seaweed, bucket, secret=wrong)
    job = _failed_sync(source)
    assert job.error_code == "bucket_unavailable"
    assert "access_denied" in _detail(job)
    _no_secret(wrong, job, caplog)
    _no_secret(seaweed.secret_key, job, caplog)
    # Fixed (only the secret given again; the key id kept): the next sync works.
    source_update(source=source, credentials={"secret_access_key": seaweed.secret_key})
    assert credentials_of(Source.objects.get(pk=source.pk))["access_key_id"] == seaweed.access_key
    assert sync(source).counts["new"] == 3


def test_a_missing_bucket_fails_the_sync_with_the_bucket_cause(seaweed, bucket):
    source = bucket_source(make_tenant(), seaweed, "no-such-bucket-here")
    job = _failed_sync(source)
    assert job.error_code == "bucket_unavailable" and "bucket_not_found" in _detail(job)


def test_a_dead_endpoint_fails_the_sync_within_its_timeouts(seaweed, bucket, settings):
    settings.SOURCES_S3_CONNECT_TIMEOUT = 1
    settings.SOURCES_S3_MAX_ATTEMPTS = 2
    tenant = make_tenant()
    source = bucket_source(tenant, seaweed, bucket)
    with socket.socket() as listener:  # a port that accepts nothing: connections are refused
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    Source.objects.filter(pk=source.pk).update(
        config={**source.config, "endpoint": f"http://127.0.0.1:{port}"}
    )
    source.refresh_from_db()
    started = time.monotonic()
    job = _failed_sync(source)
    assert time.monotonic() - started < 30
    assert job.error_code == "bucket_unavailable" and "bucket_unreachable" in _detail(job)


def test_encrypt_secrets_rewrites_the_keys_after_a_secret_key_rotation(seaweed, bucket, settings):
    source = bucket_source(make_tenant(), seaweed, bucket)
    before = Source.objects.get(pk=source.pk).credentials
    assert seaweed.secret_key not in before and seaweed.access_key not in before
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY = "rotated-" + "k" * 50
    settings.SECRET_KEY_FALLBACKS = [old_key]
    out = io.StringIO()
    call_command("encrypt_secrets", stdout=out)
    assert "sources: 1 encrypted with the current key, 0 unreadable" in out.getvalue()
    after = Source.objects.get(pk=source.pk).credentials
    assert after != before
    settings.SECRET_KEY_FALLBACKS = []  # the old key is gone: the rewritten keys still open
    assert credentials_of(Source.objects.get(pk=source.pk)) == {
        "access_key_id": seaweed.access_key,
        "secret_access_key": seaweed.secret_key,
    }
    assert sync(source).counts["new"] == 3


def test_an_endpoint_no_longer_allowed_fails_the_sync_naming_no_address(seaweed, bucket, settings, caplog):
    caplog.set_level(logging.DEBUG)
    source = bucket_source(make_tenant(), seaweed, bucket)
    started = sync_start(source=source).sync.job_id
    settings.SOURCES_S3_ALLOWED_NETWORKS = ["10.0.0.0/8"]  # the operator withdraws loopback
    job = run_until_idle(started)
    assert job.status == Status.FAILED
    assert job.error_code == "bucket_unavailable" and "endpoint_not_allowed" in _detail(job)
    _no_secret("127.0.0.1", job, caplog)  # the host the user gave, never an address it resolves to
    assert not SourceItem.objects.filter(source=source).exists()


@pytest.fixture
def rebinding_dns(monkeypatch: Any) -> str:
    """A stand-in DNS server for ``s3.rebind.example`` that rebinds: the platform's check (its
    resolver threads, ``documents/outbound.py``) is told 127.0.0.1, any later lookup 127.0.0.2."""
    real = socket.getaddrinfo

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "s3.rebind.example":
            checked = threading.current_thread().name.startswith("outbound-dns")
            return real("127.0.0.1" if checked else "127.0.0.2", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    return "s3.rebind.example"


def test_every_connection_goes_to_the_checked_address_not_a_rebound_one(seaweed, bucket, rebinding_dns):
    port = int(seaweed.endpoint.rsplit(":", 1)[1])
    tenant = make_tenant()
    source = bucket_source(tenant, seaweed, bucket, config={"endpoint": f"http://{rebinding_dns}:{port}"})
    trapped: list[int] = []
    with socket.socket() as trap:  # where a rebound lookup leads: 127.0.0.2, not allowed
        trap.bind(("127.0.0.2", port))
        trap.listen(16)
        trap.settimeout(0.05)

        def catch() -> None:
            while not stop.is_set():
                try:
                    connection = trap.accept()[0]
                except OSError:
                    continue
                trapped.append(1)
                connection.close()

        stop = threading.Event()
        catcher = threading.Thread(target=catch)
        catcher.start()
        try:
            done = sync(source)
        finally:
            stop.set()
            catcher.join()
    assert trapped == []
    assert done.counts["new"] == 3
    assert SourceItem.objects.filter(source=source).count() == 3


def _self_signed(name: str, folder: Path) -> tuple[Path, Path]:
    """A certificate for ``name`` (its own authority) and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "endpoint.pem", folder / "endpoint.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@contextmanager
def _tls_front(target_port: int, cert: Path, key: Path) -> Iterator[int]:
    """An https front for the local SeaweedFS on 127.0.0.1 (TLS ended here, the bytes passed on):
    its port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    stop = threading.Event()

    def pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def serve() -> None:
        while not stop.is_set():
            try:
                raw = listener.accept()[0]
            except OSError:
                continue
            raw.settimeout(10)
            try:
                front = context.wrap_socket(raw, server_side=True)
            except OSError:  # the client refused our certificate
                raw.close()
                continue
            front.settimeout(None)
            back = socket.create_connection(("127.0.0.1", target_port))
            threading.Thread(target=pipe, args=(front, back), daemon=True).start()
            threading.Thread(target=pipe, args=(back, front), daemon=True).start()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        server.join()
        listener.close()


def test_an_https_endpoint_keeps_its_tls_name_while_pinned(
    seaweed, bucket, rebinding_dns, settings, tmp_path, monkeypatch
):
    """Pinned to the checked address, the connection still says and checks the endpoint's own
    name (SNI, certificate): a certificate for that name is accepted, and an endpoint reached by
    another name is refused although the address is the same."""
    settings.SOURCES_S3_ALLOW_HTTP = False
    cert, key = _self_signed(rebinding_dns, tmp_path)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
    port = int(seaweed.endpoint.rsplit(":", 1)[1])
    tenant = make_tenant()
    with _tls_front(port, cert, key) as tls_port:
        source = bucket_source(
            tenant, seaweed, bucket, config={"endpoint": f"https://{rebinding_dns}:{tls_port}"}
        )
        assert sync(source).counts["new"] == 3
        # 127.0.0.1 as well, but by a name the certificate does not carry.
        Source.objects.filter(pk=source.pk).update(
            config={**source.config, "endpoint": f"https://localhost:{tls_port}"}
        )
        source.refresh_from_db()
        job = _failed_sync(source)
        assert job.error_code == "bucket_unavailable" and "bucket_unreachable" in _detail(job)

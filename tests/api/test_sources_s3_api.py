"""``/api/sources`` with bucket sources on a real S3 server (SeaweedFS): clear 400s for each bad
setting and credential, the endpoint rules (https, no private address unless the operator allows
them), write-only keys that never come back in any answer, log record, job event or webhook
payload, and a removed object gone from search and from ``/v1``."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from documents.kinds import INGEST
from documents.models import Document, Tenant, WebhookMessage
from documents.services.collections import default_collection
from documents.services.groups import membership_set_admin
from documents.services.webhooks import webhook_endpoint_create
from documents.sources.credentials import credentials_of
from documents.sources.models import Source, SourceItem
from jobs.models import Job, JobEvent, StageRun, Status
from tests.api.conftest import Caller, assert_error, drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def bucket(seaweed: Any, s3_bucket: str, settings: Any) -> str:
    settings.SOURCES_S3_ALLOW_HTTP = True
    settings.SOURCES_S3_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the local SeaweedFS, nothing else
    client = seaweed.client()
    client.put_object(Bucket=s3_bucket, Key="docs/a.txt", Body=b"Alpacas graze on the terraced hills.\n")
    client.put_object(Bucket=s3_bucket, Key="docs/b.txt", Body=b"The apiary keeps forty hives of bees.\n")
    return s3_bucket


def make_admin(caller: Caller) -> None:
    user = get_user_model().objects.get(username=caller.username)
    membership_set_admin(membership=user.memberships.get(), is_admin=True)


def create(caller: Caller, seaweed: Any, bucket: str, config: Any = None, credentials: Any = None) -> Any:
    tenant = Tenant.objects.get(slug=caller.tenant)
    body = {
        "name": "Bucket",
        "collection": str(default_collection(tenant).pk),
        "kind": "s3",
        "config": {"endpoint": seaweed.endpoint, "bucket": bucket, "prefix": "docs/", **(config or {})},
        "credentials": credentials
        if credentials is not None
        else {"access_key_id": seaweed.access_key, "secret_access_key": seaweed.secret_key},
    }
    return caller.client.post("/api/sources", body, format="json")


def test_each_bad_setting_is_a_400_naming_its_field(alice, seaweed, bucket, settings):
    make_admin(alice)
    cases = [
        ({"bucket": "No_Such Bucket"}, None, "invalid_bucket", "bucket"),
        ({"region": "EU West!"}, None, "invalid_region", "region"),
        ({"prefix": "/rooted"}, None, "invalid_prefix", "prefix"),
        ({"endpoint": "ftp://files.example"}, None, "invalid_endpoint", "endpoint"),
        ({"endpoint": "https://user:pw@s3.example.com"}, None, "invalid_endpoint", "endpoint"),
        ({"endpoint": "https://s3.example.com/some/path"}, None, "invalid_endpoint", "endpoint"),
        ({"colour": "blue"}, None, "invalid_config", "colour"),
        (None, {"access_key_id": seaweed.access_key}, "invalid_credentials", "credentials.secret_access_key"),
        (None, {"secret_access_key": "x" * 20}, "invalid_credentials", "credentials.access_key_id"),
        (
            None,
            {"token": "abc", "access_key_id": "a", "secret_access_key": "b"},
            "invalid_credentials",
            "credentials",
        ),
    ]
    for config, credentials, code, field in cases:
        response = create(alice, seaweed, bucket, config, credentials)
        error = assert_error(response, 400, code)
        assert error["detail"] == {"field": field}, (config, credentials, error)
        assert seaweed.secret_key not in response.content.decode()
    assert not Source.objects.exists()


def test_http_and_private_endpoints_are_refused_unless_the_operator_allows_them(
    alice, seaweed, bucket, settings
):
    make_admin(alice)
    settings.SOURCES_S3_ALLOW_HTTP = False
    error = assert_error(create(alice, seaweed, bucket), 400, "invalid_endpoint")
    assert error["detail"] == {"field": "endpoint"}
    settings.SOURCES_S3_ALLOW_HTTP = True
    settings.SOURCES_S3_ALLOWED_NETWORKS = []
    assert_error(create(alice, seaweed, bucket), 400, "endpoint_not_allowed")  # 127.0.0.1
    # The allowed network opens that network only: the metadata service stays refused.
    settings.SOURCES_S3_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    for endpoint in ("http://169.254.169.254", "http://10.0.0.7:8333", "http://[::1]:8333"):
        assert_error(create(alice, seaweed, bucket, {"endpoint": endpoint}), 400, "endpoint_not_allowed")
    assert not Source.objects.exists()
    # The blunt switch still allows any address.
    settings.SOURCES_S3_ALLOWED_NETWORKS = []
    settings.SOURCES_S3_ALLOW_PRIVATE = True
    assert create(alice, seaweed, bucket).status_code == 201
    Source.objects.all().delete()
    settings.SOURCES_S3_ALLOW_PRIVATE = False
    # Allowed when made, refused at "sync now" once the operator withdraws the network.
    settings.SOURCES_S3_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    source = create(alice, seaweed, bucket).json()
    settings.SOURCES_S3_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    assert_error(alice.client.post(f"/api/sources/{source['id']}/sync"), 400, "endpoint_not_allowed")


def test_a_changed_endpoint_resolving_to_a_refused_address_is_a_400_naming_no_address(
    alice, seaweed, bucket, settings
):
    make_admin(alice)
    source = create(alice, seaweed, bucket).json()
    port = seaweed.endpoint.rsplit(":", 1)[1]
    # "localhost" resolves to loopback addresses, which the operator no longer allows.
    settings.SOURCES_S3_ALLOWED_NETWORKS = []
    for endpoint in (f"http://localhost:{port}", "http://169.254.169.254"):
        config = {"endpoint": endpoint, "bucket": bucket, "prefix": "docs/"}
        response = alice.client.patch(f"/api/sources/{source['id']}", {"config": config}, format="json")
        error = assert_error(response, 400, "endpoint_not_allowed")
        assert error["detail"] == {"field": "endpoint"}
        body = response.content.decode()
        assert "127.0.0.1" not in body and "::1" not in body, body
    assert Source.objects.get(pk=source["id"]).config["endpoint"] == seaweed.endpoint


def test_the_keys_are_write_only_and_never_leak(alice, seaweed, bucket, settings, caplog):
    caplog.set_level(logging.DEBUG)
    settings.WEBHOOK_ALLOW_PRIVATE = True
    make_admin(alice)
    tenant = Tenant.objects.get(slug=alice.tenant)
    webhook_endpoint_create(
        tenant=tenant, url="http://127.0.0.1:9/hook", events=["source.synced", "document.ready"]
    )
    created = create(alice, seaweed, bucket)
    assert created.status_code == 201, created.content
    source = created.json()
    assert source["has_credentials"] is True and "credentials" not in source
    assert source["config"] == {
        "endpoint": seaweed.endpoint,
        "region": "us-east-1",
        "bucket": bucket,
        "prefix": "docs/",
    }
    # A change that gives only the key id keeps the stored secret.
    changed = alice.client.patch(
        f"/api/sources/{source['id']}", {"credentials": {"access_key_id": seaweed.access_key}}, format="json"
    )
    assert changed.status_code == 200
    assert credentials_of(Source.objects.get(pk=source["id"]))["secret_access_key"] == seaweed.secret_key
    started = alice.client.post(f"/api/sources/{source['id']}/sync")
    assert drive(started.json()["job_id"]).status == Status.READY
    for job_id in Job.objects.filter(kind=INGEST).values_list("pk", flat=True):
        assert drive(job_id).status == Status.READY
    answers = [created, changed, started]
    answers += [alice.client.get(url) for url in ("/api/sources", f"/api/sources/{source['id']}")]
    answers.append(alice.client.get(f"/api/jobs/{started.json()['job_id']}"))
    texts = [answer.content.decode() for answer in answers]
    texts += [json.dumps(list(JobEvent.objects.values()), default=str)]
    texts += [json.dumps(list(StageRun.objects.values()), default=str)]
    texts += [json.dumps(list(Job.objects.values()), default=str)]
    payloads = list(WebhookMessage.objects.values_list("payload", flat=True))
    assert any(p.get("type") == "source.synced" for p in payloads)
    texts += [json.dumps(payloads)]
    texts += [record.getMessage() for record in caplog.records]
    texts += [json.dumps(Source.objects.values("config", "credentials").get())]
    for secret in (seaweed.secret_key,):
        assert not [text[:200] for text in texts if secret in text]


def test_a_removed_object_is_gone_from_search_and_from_the_v1_store(alice, seaweed, bucket):
    make_admin(alice)
    source = create(alice, seaweed, bucket).json()
    started = alice.client.post(f"/api/sources/{source['id']}/sync").json()
    assert drive(started["job_id"]).status == Status.READY
    for job_id in Job.objects.filter(kind=INGEST).values_list("pk", flat=True):
        assert drive(job_id).status == Status.READY
    removed = Document.objects.get(pk=SourceItem.objects.get(key="a.txt").document_id)
    v1_client = APIClient()
    v1_client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.token}")
    store = f"vs_{removed.collection_id.hex}"
    v1 = v1_client.get(f"/v1/vector_stores/{store}/files").json()["data"]
    assert removed.file_id in {f["id"] for f in v1}
    before = v1_client.post(f"/v1/vector_stores/{store}/search", {"query": "alpacas terraced"}, format="json")
    assert removed.file_id in {h["file_id"] for h in before.json()["data"]}
    assert str(removed.pk) in json.dumps(alice.client.get("/api/search", {"q": "alpacas terraced"}).json())
    seaweed.client().delete_object(Bucket=bucket, Key="docs/a.txt")
    started = alice.client.post(f"/api/sources/{source['id']}/sync").json()
    assert drive(started["job_id"]).status == Status.READY
    v1 = v1_client.get(f"/v1/vector_stores/{store}/files").json()["data"]
    assert removed.file_id not in {f["id"] for f in v1} and len(v1) == 1
    assert v1_client.get(f"/v1/vector_stores/{store}/files/{removed.file_id}").status_code == 404
    hits = v1_client.post(f"/v1/vector_stores/{store}/search", {"query": "alpacas terraced"}, format="json")
    assert removed.file_id not in {h["file_id"] for h in hits.json()["data"]}
    found = alice.client.get("/api/search", {"q": "alpacas terraced"}).json()
    assert str(removed.pk) not in json.dumps(found)

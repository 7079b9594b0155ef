"""The status endpoint's two pre-built reads (documents/hot_reads.py) find exactly what the ORM
queries they replace find: the same rows, the same field values, the same refusals."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, models
from django.utils import timezone
from rest_framework.authtoken.models import Token

from documents.hot_reads import token_owner, version_with_job
from documents.models import Document, DocumentVersion, Membership, Tenant
from jobs.models import Job
from tests.api.conftest import Caller, assert_error, drive

pytestmark = pytest.mark.django_db


def fields_of(obj: models.Model) -> dict[str, Any]:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def orm_version(tenant: Tenant, document_id: Any, job_id: Any) -> DocumentVersion | None:
    return (
        DocumentVersion.objects.select_related("job")
        .filter(document__tenant=tenant, document_id=document_id, job_id=job_id, deleted_at=None)
        .filter(document__deleted_at=None)
        .first()
    )


def same_version(tenant: Tenant, document_id: Any, job_id: Any) -> DocumentVersion | None:
    fast = version_with_job(tenant.pk, uuid.UUID(str(document_id)), uuid.UUID(str(job_id)))
    slow = orm_version(tenant, document_id, job_id)
    assert (fast is None) == (slow is None), (fast, slow)
    if fast is not None and slow is not None:
        assert fields_of(fast) == fields_of(slow)
        assert fast.job is not None and slow.job is not None
        assert fields_of(fast.job) == fields_of(slow.job)
        # Values typed as the ORM types them (datetimes aware, JSON decoded, UUIDs as UUID).
        assert fast.created_at.tzinfo is not None and isinstance(fast.job.pk, uuid.UUID)
    return fast


def test_the_version_read_matches_the_orm_for_own_and_foreign_ids(alice: Caller, mallory: Caller):
    body = alice.uploaded()
    drive(body["job_id"])
    acme, globex = Tenant.objects.get(slug="acme"), Tenant.objects.get(slug="globex")
    other = mallory.uploaded(b"Globex memo.\n", "memo.txt")

    found = same_version(acme, body["document_id"], body["job_id"])
    assert found is not None and str(found.job_id) == body["job_id"]
    assert found.job is not None and found.job.status == "ready"
    # Another tenant's ids, a job of another document, an unknown job: nothing, like the ORM.
    assert same_version(globex, body["document_id"], body["job_id"]) is None
    assert same_version(acme, other["document_id"], other["job_id"]) is None
    assert same_version(acme, other["document_id"], body["job_id"]) is None
    assert same_version(acme, body["document_id"], other["job_id"]) is None
    assert same_version(acme, body["document_id"], uuid.uuid4()) is None


def test_the_version_read_skips_deleted_versions_and_documents(alice: Caller):
    body = alice.uploaded()
    acme = Tenant.objects.get(slug="acme")
    DocumentVersion.objects.filter(job_id=body["job_id"]).update(deleted_at=timezone.now())
    assert same_version(acme, body["document_id"], body["job_id"]) is None
    DocumentVersion.objects.filter(job_id=body["job_id"]).update(deleted_at=None)
    assert same_version(acme, body["document_id"], body["job_id"]) is not None
    Document.objects.filter(pk=body["document_id"]).update(deleted_at=timezone.now())
    assert same_version(acme, body["document_id"], body["job_id"]) is None


def test_the_token_read_matches_the_orm(alice: Caller, loner: Any):
    found = token_owner(alice.token)
    assert found is not None
    user, token, tenant = found
    membership = Membership.objects.select_related("tenant", "user").get(user__auth_token__key=alice.token)
    assert fields_of(user) == fields_of(membership.user)
    assert fields_of(token) == fields_of(Token.objects.get(key=alice.token))
    assert tenant is not None and fields_of(tenant) == fields_of(membership.tenant)
    assert token.user is user

    # A user in no workspace: the user and token, no tenant (the API answers 403).
    loner_token = Token.objects.get(user__username="loner")
    found = token_owner(loner_token.key)
    assert found is not None and found[0].username == "loner" and found[2] is None
    assert token_owner("0" * 40) is None


def test_a_revoked_token_is_refused_on_the_next_request(alice: Caller):
    # No token cache: revocation takes effect at once, across every process.
    body = alice.uploaded()
    assert alice.client.get(body["status_url"]).status_code == 200
    Token.objects.filter(key=alice.token).delete()
    assert_error(alice.client.get(body["status_url"]), 401, "not_authenticated")


def test_a_deactivated_user_is_refused_on_the_status_endpoint(alice: Caller):
    body = alice.uploaded()
    assert alice.client.get(body["status_url"]).status_code == 200
    get_user_model().objects.filter(username="alice").update(is_active=False)
    assert_error(alice.client.get(body["status_url"]), 401, "not_authenticated")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")
def test_the_status_read_is_prepared_on_the_connection_and_answers_the_same(alice: Caller):
    """A polled status read is planned once per connection, not on every request: after a few
    requests it is a prepared statement of the session, and answers stay right."""
    body = alice.uploaded()
    drive(body["job_id"])
    url = body["status_url"]
    answers = [alice.client.get(url) for _ in range(8)]
    assert {a.status_code for a in answers} == {200}
    assert {a.json()["status"] for a in answers} == {"ready"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE NOT from_sql")
        prepared = [row[0] for row in cursor.fetchall()]
    version_reads = [s for s in prepared if DocumentVersion._meta.db_table in s and Job._meta.db_table in s]
    assert len(version_reads) == 1, prepared
    # Another caller's ids still find nothing through the prepared statement.
    assert alice.client.get(url.replace(body["job_id"], str(uuid.uuid4()))).status_code == 404

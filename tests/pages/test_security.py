"""Tenants, escaping and the static route: what a page must never show or allow."""

from __future__ import annotations

import uuid

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from jobs.executor import run_job
from jobs.models import Status
from tests.documents.files import text_pdf
from tests.pages.helpers import Member, detail_url, html, job, job_id_of, job_url, queued, ready, running

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script> & "quotes"'
ESCAPED = (
    "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"
    " &amp; &quot;quotes&quot;"
)


def test_another_tenants_document_and_its_job_answer_404(alice: Member, bob: Member):
    theirs, _claim = running(bob)
    assert alice.client.get(detail_url(theirs)).status_code == 404
    assert alice.client.post(job_url(theirs, "cancel")).status_code == 404
    assert alice.client.post(job_url(theirs, "retry")).status_code == 404
    upload = SimpleUploadedFile("x.pdf", text_pdf())
    assert alice.client.post(f"/documents/{theirs.document.pk}/versions", {"file": upload}).status_code == 404
    assert job(theirs).status == Status.RUNNING
    assert job(theirs).subject_version == 1


def test_a_job_of_another_document_of_the_same_tenant_is_404(alice: Member):
    one, two = queued(alice), queued(alice)
    mixed = f"/documents/{one.document.pk}/jobs/{job_id_of(two)}/cancel"
    assert alice.client.post(mixed).status_code == 404
    assert job(two).status == Status.QUEUED


# A fixed unknown id: parameters are the same in every pytest-xdist worker's collection.
@pytest.mark.parametrize("document_id", [str(uuid.UUID(int=1)), "not-a-uuid", "1%20OR%201=1"])
def test_unknown_and_malformed_ids_are_404_with_the_plain_page(alice: Member, document_id):
    response = alice.client.get(f"/documents/{document_id}/")
    assert response.status_code == 404
    assert "or it belongs to another workspace" in html(response)


def test_a_hostile_title_and_file_name_are_shown_as_text_everywhere(alice: Member):
    result = alice.upload(text_pdf(), '<svg onload="alert(3)">.pdf', title=HOSTILE)
    run_job(job_id_of(result))
    for body in (
        html(alice.client.get("/")),
        html(alice.client.get(detail_url(result))),
        html(alice.client.get("/search", {"q": "amber falcon"})),
    ):
        assert ESCAPED in body
        assert "<script>alert(2)" not in body
        assert "<img src=x" not in body
        assert "<svg onload" not in body
    detail = html(alice.client.get(detail_url(result)))
    assert "&lt;svg onload=&quot;alert(3)&quot;&gt;.pdf" in detail
    # In the page's JSON the title is not present, and "<" never appears raw inside a script.
    script = detail.split('<script id="job-status" type="application/json">')[1].split("</script>")[0]
    assert "<" not in script


def test_a_hostile_query_is_escaped_on_the_search_page(alice: Member):
    ready(alice)
    body = html(alice.client.get("/search", {"q": '"><script>alert(4)</script>'}))
    assert "<script>alert(4)" not in body
    assert 'value="&quot;&gt;&lt;script&gt;alert(4)&lt;/script&gt;"' in body


def test_the_pages_css_and_script_are_served_and_nothing_outside_static(alice: Member, client):
    css = client.get("/static/documents/pages.css")
    assert css.status_code == 200
    assert css["Content-Type"].startswith("text/css")
    assert client.get("/static/documents/live.js")["Content-Type"] in {
        "text/javascript",
        "application/javascript",
    }
    assert client.get("/static/admin/css/base.css").status_code == 200
    assert client.get("/static/../config/settings.py").status_code == 404
    assert client.get("/static/documents/../../views.py").status_code == 404
    assert client.get("/static/missing.css").status_code == 404

"""Evaluation on the pages: a collection's evaluation page creates a set, imports JSON Lines
(a bad line named, nothing added), starts a run and charts finished runs; a run's page shows its
figures per mode and language; two runs compare per query; the search page's buttons record
candidates (not labels); another workspace's run or collection is a 404. The admin lists the
sets, confirms candidates and shows runs read-only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from documents.evaluation.models import EvaluationRun, LabelCandidate, LabelledQuery, LabelledQuerySet
from documents.services.collections import default_collection
from jobs.models import Status
from tests.documents.access_helpers import private_to
from tests.documents.helpers import run_until_idle
from tests.pages.helpers import Member, make_member

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def media(settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = tmp_path / "media"


def ingest(member: Member, text: str, name: str) -> str:
    result = member.upload(text.encode(), name)
    assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
    return str(result.version.document_id)


def jsonl(*items: dict) -> bytes:
    return "\n".join(json.dumps(i) for i in items).encode()


def start_finished_run(member: Member, url: str, set_id: str) -> EvaluationRun:
    assert member.client.post(url, {"action": "run", "query_set": set_id}).status_code == 303
    run = EvaluationRun.objects.filter(query_set__pk=set_id).first()
    assert run is not None and run.job_id is not None
    assert run_until_idle(run.job_id).status == Status.READY
    return EvaluationRun.objects.get(pk=run.pk)


def test_the_evaluation_pages_walk_from_a_set_to_a_comparison(alice: Member, bob: Member):
    harbour = ingest(alice, "The harbour master logged every fishing boat.", "harbour.txt")
    ingest(alice, "Orchard trees were pruned in winter.", "orchard.txt")
    collection = default_collection(alice.tenant)
    url = f"/collections/{collection.pk}/evaluation"
    assert f'href="{url}"' in alice.client.get(f"/collections/{collection.pk}/").content.decode()

    assert alice.client.post(url, {"action": "create", "name": "Smoke"}).status_code == 303
    set_id = str(LabelledQuerySet.objects.get(name="Smoke").pk)
    bad = alice.client.post(
        url,
        {
            "action": "import",
            "query_set": set_id,
            "file": SimpleUploadedFile(
                "q.jsonl", jsonl({"query": "boat", "relevant": [harbour]}, {"query": "x"})
            ),
        },
    )
    assert bad.status_code == 400
    assert "Line 2: &#x27;relevant&#x27; must be" in bad.content.decode()
    assert not LabelledQuery.objects.exists()
    good = SimpleUploadedFile(
        "q.jsonl",
        jsonl(
            {"query": "fishing boat harbour", "relevant": [harbour]},
            {"query": "harbour master", "relevant": [harbour]},
        ),
    )
    assert alice.client.post(url, {"action": "import", "query_set": set_id, "file": good}).status_code == 303

    first = start_finished_run(alice, url, set_id)
    second = start_finished_run(alice, url, set_id)
    page = alice.client.get(url).content.decode()
    assert "<svg" in page and "<polyline" in page
    assert page.count('href="/evaluation/runs/') == 2

    run_page = alice.client.get(f"/evaluation/runs/{first.pk}").content.decode()
    figures = re.search(r'data-field="figures".*?</table>', run_page, re.S)
    assert figures is not None and "lexical" in figures.group(0) and "1.000" in figures.group(0)
    assert "hashing-v1-1024" in run_page

    compare = alice.client.get(f"/evaluation/runs/{first.pk}/compare/{second.pk}")
    assert compare.status_code == 200
    compared = compare.content.decode()
    assert "0 wins, 0 losses, 6 ties" in compared
    # Per mode and language, the interval of the mean change: two identical runs, none.
    deltas = re.search(r'data-field="deltas".*?</table>', compared, re.S)
    assert deltas is not None
    assert deltas.group(0).count('<td data-field="interval">0.000 … 0.000</td>') == 3
    assert deltas.group(0).count('<td data-field="verdict">not clear of the noise</td>') == 3

    assert bob.client.get(f"/evaluation/runs/{first.pk}").status_code == 404
    assert bob.client.get(url).status_code == 404
    assert bob.client.post(url, {"action": "run", "query_set": set_id}).status_code == 404


def test_search_buttons_record_candidates_that_the_admin_confirms(alice: Member):
    harbour = ingest(alice, "The harbour master logged every fishing boat.", "harbour.txt")
    page = alice.client.get("/search", {"q": "fishing boat"}).content.decode()
    assert 'name="verdict" value="relevant"' in page
    answer = alice.client.post(
        "/search/verdict",
        {"q": "fishing boat", "document": harbour, "verdict": "relevant", "next": "/search?q=x"},
    )
    assert answer.status_code == 303 and answer["Location"] == "/search?q=x"
    candidate = LabelCandidate.objects.get()
    assert candidate.confirmed_at is None and not LabelledQuery.objects.exists()

    staff = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-12345")
    admin = Client()
    admin.force_login(staff)
    listed = admin.get("/admin/documents/labelcandidate/")
    assert listed.status_code == 200 and "fishing boat" in listed.content.decode()
    confirmed = admin.post(
        "/admin/documents/labelcandidate/", {"action": "confirm", "_selected_action": [candidate.pk]}
    )
    assert confirmed.status_code == 302
    query = LabelledQuery.objects.get()
    assert query.text == "fishing boat" and query.labels == {f"document:{harbour}": 1}
    assert admin.get("/admin/documents/labelledqueryset/").status_code == 200
    add = "/admin/documents/labelledquery/add/"
    bad = admin.post(add, {"query_set": query.query_set_id, "text": "q", "labels": '{"doc:1": 1}'})
    assert (
        bad.status_code == 200
        and "neither document:&lt;uuid&gt; nor chunk:&lt;id&gt;" in bad.content.decode()
    )
    worse = admin.post(
        add, {"query_set": query.query_set_id, "text": "q", "labels": f'{{"document:{harbour}": 11}}'}
    )
    assert "a grade must be a whole number from 0 to 10" in worse.content.decode()
    assert LabelledQuery.objects.count() == 1
    good = admin.post(
        add, {"query_set": query.query_set_id, "text": "q", "labels": f'{{"document:{harbour}": 2}}'}
    )
    assert good.status_code == 302 and LabelledQuery.objects.count() == 2
    assert admin.get(f"/admin/documents/labelledqueryset/{query.query_set_id}/change/").status_code == 200

    run_url = f"/collections/{default_collection(alice.tenant).pk}/evaluation"
    run = start_finished_run(alice, run_url, str(query.query_set_id))
    assert admin.get(f"/admin/documents/evaluationrun/{run.pk}/change/").status_code == 200
    assert admin.get("/admin/documents/evaluationrun/add/").status_code == 403
    jobs = admin.get("/admin/jobs/job/").content.decode()
    assert "evaluation" in jobs


def test_a_run_and_a_comparison_show_a_member_only_the_queries_about_documents_they_may_see(alice: Member):
    carol = make_member("carol", "acme")
    harbour = ingest(alice, "The harbour master logged every fishing boat.", "harbour.txt")
    owner = alice.user
    hidden = str(private_to(owner).pk)
    url = f"/collections/{default_collection(alice.tenant).pk}/evaluation"
    assert alice.client.post(url, {"action": "create", "name": "Smoke"}).status_code == 303
    set_id = str(LabelledQuerySet.objects.get(name="Smoke").pk)
    queries = jsonl(
        {"query": "fishing boat harbour", "relevant": [harbour]},
        {"query": "Salaries by the tide", "relevant": [hidden]},
    )
    imported = alice.client.post(
        url, {"action": "import", "query_set": set_id, "file": SimpleUploadedFile("q.jsonl", queries)}
    )
    assert imported.status_code == 303
    refused = carol.client.post(
        url,
        {
            "action": "import",
            "query_set": set_id,
            "file": SimpleUploadedFile("q.jsonl", jsonl({"query": "tide", "relevant": [hidden]})),
        },
    )
    assert (
        refused.status_code == 400 and f"no document {hidden} in this collection" in refused.content.decode()
    )
    first, second = start_finished_run(alice, url, set_id), start_finished_run(alice, url, set_id)

    for page in (f"/evaluation/runs/{first.pk}", f"/evaluation/runs/{first.pk}/compare/{second.pk}"):
        mine, theirs = alice.client.get(page).content.decode(), carol.client.get(page).content.decode()
        assert "Salaries by the tide" in mine and "fishing boat harbour" in mine, page
        assert "Salaries by the tide" not in theirs and "fishing boat harbour" in theirs, page
    compared = carol.client.get(f"/evaluation/runs/{first.pk}/compare/{second.pk}").content.decode()
    assert "0 wins, 0 losses, 3 ties" in compared  # her rows only: one query in three modes

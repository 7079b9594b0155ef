"""Evaluation through the API and ``manage.py eval_search``: query sets of a collection, the JSON
Lines import (a bad line is a 400 naming it, nothing added), starting and reading a run, the
comparison, search-page candidates, another workspace's ids a 404; the command's table and
its exit status on bad input."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from documents.evaluation.models import EvaluationRun, LabelCandidate, LabelledQuery
from documents.models import Chunk, Tenant
from documents.services.collections import default_collection
from jobs.models import Status
from tests.documents.access_helpers import private_to
from tests.documents.helpers import run_until_idle, upload
from tests.documents.test_delete import client_for

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = ("The harbour master logged every fishing boat.", "Orchard trees were pruned in winter.")


@pytest.fixture
def alice(settings, tmp_path) -> tuple[APIClient, list[str], str]:
    settings.MEDIA_ROOT = tmp_path / "media"
    client = client_for("alice", "acme")
    tenant = Tenant.objects.get(slug="acme")
    ids = []
    for n, text in enumerate(TEXTS):
        result = upload(tenant, text.encode(), f"d{n}.txt")
        assert result.job is not None and run_until_idle(result.job.pk).status == Status.READY
        ids.append(str(result.version.document_id))
    return client, ids, str(default_collection(tenant).pk)


def eval_search(*args: str) -> str:
    """What ``manage.py eval_search`` prints with ``args``."""
    out = StringIO()
    call_command("eval_search", *args, stdout=out)
    return out.getvalue()


def lines(*items: dict) -> bytes:
    return "\n".join(json.dumps(i) for i in items).encode()


def test_a_set_is_created_imported_run_read_and_compared(alice):
    client, ids, collection = alice
    made = client.post(f"/api/collections/{collection}/query-sets", {"name": "smoke"}, format="json")
    assert made.status_code == 201, made.content
    set_id = made.json()["id"]
    listed = client.get(f"/api/collections/{collection}/query-sets").json()
    assert [s["id"] for s in listed] == [set_id]

    body = lines(
        {"query": "fishing boat harbour", "relevant": [ids[0]], "language": "en"},
        {"query": "orchard trees pruned", "relevant": [ids[1]], "grades": [2], "language": "en"},
    )
    imported = client.generic(
        "POST", f"/api/query-sets/{set_id}/queries", body, content_type="application/x-ndjson"
    )
    assert imported.status_code == 201, imported.content
    assert imported.json()["queries"] == 2

    runs = []
    for embedder in ("", "hashing:16"):
        started = client.post(f"/api/query-sets/{set_id}/runs", {"embedder": embedder}, format="json")
        assert started.status_code == 202, started.content
        run = started.json()
        assert run["status"] == "queued" and run["summary"] == {}
        assert run_until_idle(run["job_id"]).status == Status.READY
        runs.append(run["id"])
    done = client.get(f"/api/evaluation-runs/{runs[0]}").json()
    assert done["status"] == "ready" and done["progress"] == 100.0
    assert done["summary"]["lexical"]["all"]["mrr@10"] == 1.0
    assert done["config"]["embedder"] == "hashing-v1-1024"
    compared = client.get(f"/api/evaluation-runs/{runs[0]}/compare/{runs[1]}")
    assert compared.status_code == 200, compared.content
    assert compared.json()["wins"] + compared.json()["losses"] + compared.json()["ties"] == 6
    # Each mode and language with two or more queries: the mean change of MRR@10 (the summary's
    # delta) inside its 95 % interval, and what the interval says of it.
    intervals = compared.json()["intervals"]
    assert set(intervals) == {"lexical", "semantic", "hybrid"}
    for mode, languages in intervals.items():
        for language, change in languages.items():
            assert change["queries"] >= 2 and change["low"] <= change["mean"] <= change["high"]
            assert change["mean"] == compared.json()["deltas"][mode][language]["mrr@10"]
            assert change["verdict"] in {"better", "worse", "unclear"}

    mallory = client_for("mallory", "globex")
    assert mallory.get(f"/api/evaluation-runs/{runs[0]}").status_code == 404
    assert mallory.get(f"/api/query-sets/{set_id}").status_code == 404
    assert mallory.post(f"/api/query-sets/{set_id}/runs", {}, format="json").status_code == 404
    assert mallory.get(f"/api/collections/{collection}/query-sets").status_code == 404


def test_a_bad_line_is_a_400_naming_it_and_nothing_is_added(alice):
    client, ids, collection = alice
    set_id = client.post(f"/api/collections/{collection}/query-sets", {"name": "s"}, format="json").json()[
        "id"
    ]
    body = lines({"query": "fishing", "relevant": [ids[0]]}, {"query": "x", "relevant": ["nope"]})
    answer = client.generic(
        "POST", f"/api/query-sets/{set_id}/queries", body, content_type="application/x-ndjson"
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid_line" and error["message"].startswith("Line 2:")
    assert error["detail"]["line"] == 2
    assert not LabelledQuery.objects.exists()
    empty = client.post(f"/api/query-sets/{set_id}/runs", {}, format="json")
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "empty_query_set"
    unknown = client.post(f"/api/query-sets/{set_id}/runs", {"modes": ["fuzzy"]}, format="json")
    assert unknown.status_code == 400


def test_a_search_hit_verdict_is_a_candidate_not_a_label(alice):
    client, ids, _ = alice
    answer = client.post(
        "/api/label-candidates",
        {"query": "boats", "document_id": ids[0], "verdict": "relevant"},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    assert LabelCandidate.objects.filter(confirmed_at=None).count() == 1
    assert not LabelledQuery.objects.exists()
    bad = client.post(
        "/api/label-candidates", {"query": "b", "document_id": ids[0], "verdict": "meh"}, format="json"
    )
    assert bad.status_code == 400


def test_the_command_runs_an_evaluation_and_prints_the_table(alice, tmp_path):
    client, ids, collection = alice
    set_id = client.post(f"/api/collections/{collection}/query-sets", {"name": "s"}, format="json").json()[
        "id"
    ]
    good = tmp_path / "good.jsonl"
    good.write_bytes(
        lines(
            {"query": "fishing boat harbour", "relevant": [ids[0]], "language": "en"},
            {"query": "harbour master", "relevant": [ids[0]], "language": "en"},
        )
    )
    text = eval_search("--tenant", "acme", "--query-set", set_id, "--import", str(good), "--inline")
    assert "imported 2 queries" in text
    assert "mode" in text and "mrr@10" in text
    assert any(line.startswith("lexical   all") and "1.0000" in line for line in text.splitlines())
    # A second run compared with the first: per mode and language the change and its interval.
    first = EvaluationRun.objects.get()
    text = eval_search("--tenant", "acme", "--query-set", set_id, "--inline", "--compare", str(first.pk))
    assert f"against {first.pk}: 0 wins, 0 losses, 6 ties (mrr@10)" in text
    assert (
        "  lexical   en  mrr@10 +0.0000 (95 % interval +0.0000 to +0.0000, 2 queries): not clear of the noise"
        in text
    )

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"query": "x"}')
    with pytest.raises(CommandError, match="line 1: 'relevant' must be"):
        call_command(
            "eval_search", "--tenant", "acme", "--query-set", set_id, "--import", str(bad), "--inline"
        )
    with pytest.raises(CommandError, match="no query set"):
        call_command("eval_search", "--tenant", "acme", "--query-set", "nope")
    with pytest.raises(CommandError, match="no workspace"):
        call_command("eval_search", "--tenant", "nobody", "--query-set", set_id)
    assert LabelledQuery.objects.count() == 2


def test_a_gated_reindex_names_a_set_of_the_workspace(alice):
    client, ids, collection = alice
    set_id = client.post(f"/api/collections/{collection}/query-sets", {"name": "s"}, format="json").json()[
        "id"
    ]
    empty = client.post("/api/reindex", {"embedder": "hashing:16", "query_set": set_id}, format="json")
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "empty_query_set"
    client.generic(
        "POST",
        f"/api/query-sets/{set_id}/queries",
        lines({"query": "fishing boat harbour", "relevant": [ids[0]]}),
        content_type="application/x-ndjson",
    )
    unknown = client.post(
        "/api/reindex",
        {"embedder": "hashing:16", "query_set": "00000000-0000-0000-0000-000000000001"},
        format="json",
    )
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == "unknown_query_set"
    with pytest.raises(CommandError, match="No query set of that id"):
        call_command("reindex", "--tenant", "acme", "--embedder", "hashing:16", "--query-set", "nope")
    started = client.post(
        "/api/reindex", {"embedder": "hashing:16", "query_set": set_id, "margin": 0.5}, format="json"
    )
    assert started.status_code == 202, started.content
    gate = started.json()["evaluation"]
    assert gate["query_set_id"] == set_id and gate["margin"] == 0.5 and gate["passed"] is None
    job = run_until_idle(started.json()["job_id"])
    after = client.get(f"/api/reindex/{job.pk}").json()["evaluation"]
    assert after["before_run_id"] and after["after_run_id"] and after["passed"] in (True, False)
    run = client.get(f"/api/evaluation-runs/{after['after_run_id']}").json()
    assert run["reindex_job_id"] == str(job.pk) and run["embedder"] == "hashing-v1-16"


def test_per_query_rows_and_labels_name_only_documents_the_caller_may_see(alice):
    client, ids, collection = alice
    tenant = Tenant.objects.get(slug="acme")
    owner = tenant.memberships.get(user__username="alice").user
    bob = client_for("bob", "acme")
    hidden = str(private_to(owner).pk)
    chunk = Chunk.objects.filter(version__document_id=hidden).values_list("pk", flat=True).first()
    set_id = client.post(f"/api/collections/{collection}/query-sets", {"name": "s"}, format="json").json()[
        "id"
    ]
    body = lines(
        {"query": "fishing boat harbour", "relevant": [ids[0]]},
        {"query": "Salaries by the tide", "relevant": [hidden]},
        {"query": "deckhand payroll", "relevant": [chunk]},
    )
    imported = client.generic(
        "POST", f"/api/query-sets/{set_id}/queries", body, content_type="application/x-ndjson"
    )
    assert imported.status_code == 201, imported.content

    # Bob cannot label what he may not see: refused exactly as an id that does not exist.
    missing = str(uuid.uuid4())
    answers = [
        bob.generic(
            "POST",
            f"/api/query-sets/{set_id}/queries",
            lines({"query": "tide", "relevant": [label]}),
            content_type="application/x-ndjson",
        )
        for label in (hidden, missing)
    ]
    assert answers[0].status_code == answers[1].status_code == 400
    assert answers[0].content.decode().replace(hidden, missing) == answers[1].content.decode()

    runs = []
    for embedder in ("", "hashing:16"):
        run = client.post(f"/api/query-sets/{set_id}/runs", {"embedder": embedder}, format="json").json()
        assert run_until_idle(run["job_id"]).status == Status.READY
        runs.append(run["id"])
    url = f"/api/evaluation-runs/{runs[0]}/compare/{runs[1]}"

    mine = client.get(url).json()
    assert {q["query"] for q in mine["queries"]} == {
        "fishing boat harbour",
        "Salaries by the tide",
        "deckhand payroll",
    }
    assert mine["wins"] + mine["losses"] + mine["ties"] == 9
    theirs = bob.get(url)
    assert theirs.status_code == 200, theirs.content
    assert {q["query"] for q in theirs.json()["queries"]} == {"fishing boat harbour"}
    assert theirs.json()["wins"] + theirs.json()["losses"] + theirs.json()["ties"] == 3
    text = theirs.content.decode()
    assert "Salaries" not in text and "payroll" not in text and hidden not in text
    assert theirs.json()["deltas"] == mine["deltas"]  # the whole set's figures name no document
    assert "Salaries" not in bob.get(f"/api/evaluation-runs/{runs[0]}").content.decode()

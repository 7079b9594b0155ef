"""``manage.py ingest`` and ``create_api_user`` as a newcomer meets them: clear refusals, the
pages' words, and a password that logs in to the pages."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from documents.models import Document, Tenant
from tests.documents.files import encrypted_pdf

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_unknown_tenant_is_refused_with_a_way_out_and_nothing_is_created(tmp_path: Path):
    note = tmp_path / "note.txt"
    note.write_text("Harbour lights at dawn.")
    with pytest.raises(CommandError, match="--create-tenant"):
        call_command("ingest", str(note), "--tenant", "acmee", "--inline", stdout=StringIO())
    assert not Tenant.objects.filter(slug="acmee").exists()
    assert not Document.objects.exists()


def test_create_tenant_creates_it_and_the_document_becomes_ready(tmp_path: Path):
    note = tmp_path / "note.txt"
    note.write_text("Harbour lights at dawn over the quiet bay.")
    out = StringIO()
    call_command("ingest", str(note), "--tenant", "acme", "--create-tenant", "--inline", stdout=out)
    assert Tenant.objects.filter(slug="acme").exists()
    assert "Ready" in out.getvalue()


def test_the_cli_says_the_pages_words_not_codes(tmp_path: Path):
    Tenant.objects.create(slug="acme", name="Acme")
    locked = tmp_path / "locked.pdf"
    locked.write_bytes(encrypted_pdf())
    out = StringIO()
    with pytest.raises(SystemExit):
        call_command("ingest", str(locked), "--tenant", "acme", "--inline", stdout=out, stderr=StringIO())
    text = out.getvalue()
    assert "Parsing failed" in text and "parse_failed" not in text
    assert "password-protected" in text
    assert "Upload a corrected copy of the file." in text  # the action, in words
    assert "reupload" not in text


def test_a_user_made_with_a_prompted_password_logs_in_to_the_pages(monkeypatch: pytest.MonkeyPatch):
    answers = iter(["correct-horse-battery", "correct-horse-battery"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))  # the terminal's answer
    call_command("create_api_user", "erin", "--tenant", "acme", "--password-prompt", stdout=StringIO())
    client = Client()
    assert client.login(username="erin", password="correct-horse-battery")
    assert client.get("/").status_code == 200


def test_mismatched_prompted_passwords_change_nothing(monkeypatch: pytest.MonkeyPatch):
    answers = iter(["one-password-here", "another-one-here"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    with pytest.raises(CommandError, match="did not match"):
        call_command("create_api_user", "erin", "--tenant", "acme", "--password-prompt", stdout=StringIO())
    assert not Tenant.objects.filter(slug="acme").exists()

"""``manage.py ingest`` and ``create_api_user`` as a newcomer meets them: clear refusals, the
pages' words, and a password that logs in to the pages."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from typing import Any, ClassVar

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from documents.models import Document, Tenant
from jobs.executor import run_stage
from jobs.models import FINISHED, Job
from jobs.services.worker import Claim, job_claim
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


def test_the_end_counts_ready_failed_and_rejected_apart(tmp_path: Path):
    Tenant.objects.create(slug="acme", name="Acme")
    (tmp_path / "note.txt").write_text("Harbour lights at dawn over the quiet bay.")
    (tmp_path / "locked.pdf").write_bytes(encrypted_pdf())
    (tmp_path / "tool.exe").write_bytes(b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff" * 8)
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("ingest", str(tmp_path), "--tenant", "acme", "--inline", stdout=out, stderr=err)
    assert exited.value.code == 1
    assert out.getvalue().splitlines()[-1] == "1 ready, 1 failed, 1 rejected"
    assert "did not become searchable" not in err.getvalue()


def test_all_ready_ends_with_the_count_and_exit_status_zero(tmp_path: Path):
    Tenant.objects.create(slug="acme", name="Acme")
    (tmp_path / "a.txt").write_text("Harbour lights at dawn over the quiet bay.")
    (tmp_path / "b.txt").write_text("Lanterns swing above the fishing boats.")
    out = StringIO()
    call_command("ingest", str(tmp_path), "--tenant", "acme", "--inline", stdout=out)
    assert out.getvalue().splitlines()[-1] == "2 ready, 0 failed, 0 rejected"


# --- the live bars on a terminal ---------------------------------------------------------------


class Terminal(StringIO):
    """What a terminal receives: the bytes, read back by :func:`screen`."""

    def isatty(self) -> bool:
        return True


CSI = re.compile(r"\x1b\[([?0-9;]*)([A-Za-z])")


def screen(output: str, width: int) -> list[str]:
    """The rows a terminal ``width`` columns wide shows after ``output``: it wraps a line that
    reaches the right edge onto the next row, and moves and erases as the escape codes say."""
    rows: list[list[str]] = [[]]
    row = col = 0
    pending = False  # the last column was written: the next character goes to the next row
    at = 0
    while at < len(output):
        code = CSI.match(output, at)
        if code:
            at = code.end()
            args, op = code.groups()
            n = int(args) if args.isdigit() else None
            if op in "AF":
                row, pending = max(0, row - (n or 1)), False
                col = 0 if op == "F" else col
            elif op == "B":
                row += n or 1
            elif op == "G":
                col, pending = (n or 1) - 1, False
            elif op == "K":
                rows[row][col:] = [] if n in (None, 0) else rows[row][col:]
                if n == 2:
                    rows[row] = []
            elif op == "J":
                rows[row][col:] = []
                del rows[row + 1 :]
            while len(rows) <= row:
                rows.append([])
            continue
        char = output[at]
        at += 1
        if char == "\n":
            row, col, pending = row + 1, 0, False
        elif char == "\r":
            col, pending = 0, False
        elif char >= " ":
            if pending:
                row, col, pending = row + 1, 0, False
            while len(rows) <= row:
                rows.append([])
            line = rows[row]
            line.extend(" " * (col - len(line)))
            line[col : col + 1] = [char]
            if col == width - 1:
                pending = True
            else:
                col += 1
        while len(rows) <= row:
            rows.append([])
    return ["".join(r).rstrip() for r in rows if "".join(r).strip()]


def test_on_a_narrow_terminal_each_document_keeps_one_live_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings
):
    settings.MEDIA_ROOT = tmp_path / "media"
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.delenv("TERM", raising=False)
    Tenant.objects.create(slug="acme", name="Acme")
    (tmp_path / "files").mkdir()
    for name in ("harbour-lights.txt", "fishing-boats.txt"):
        (tmp_path / "files" / name).write_text(f"{name}: lanterns swing above the quiet bay at dawn.")

    class Clock:
        """The command's clock: each pause between two redraws runs one stage of each job for
        real, so the bars are redrawn at every stage."""

        now = 0.0
        claims: ClassVar[dict[Any, Claim | None]] = {}

        def monotonic(self) -> float:
            return self.now

        def sleep(self, seconds: float) -> None:
            self.now += seconds
            for job in Job.objects.exclude(status__in=FINISHED):
                claim = self.claims.get(job.pk) or job_claim(job_id=job.pk, worker="test-worker")
                # A stage that hands over to the next one returns that stage's claim.
                self.claims[job.pk] = run_stage(claim) if claim is not None else None

    monkeypatch.setattr("documents.management.commands.ingest.time", Clock())
    out = Terminal()
    call_command("ingest", str(tmp_path / "files"), "--tenant", "acme", stdout=out)

    rows = screen(out.getvalue(), 60)
    assert max(len(r) for r in rows) <= 60
    for name in ("harbour-lights.txt", "fishing-boats.txt"):
        assert sum(name in r for r in rows) == 1, "\n".join(rows)
    assert sum("Ready" in r for r in rows) == 2, "\n".join(rows)
    assert rows[-1] == "2 ready, 0 failed, 0 rejected"
    assert out.getvalue().count("\x1b[") > 4  # redrawn in place, not printed line after line

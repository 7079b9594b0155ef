"""Upload validation: each rejection has its own code, status and a user-safe message."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from documents.engines.sniff import Kind
from documents.engines.validation import RejectCode, UploadRejected, safe_filename, validate_upload
from documents.parsers.word import ArchiveProblem, DocxArchiveRejected, DocxLimits, check_docx_archive
from tests.documents import files

LIMIT = 10 * 1024 * 1024


def reject(data: bytes, *, filename: str = "upload.bin", max_bytes: int = LIMIT) -> UploadRejected:
    with pytest.raises(UploadRejected) as caught:
        validate_upload(data, filename=filename, max_bytes=max_bytes)
    return caught.value


class EndlessStream:
    """A file-like that never ends, counting what was read from it."""

    def __init__(self) -> None:
        self.bytes_read = 0

    def read(self, size: int, /) -> bytes:
        self.bytes_read += size
        return b"a" * size


def test_accepted_pdf_reports_type_size_hash_and_names() -> None:
    data = files.text_pdf()
    upload = validate_upload(data, filename="reports/Q1 report.pdf", max_bytes=LIMIT)
    assert upload.kind is Kind.PDF
    assert upload.content_type == "application/pdf"
    assert upload.size == len(data)
    assert upload.sha256 == hashlib.sha256(data).hexdigest()
    assert upload.safe_name == "Q1 report.pdf"
    assert upload.original_name == "reports/Q1 report.pdf"
    assert upload.encoding is None
    assert upload.content == data


def test_accepted_text_reports_its_encoding() -> None:
    upload = validate_upload(files.CHINESE_TEXT.encode("gb18030"), filename="笔记.txt", max_bytes=LIMIT)
    assert (upload.kind, upload.content_type, upload.encoding) == (Kind.TEXT, "text/plain", "gb18030")
    assert upload.safe_name == "笔记.txt"


def test_client_name_does_not_decide_the_type() -> None:
    upload = validate_upload(files.text_pdf(), filename="looks-like.docx", max_bytes=LIMIT)
    assert upload.kind is Kind.PDF
    assert upload.content_type == "application/pdf"


def test_file_like_uploads_are_read() -> None:
    data = files.docx_document()
    upload = validate_upload(io.BytesIO(data), filename="a.docx", max_bytes=LIMIT)
    assert upload.kind is Kind.DOCX
    assert upload.content == data


def test_django_uploaded_file_is_read() -> None:
    uploaded = SimpleUploadedFile("page.html", files.HTML_PAGE.encode(), content_type="application/pdf")
    upload = validate_upload(uploaded, filename=uploaded.name or "", max_bytes=LIMIT)
    assert upload.content_type == "text/html"  # the client's claimed type is ignored


def test_file_exactly_at_the_limit_is_accepted() -> None:
    data = b"x" * 1000
    assert validate_upload(data, filename="a.txt", max_bytes=1000).size == 1000


def test_file_over_the_limit_is_rejected_with_413() -> None:
    rejection = reject(b"x" * 1001, filename="a.txt", max_bytes=1000)
    assert (rejection.code, rejection.http_status) == (RejectCode.FILE_TOO_LARGE, 413)
    assert rejection.message == "The file is larger than the limit of 1000 bytes."


def test_reading_a_stream_stops_one_byte_past_the_limit() -> None:
    stream = EndlessStream()
    with pytest.raises(UploadRejected) as caught:
        validate_upload(stream, filename="endless.txt", max_bytes=3 * 1024 * 1024 + 5)
    assert caught.value.code is RejectCode.FILE_TOO_LARGE
    assert caught.value.message == "The file is larger than the limit of 3 MB."
    assert stream.bytes_read == 3 * 1024 * 1024 + 6


def test_empty_file_is_rejected_with_file_empty() -> None:
    rejection = reject(b"")
    assert (rejection.code, rejection.http_status) == (RejectCode.FILE_EMPTY, 400)


def test_empty_stream_is_rejected_with_file_empty() -> None:
    with pytest.raises(UploadRejected) as caught:
        validate_upload(io.BytesIO(b""), filename="a.txt", max_bytes=LIMIT)
    assert caught.value.code is RejectCode.FILE_EMPTY


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(files.zip_of_other_files(), id="zip-of-other-files"),
        pytest.param(bytes(range(256)) * 8, id="binary"),
        pytest.param("Café crème".encode("latin-1"), id="latin-1-text"),
    ],
)
def test_unsupported_content_is_rejected_with_415(data: bytes) -> None:
    rejection = reject(data, filename="document.docx")
    assert (rejection.code, rejection.http_status) == (RejectCode.UNSUPPORTED_TYPE, 415)


# Builders, not bytes: a bomb takes a good part of a second to build, and a parameter would be
# built at collection, in every worker, whether or not its test runs there.
@pytest.mark.parametrize(
    ("build", "message_part"),
    [
        pytest.param(lambda: files.docx_bomb(200), "expands to more data", id="member-over-100mb"),
        pytest.param(lambda: files.docx_bomb(20), "expands to more data", id="ratio-over-200"),
        pytest.param(
            lambda: files.docx_many_entries(5_001), "too many internal parts", id="too-many-entries"
        ),
        pytest.param(files.docx_with_encrypted_member, "password-protected", id="encrypted-member"),
    ],
)
def test_docx_bombs_are_rejected_with_docx_bomb(build: Callable[[], bytes], message_part: str) -> None:
    rejection = reject(build(), filename="report.docx", max_bytes=LIMIT)
    assert (rejection.code, rejection.http_status) == (RejectCode.DOCX_BOMB, 400)
    assert message_part in rejection.message


def test_name_with_nothing_usable_is_rejected_with_invalid_name() -> None:
    rejection = reject(files.text_pdf(), filename="../\x00\x07/")
    assert (rejection.code, rejection.http_status) == (RejectCode.INVALID_NAME, 400)


@pytest.mark.parametrize(
    ("build", "name", "code"),
    [
        pytest.param(lambda: b"", "/srv/secret/plan.docx", RejectCode.FILE_EMPTY, id="empty"),
        pytest.param(
            lambda: b"x" * (LIMIT + 1), "/srv/secret/plan.docx", RejectCode.FILE_TOO_LARGE, id="too-large"
        ),
        pytest.param(
            files.zip_of_other_files, "/srv/secret/plan.docx", RejectCode.UNSUPPORTED_TYPE, id="type"
        ),
        pytest.param(lambda: files.docx_bomb(200), "/srv/secret/plan.docx", RejectCode.DOCX_BOMB, id="bomb"),
        pytest.param(files.text_pdf, "/srv/secret/\x01/", RejectCode.INVALID_NAME, id="name"),
    ],
)
def test_rejection_messages_do_not_echo_names_or_paths(
    build: Callable[[], bytes], name: str, code: RejectCode
) -> None:
    rejection = reject(build(), filename=name)
    assert rejection.code is code
    assert str(rejection) == rejection.message
    assert "secret" not in rejection.message
    assert "/" not in rejection.message


# --- the DOCX zip pre-check --------------------------------------------------------------------


def test_real_docx_passes_the_zip_pre_check() -> None:
    check_docx_archive(files.docx_document())


def test_zip_without_the_main_document_is_not_docx() -> None:
    with pytest.raises(DocxArchiveRejected) as caught:
        check_docx_archive(files.zip_of_other_files())
    assert caught.value.problem is ArchiveProblem.NOT_DOCX


def test_damaged_zip_is_not_a_zip() -> None:
    with pytest.raises(DocxArchiveRejected) as caught:
        check_docx_archive(files.truncated(files.docx_document()))
    assert caught.value.problem is ArchiveProblem.NOT_A_ZIP


def test_total_expanded_size_over_the_limit_is_too_large() -> None:
    # Each member is within its own limit (and too small for the ratio check); together they are not.
    members = {f"word/media/{index}.bin": bytes(range(256)) * 512 for index in range(4)}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document/>")
        for name, content in members.items():
            archive.writestr(name, content)
    limits = DocxLimits(max_member_bytes=200_000, max_total_bytes=400_000)
    with pytest.raises(DocxArchiveRejected) as caught:
        check_docx_archive(buffer.getvalue(), limits=limits)
    assert caught.value.problem is ArchiveProblem.TOO_LARGE
    assert "in total" in caught.value.detail
    check_docx_archive(
        buffer.getvalue(), limits=DocxLimits(max_member_bytes=200_000, max_total_bytes=600_000)
    )


def test_small_highly_compressible_members_do_not_trip_the_ratio_check() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", " " * 500_000)  # ratio near 1000, but only 500 KB
    check_docx_archive(buffer.getvalue())


# --- file names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("C:\\Users\\bob\\report.pdf", "report.pdf", id="windows-path"),
        pytest.param("../../etc/passwd", "passwd", id="traversal"),
        pytest.param("报告 2024.docx", "报告 2024.docx", id="chinese"),
        pytest.param("Cafe\u0301.txt", "Caf\u00e9.txt", id="nfc"),
        pytest.param("invoice\u202etxt.exe", "invoicetxt.exe", id="bidi-override"),
        pytest.param("line\nbreak\x00.md", "line break.md", id="control-chars"),
        pytest.param("  many   spaces .txt ", "many spaces .txt", id="whitespace"),
        pytest.param('a:b?"c".txt', "a_b__c_.txt", id="awkward-chars"),
        pytest.param(".hidden", "hidden", id="leading-dot"),
    ],
)
def test_safe_filename(name: str, expected: str) -> None:
    assert safe_filename(name) == expected


def test_long_name_is_cut_to_the_byte_limit_keeping_the_extension() -> None:
    name = safe_filename("a" * 500 + ".pdf")
    assert name.endswith(".pdf")
    assert len(name.encode()) == 200


def test_long_chinese_name_is_cut_on_a_character_boundary() -> None:
    name = safe_filename("报" * 300 + ".docx")
    assert name.endswith(".docx")
    assert len(name.encode()) <= 200
    assert set(name.removesuffix(".docx")) == {"报"}


def test_name_of_only_separators_and_controls_is_empty() -> None:
    assert safe_filename("/\\\x01\x02") == ""

"""OCR and page rendering in the sandbox child: real engines, real limits, real kills.

The child renders a page and runs the OCR engine on it (``recognize_page``); a render over the
address-space limit is a ``resource_limit``, an engine spinning past the CPU budget an
``ocr_timeout`` (tesseract is a process of the child's and inherits its limits; rapidocr runs in
the child itself), and a cancel kills the child together with its tesseract process.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as DjangoSettings

from documents.causes import OCR_TIMEOUT
from documents.engines import ocr
from documents.sandbox import runner as sandbox
from documents.sandbox.child import TEMP_DIR_ENV
from documents.sandbox.ocr_page import OcrOptions
from documents.stages.ocr import options_for
from jobs.errors import CancelRequested, StageFailure
from tests.conftest import wait_for
from tests.documents import files
from tests.reliability import corpus
from tests.reliability.helpers import alive, descendants

# Runs OCR engines in sandbox children: left out of the fast tier.
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def fresh_children() -> Iterator[None]:
    sandbox.discard_idle()
    yield
    sandbox.discard_idle()


def require(engine: str) -> None:
    if engine not in ocr.available_engines():
        if os.environ.get("REQUIRE_OCR") == "1":
            pytest.fail(f"REQUIRE_OCR=1 but {engine} is not installed")
        pytest.skip(f"{engine} is not installed")


def recognize(
    path: Path, kind: str, options: OcrOptions, number: int = 1, check: Callable[[], None] = lambda: None
) -> dict[str, object]:
    answer: dict[str, object] = sandbox.sandbox_call(
        "recognize_page",
        str(path),
        kind,
        number,
        options.as_dict(),
        source=path,
        timeout_code=OCR_TIMEOUT.code,
        check=check,
    )
    return answer


def test_a_scanned_page_is_rendered_and_read_in_the_child(tmp_path: Path) -> None:
    require("tesseract")
    scan = files.save(tmp_path, "scan.pdf", files.scanned_pdf())
    answer = recognize(scan, "pdf", OcrOptions(engine="tesseract", languages=("eng",)), number=2)
    assert answer["blank"] is False
    assert files.SCANNED_PHRASE in str(answer["text"])
    white = files.save(tmp_path, "white.png", files.one_pixel_png())
    assert recognize(white, "png", OcrOptions(engine="tesseract")) == {"blank": True, "text": ""}


def django_imports(module: str) -> list[str]:
    """Where ``module``'s source imports Django, at its top or inside a function."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    found = []
    for node in ast.walk(ast.parse(Path(spec.origin).read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        found += [f"{module}:{node.lineno}" for name in names if name.split(".")[0] == "django"]
    return found


def test_the_child_reads_with_the_ocr_settings_the_worker_sends_and_imports_no_django(
    tmp_path: Path, settings: DjangoSettings
) -> None:
    """The worker reads the OCR settings and sends them with each page; the child (a fresh
    interpreter, walled in where bubblewrap is there) reads the page with them and has no Django
    to read settings with: none imported, and none importable by any code path it loaded."""
    require("tesseract")
    settings.DOCUMENTS_SANDBOX_EXTRA_MODULES = ["tests.documents.sandbox_helpers"]
    image = files.text_image([files.CHINESE_SCANNED_PHRASE], font=files.CJK_FONT)
    page = files.save(tmp_path, "chinese.png", files.image_bytes(image, "PNG"))
    child = sandbox.sandbox_call("test.pid", source=page)

    settings.OCR_LANGUAGES = ("eng",)
    english = str(recognize(page, "png", options_for("tesseract"))["text"])
    settings.OCR_LANGUAGES = ("chi_sim",)
    chinese = str(recognize(page, "png", options_for("tesseract"))["text"])
    assert english and not re.search("[\u4e00-\u9fff]", english), english
    assert "文件测试" in chinese, chinese
    settings.OCR_TESSERACT_TIMEOUT = 0.01
    with pytest.raises(StageFailure) as failure:
        recognize(page, "png", options_for("tesseract"))
    assert failure.value.cause == "ocr_timeout" and "0.01s" in str(failure.value), str(failure.value)

    assert sandbox.sandbox_call("test.pid", source=page) == child, "one child read every page"
    assert sandbox.sandbox_call("test.modules", "django", source=page) == []
    loaded = [
        *sandbox.sandbox_call("test.modules", "documents", source=page),
        *sandbox.sandbox_call("test.modules", "jobs", source=page),
    ]
    assert {"documents.engines.ocr", "documents.sandbox.ocr_page", "documents.parsers.images"} <= set(loaded)
    assert [found for module in loaded for found in django_imports(module)] == []


def test_a_page_render_over_the_address_space_limit_is_a_resource_limit(
    tmp_path: Path, settings: DjangoSettings
) -> None:
    """The huge poster page with the pixel cap lifted: at 300 dpi the 14,400-pt page asks for a
    60,000 x 60,000 bitmap (3.6 GB), over the child's 2 GiB of address space."""
    settings.DOCUMENTS_SANDBOX_MEMORY_BYTES = 2 * 1024**3
    poster = files.save(tmp_path, "poster.pdf", corpus.huge_page_pdf())
    with pytest.raises(StageFailure) as failure:
        recognize(poster, "pdf", OcrOptions(engine="tesseract", dpi=300, max_pixels=10**10))
    assert failure.value.cause == "resource_limit", str(failure.value)
    # With the cap (the default), the page is refused before anything is allocated.
    with pytest.raises(StageFailure) as refused:
        recognize(poster, "pdf", OcrOptions(engine="tesseract", dpi=300))
    assert refused.value.cause == "page_too_large"


@pytest.mark.parametrize("engine", [ocr.TESSERACT, ocr.RAPIDOCR])
def test_an_engine_spinning_past_the_cpu_budget_is_an_ocr_timeout(
    engine: str, tmp_path: Path, settings: DjangoSettings
) -> None:
    require(engine)
    settings.DOCUMENTS_SANDBOX_CPU_SECONDS = 2
    settings.DOCUMENTS_SANDBOX_WALL_SECONDS = 240  # only the CPU budget may end it
    noise = files.save(tmp_path, "noise.png", corpus.noise_png(3_000))
    with pytest.raises(StageFailure) as failure:
        recognize(noise, "png", OcrOptions(engine=engine))
    assert failure.value.cause == "ocr_timeout", str(failure.value)
    assert sandbox.CPU_TIME_USED_UP in str(failure.value)


def test_tesseract_gets_the_calls_budget_not_the_cpu_the_child_used_before(
    tmp_path: Path, settings: DjangoSettings
) -> None:
    # The call's budget counts tesseract's CPU time with the child's (a limit of its own would
    # start at zero) and not what the child used on earlier calls.
    require("tesseract")
    settings.DOCUMENTS_SANDBOX_EXTRA_MODULES = ["tests.documents.sandbox_helpers"]
    settings.DOCUMENTS_SANDBOX_CPU_SECONDS = 2
    settings.DOCUMENTS_SANDBOX_WALL_SECONDS = 240  # only the CPU budget may end it
    noise = files.save(tmp_path, "noise.png", corpus.noise_png(3_000))  # about 3.6 s of tesseract
    for _ in range(4):  # a warm child (of the same input) that has used 6 s on earlier requests
        assert sandbox.sandbox_call("test.spin", 1.5, source=noise) == "spun"
    with pytest.raises(StageFailure) as failure:
        recognize(noise, "png", OcrOptions(engine="tesseract"))
    assert failure.value.cause == "ocr_timeout", str(failure.value)
    assert sandbox.CPU_TIME_USED_UP in str(failure.value)


def test_a_page_over_its_wall_time_is_an_ocr_timeout(tmp_path: Path, settings: DjangoSettings) -> None:
    require("tesseract")
    settings.DOCUMENTS_SANDBOX_WALL_SECONDS = 1
    noise = files.save(tmp_path, "noise.png", corpus.noise_png(3_000))
    with pytest.raises(StageFailure) as failure:
        recognize(noise, "png", OcrOptions(engine="tesseract"))
    assert failure.value.cause == "ocr_timeout", str(failure.value)


def tesseracts() -> list[int]:
    found = []
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            # At work on a page: not the short run that lists the installed languages.
            if (
                Path(f"/proc/{pid}/comm").read_text().strip() == "tesseract"
                and b"--list-langs" not in command
            ):
                found.append(pid)
    return found


def test_a_cancel_kills_the_child_and_its_tesseract_process(tmp_path: Path) -> None:
    require("tesseract")
    noise = files.save(tmp_path, "noise.png", corpus.noise_png(3_000))
    cancel = threading.Event()

    def check() -> None:
        if cancel.is_set():
            raise CancelRequested()

    outcome: list[BaseException] = []

    def call() -> None:
        try:
            recognize(noise, "png", OcrOptions(engine="tesseract"), check=check)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    try:
        (engine,) = wait_for(tesseracts, timeout=60, what="tesseract to start on the noise page")
        # The sandbox's interpreter is tesseract's parent (walled in, bubblewrap's processes are
        # its ancestors).
        child = int(Path(f"/proc/{engine}/stat").read_text().rsplit(")", 1)[1].split()[1])
        # pytesseract's files (the page in, the text out) are in the child's own temp folder (named
        # in its environment: other processes, e.g. another test worker's child, have their own),
        # seen here through the child's root (its own tmpfs when walled in).
        environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        key = f"{TEMP_DIR_ENV}=".encode()
        (named,) = [v[len(key) :].decode() for v in environ if v.startswith(key)]
        folder = Path(f"/proc/{child}/root{named}")
        wait_for(lambda: any(folder.glob("tess_*")), timeout=30, what="tesseract's files in its folder")
        cancel.set()
        thread.join(timeout=10)
        assert not thread.is_alive() and isinstance(outcome[0], CancelRequested), outcome
        wait_for(lambda: not alive(engine), timeout=5, what="the tesseract process to be killed")
        wait_for(lambda: not alive(child), timeout=5, what="the sandbox child to be killed")
        assert not folder.exists(), "the killed child's temp files were left behind"
        assert not Path(named).exists(), "the killed child's temp files were left behind"
    finally:
        cancel.set()
        thread.join(timeout=30)

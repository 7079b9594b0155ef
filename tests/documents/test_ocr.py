"""OCR engines on real rendered pages: both engines, English and Simplified Chinese.

An engine's tests skip when it is not installed, unless ``REQUIRE_OCR=1`` (CI), where they fail.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import NoReturn

import pytest
from PIL import Image, ImageDraw, ImageFont

from documents.engines import ocr
from documents.stages import ocr as ocr_stage
from jobs.errors import StageFailure

# Runs the OCR engines: left out of the fast tier.
pytestmark = pytest.mark.slow

REQUIRE_OCR = os.environ.get("REQUIRE_OCR") == "1"
LATIN_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")

ENGLISH_LINES = [
    "Invoices are processed within thirty days.",
    "Quarterly revenue grew by twelve percent.",
    "The warehouse in Rotterdam ships on Mondays.",
]
ENGLISH_WORDS = [
    "invoices",
    "processed",
    "thirty",
    "quarterly",
    "revenue",
    "twelve",
    "warehouse",
    "rotterdam",
]
CHINESE_LINES = ["文档处理平台支持中文识别。", "上传的文件会被解析和索引。", "检索结果按照相关性排序。"]
CHINESE_PHRASES = ["文档处理平台", "中文识别", "解析和索引", "相关性排序"]


def missing(reason: str) -> NoReturn:
    """Skip, or fail when CI requires OCR to be tested."""
    if REQUIRE_OCR:
        pytest.fail(f"REQUIRE_OCR=1 but {reason}")
    pytest.skip(reason)


def font(path: Path, size: int = 30) -> ImageFont.FreeTypeFont:
    if not path.exists():
        missing(f"font {path} is not installed")
    return ImageFont.truetype(str(path), size)


def render(lines: list[tuple[str, Path]], *, mode: str = "L") -> Image.Image:
    """Dark text on a light page, one line each, like part of a clean 200 dpi scan.

    Not too flat: RapidOCR scales the short side up to 736 px, so a wide strip would cost seconds.
    """
    image = Image.new(mode, (1400, max(800, 120 + 60 * len(lines))), "white")
    draw = ImageDraw.Draw(image)
    for index, (line, font_path) in enumerate(lines):
        draw.text((80, 60 + 60 * index), line, font=font(font_path), fill="black")
    return image


def compact(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.fixture(params=ocr.ENGINE_NAMES)
def engine(request: pytest.FixtureRequest) -> ocr.OcrEngine:
    try:
        return ocr.get_engine(request.param)
    except StageFailure as exc:
        missing(exc.detail)


@pytest.fixture
def both_engines() -> None:
    installed = ocr.available_engines()
    if installed != list(ocr.ENGINE_NAMES):
        missing(f"only {installed} of {list(ocr.ENGINE_NAMES)} are installed")


def test_engine_reads_english(engine: ocr.OcrEngine) -> None:
    text = engine.recognize(render([(line, LATIN_FONT) for line in ENGLISH_LINES]), languages=("eng",))

    words = set(re.findall(r"[a-z]+", text.lower()))
    assert [word for word in ENGLISH_WORDS if word not in words] == [], text


def test_engine_reads_simplified_chinese(engine: ocr.OcrEngine) -> None:
    text = engine.recognize(render([(line, CJK_FONT) for line in CHINESE_LINES]), languages=("chi_sim",))

    assert [phrase for phrase in CHINESE_PHRASES if phrase not in compact(text)] == [], text


def test_engine_reads_a_mixed_page_with_both_languages(engine: ocr.OcrEngine) -> None:
    page = render(
        [(ENGLISH_LINES[1], LATIN_FONT), (CHINESE_LINES[0], CJK_FONT), (ENGLISH_LINES[2], LATIN_FONT)]
    )

    text = engine.recognize(page, languages=("eng", "chi_sim"))

    assert "文档处理平台" in compact(text), text
    assert {"quarterly", "revenue", "warehouse"} <= set(re.findall(r"[a-z]+", text.lower())), text
    assert len(text.splitlines()) >= 3, "lines must stay separate"


def test_engine_returns_empty_text_for_a_blank_page(engine: ocr.OcrEngine) -> None:
    assert engine.recognize(Image.new("L", (800, 600), "white")) == ""


def test_engine_flattens_transparency_onto_white(engine: ocr.OcrEngine) -> None:
    # Black text on a fully transparent canvas: read as RGB without flattening, it is black on black.
    page = Image.new("RGBA", (1000, 800), (0, 0, 0, 0))
    ImageDraw.Draw(page).text((60, 50), "Transparent background", font=font(LATIN_FONT), fill=(0, 0, 0, 255))

    assert "transparent" in engine.recognize(page, languages=("eng",)).lower()


def test_engines_are_built_once_per_process(engine: ocr.OcrEngine) -> None:
    assert ocr.get_engine(engine.name) is engine


def test_tesseract_timeout_is_reported_as_ocr_timeout() -> None:
    fast_limit = ocr.TesseractEngine(timeout=0.01)
    if not fast_limit.available():
        missing("tesseract is not installed")

    with pytest.raises(StageFailure) as failure:
        fast_limit.recognize(render([(line, LATIN_FONT) for line in ENGLISH_LINES * 4]))

    assert failure.value.cause == "ocr_timeout"


def test_tesseract_without_the_language_pack_is_unavailable() -> None:
    engine = ocr.TesseractEngine()
    if not engine.available():
        missing("tesseract is not installed")

    with pytest.raises(StageFailure) as failure:
        engine.recognize(Image.new("L", (200, 100), "white"), languages=("eng", "qqq"))

    assert failure.value.cause == "ocr_engine_unavailable"
    assert "qqq" in failure.value.detail


def test_tesseract_missing_from_path_is_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no tesseract binary to run
    engine = ocr.TesseractEngine()

    assert not engine.available()
    with pytest.raises(StageFailure) as failure:
        engine.recognize(Image.new("L", (200, 100), "white"))
    assert failure.value.cause == "ocr_engine_unavailable"
    with pytest.raises(StageFailure) as failure:
        ocr.get_engine("tesseract")
    assert failure.value.cause == "ocr_engine_unavailable"


def test_rapidocr_without_its_package_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rapidocr", None)  # makes `import rapidocr` fail, as when not installed
    engine = ocr.RapidOcrEngine()

    assert not engine.available()
    with pytest.raises(StageFailure) as failure:
        engine.recognize(Image.new("L", (200, 100), "white"))
    assert failure.value.cause == "ocr_engine_unavailable"


def test_rapidocr_rejects_languages_its_model_cannot_read() -> None:
    with pytest.raises(StageFailure) as failure:
        ocr.RapidOcrEngine().recognize(Image.new("L", (200, 100), "white"), languages=("ara",))

    assert failure.value.cause == "ocr_engine_unavailable"


def test_unknown_engine_is_unavailable() -> None:
    with pytest.raises(StageFailure) as failure:
        ocr.get_engine("abbyy")

    assert failure.value.cause == "ocr_engine_unavailable"


@pytest.mark.usefixtures("both_engines")
def test_tesseract_is_the_default_and_rapidocr_its_alternative() -> None:
    assert ocr.default_engine_name() == "tesseract"
    assert ocr.alternative_engine_name("tesseract") == "rapidocr"
    assert ocr.alternative_engine_name("rapidocr") == "tesseract"


@pytest.mark.usefixtures("both_engines")
def test_the_preferred_engine_wins_when_installed_and_the_worker_prefers_its_setting(settings) -> None:
    assert ocr.default_engine_name("rapidocr") == "rapidocr"
    assert ocr.default_engine_name("tesseract") == "tesseract"
    settings.OCR_ENGINE = "rapidocr"
    assert ocr_stage.engine_for({}) == "rapidocr"
    assert ocr_stage.engine_for({"ocr_engine": "alternative"}) == "tesseract"
    settings.OCR_ENGINE = ""
    assert ocr_stage.engine_for({}) == "tesseract"


@pytest.mark.usefixtures("both_engines")
def test_whichever_engine_is_installed_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # tesseract disappears; rapidocr is a Python package

    assert ocr.available_engines() == ["rapidocr"]
    assert ocr.default_engine_name("tesseract") == "rapidocr"
    assert ocr.alternative_engine_name("rapidocr") is None


def test_no_engine_installed_is_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "rapidocr", None)

    assert ocr.available_engines() == []
    with pytest.raises(StageFailure) as failure:
        ocr.default_engine_name()
    assert failure.value.cause == "ocr_engine_unavailable"

"""Image parsing: one OCR page per frame, decompression bombs refused, damage classified."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from documents.engines.parsing import ParsedPage, page_count, parse, render_image_page
from documents.engines.sniff import Kind
from jobs.errors import StageFailure
from tests.documents import files


def failure(path: Path, kind: Kind = Kind.PNG) -> StageFailure:
    with pytest.raises(StageFailure) as caught:
        list(parse(path, kind))
    return caught.value


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        pytest.param(files.png(), Kind.PNG, id="png"),
        pytest.param(files.jpeg(), Kind.JPEG, id="jpeg"),
        pytest.param(files.one_pixel_png(), Kind.PNG, id="one-pixel"),
    ],
)
def test_single_image_is_one_page_that_needs_ocr(tmp_path: Path, data: bytes, kind: Kind) -> None:
    path = files.save(tmp_path, "scan", data)
    assert list(parse(path, kind)) == [ParsedPage(1, "", needs_ocr=True)]
    assert page_count(path, kind) == 1


def test_multipage_tiff_is_one_page_per_frame(tmp_path: Path) -> None:
    path = files.save(tmp_path, "scan.tiff", files.multipage_tiff())
    assert page_count(path, Kind.TIFF) == 2
    assert [page.number for page in parse(path, Kind.TIFF)] == [1, 2]


def test_multipage_tiff_resumes_after_the_checkpointed_frame(tmp_path: Path) -> None:
    path = files.save(tmp_path, "scan.tiff", files.multipage_tiff())
    assert list(parse(path, Kind.TIFF, start_page=1)) == [ParsedPage(2, "", needs_ocr=True)]


def test_rendered_page_is_grayscale_with_ink(tmp_path: Path) -> None:
    path = files.save(tmp_path, "scan.jpg", files.jpeg())
    image = render_image_page(path, 1)
    assert image.mode == "L"
    assert image.size == files.text_image([files.SCANNED_PHRASE]).size
    histogram = image.histogram()
    assert sum(histogram[:64]) > 1_000  # the strokes of the text
    assert sum(histogram[192:]) > image.width * image.height // 2  # on a white page


def test_rendered_tiff_frame_is_that_frame(tmp_path: Path) -> None:
    path = files.save(tmp_path, "scan.tiff", files.multipage_tiff())
    expected = files.text_image([files.PAGE_PHRASES[1]], size=48)
    assert render_image_page(path, 2).tobytes() == expected.tobytes()


def test_rendered_photo_is_turned_upright_by_its_exif_orientation(tmp_path: Path) -> None:
    image = files.text_image([files.SCANNED_PHRASE]).convert("RGB")
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: the camera was turned; rotate 90 degrees clockwise to view
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", exif=exif)
    path = files.save(tmp_path, "photo.jpg", buffer.getvalue())
    width, height = image.size
    assert render_image_page(path, 1).size == (height, width)


def test_render_of_a_frame_outside_the_image_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="outside"):
        render_image_page(files.save(tmp_path, "scan.png", files.png()), 2)


@pytest.mark.parametrize(
    ("width", "height"),
    [
        pytest.param(9_000, 9_000, id="81-megapixels-over-our-limit"),
        pytest.param(9_500, 9_500, id="90-megapixels-where-pillow-warns"),
        pytest.param(20_000, 20_000, id="400-megapixels-where-pillow-refuses"),
    ],
)
def test_oversized_image_fails_with_unsupported_input_without_decoding(
    tmp_path: Path, recwarn: pytest.WarningsRecorder, width: int, height: int
) -> None:
    path = files.save(tmp_path, "bomb.png", files.png_declaring_size(width, height))
    assert failure(path).cause == "unsupported_input"
    assert not [
        warning for warning in recwarn if issubclass(warning.category, Image.DecompressionBombWarning)
    ]


def test_image_just_under_the_pixel_limit_is_not_refused_for_its_size(tmp_path: Path) -> None:
    # 8,000 x 10,000 = 80 MP exactly: allowed, so decoding is attempted and finds the data missing.
    path = files.save(tmp_path, "big.png", files.png_declaring_size(8_000, 10_000))
    assert failure(path).cause == "corrupt_input"


def test_truncated_png_fails_with_corrupt_input(tmp_path: Path) -> None:
    path = files.save(tmp_path, "cut.png", files.truncated(files.png(), 0.6))
    assert failure(path).cause == "corrupt_input"


def test_text_given_as_an_image_fails_with_corrupt_input(tmp_path: Path) -> None:
    path = files.save(tmp_path, "notes.png", files.ENGLISH_TEXT.encode())
    assert failure(path, Kind.JPEG).cause == "corrupt_input"

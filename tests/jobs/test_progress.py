"""Progress arithmetic: weighted, skipped stages count as done, no 100 before ready."""

import pytest

from jobs.progress import CAP_BEFORE_READY, displayed, overall

STAGE_WEIGHTS = [20, 25, 15, 25, 15]  # parse, ocr, chunk, embed, index


def test_stage_boundaries_follow_the_stage_weights():
    assert overall(STAGE_WEIGHTS, 0) == 0
    assert overall(STAGE_WEIGHTS, 1) == 20
    assert overall(STAGE_WEIGHTS, 2) == 45
    assert overall(STAGE_WEIGHTS, 4) == 85


def test_sub_progress_needs_a_real_total():
    assert overall(STAGE_WEIGHTS, 1, done=5, total=None) == 20
    assert overall(STAGE_WEIGHTS, 1, done=5, total=0) == 20
    assert overall(STAGE_WEIGHTS, 1, done=130, total=200) == pytest.approx(20 + 25 * 0.65)


def test_a_skipped_stage_counts_as_done():
    # OCR skipped: chunking starts at 45 whether or not OCR ran.
    assert overall(STAGE_WEIGHTS, 2) == 45


def test_never_100_before_ready():
    assert overall(STAGE_WEIGHTS, 4, done=10, total=10) == CAP_BEFORE_READY
    assert overall(STAGE_WEIGHTS, 5) == CAP_BEFORE_READY


def test_done_beyond_total_is_clamped():
    assert overall([50, 50], 0, done=500, total=10) == 50


def test_no_number_is_shown_before_a_total_or_a_finished_stage():
    assert displayed(0.0, total=None, ready=False) is None
    assert displayed(0.0, total=10, ready=False) == 0.0
    assert displayed(52.0, total=200, ready=False) == 52.0
    assert displayed(99.0, total=None, ready=True) == 100.0


def test_a_stage_without_a_total_yet_keeps_the_finished_stages_number():
    # Chunking has just begun and counted nothing: the 45 of parsing and OCR stays on show.
    assert displayed(45.0, total=None, ready=False) == 45.0


def test_a_stopped_job_keeps_the_progress_it_reached():
    assert displayed(45.0, total=None, ready=False, stopped=True) == 45.0

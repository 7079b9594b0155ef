"""A small inline SVG chart of throughput and failures per hour, drawn on the server.

No JavaScript library: the health page must work from a locked-down operator laptop and in a
screenshot. A pure function of the buckets, so it is tested without a database. Numbers are
formatted here; the only text (labels, tooltips) goes through ``escape``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from jobs.health import Bucket

WIDTH, HEIGHT = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 44, 12, 30, 34
READY_COLOUR, FAILED_COLOUR, ATTEMPT_COLOUR = "#2e7d32", "#c62828", "#ef6c00"
LEGEND = ((READY_COLOUR, "jobs ready"), (FAILED_COLOUR, "jobs failed"), (ATTEMPT_COLOUR, "failed attempts"))


def nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5 x 10^n that is at least ``value`` (and at least 1)."""
    if value <= 1:
        return 1
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def throughput_svg(buckets: Sequence[Bucket]) -> SafeString:
    """Ready (green) and failed (red) jobs per bucket as bars; failed attempts (retried ones
    included) as a dashed orange line. Each bucket has a tooltip with its exact numbers."""
    if not buckets:
        return mark_safe("")
    top = nice_ceiling(max(max(b.ready, b.failed, b.failed_attempts) for b in buckets))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    base = TOP + plot_h
    slot = plot_w / len(buckets)
    bar = max(1.0, slot * 0.36)

    def y(value: int) -> float:
        return base - plot_h * value / top

    parts = [f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{base}" y2="{base}" stroke="#999"/>']
    for tick in sorted({0, top // 2, top}):
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#e5e5e5"/>'
            f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="#555">{tick}</text>'
        )
    points = []
    for i, b in enumerate(buckets):
        left = LEFT + i * slot + (slot - 2 * bar) / 2
        centre = LEFT + i * slot + slot / 2
        tip = escape(
            f"{b.start:%Y-%m-%d %H:00} UTC: {b.ready} ready, {b.failed} failed, "
            f"{b.failed_attempts} failed attempts"
        )
        parts.append(
            f'<g class="bucket"><title>{tip}</title>'
            f'<rect x="{LEFT + i * slot:.1f}" y="{TOP}" width="{slot:.1f}" height="{plot_h}" '
            'fill="transparent"/>'
            f'<rect x="{left:.1f}" y="{y(b.ready):.1f}" width="{bar:.1f}" height="{base - y(b.ready):.1f}" '
            f'fill="{READY_COLOUR}"/>'
            f'<rect x="{left + bar:.1f}" y="{y(b.failed):.1f}" width="{bar:.1f}" '
            f'height="{base - y(b.failed):.1f}" fill="{FAILED_COLOUR}"/></g>'
        )
        points.append(f"{centre:.1f},{y(b.failed_attempts):.1f}")
        if i % 3 == 0 or i == len(buckets) - 1:
            parts.append(
                f'<text x="{centre:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" font-size="11" '
                f'fill="#555">{escape(f"{b.start:%H}:00")}</text>'
            )
    parts.append(
        f'<polyline points="{" ".join(points)}" fill="none" stroke="{ATTEMPT_COLOUR}" '
        f'stroke-width="2" stroke-dasharray="4 3"/>'
    )
    x = LEFT
    for colour, text in LEGEND:
        parts.append(
            f'<rect x="{x}" y="8" width="12" height="12" fill="{colour}"/>'
            f'<text x="{x + 17}" y="18" font-size="12" fill="#333">{escape(text)}</text>'
        )
        x += 24 + 7 * len(text)
    summary = escape(
        f"Per hour, last {len(buckets)} hours: {sum(b.ready for b in buckets)} jobs ready, "
        f"{sum(b.failed for b in buckets)} failed, {sum(b.failed_attempts for b in buckets)} failed attempts"
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="jobs-chart" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{summary}"><title>{summary}</title>'
        f"{''.join(parts)}</svg>"
    )
    return mark_safe(svg)  # every piece of text above went through escape()

"""A small inline SVG chart of a query set's MRR@10 per run over time, drawn on the server (no
JavaScript library, like the operators' health chart). Pure: points in, markup out; the only
text (labels, tooltips) goes through ``escape``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 40, 12, 16, 28
COLOURS = {"hybrid": "#1565c0", "semantic": "#2e7d32", "lexical": "#ef6c00"}


@dataclass(frozen=True)
class Point:
    label: str  # the run's date and embedder, shown as a tooltip
    values: dict[str, float]  # mode -> MRR@10 (0-1)


def mrr_svg(points: Sequence[Point]) -> SafeString:
    """One line per mode over the runs in order (oldest first), 0-1 on the vertical axis."""
    if not points:
        return mark_safe("")
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = inner_w / max(1, len(points) - 1)

    def xy(i: int, value: float) -> tuple[float, float]:
        return LEFT + i * step, TOP + inner_h * (1 - max(0.0, min(1.0, value)))

    parts = [
        f'<svg class="eval-chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'aria-label="MRR@10 per run">'
    ]
    for tick in (0.0, 0.5, 1.0):
        _, y = xy(0, tick)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{tick:.1f}</text>'
        )
    legend_x = LEFT
    for mode, colour in COLOURS.items():
        series = [(i, p.values[mode]) for i, p in enumerate(points) if mode in p.values]
        if not series:
            continue
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, v) for i, v in series))
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        for i, value in series:
            x, y = xy(i, value)
            tip = escape(f"{points[i].label}: {mode} {value:.3f}")
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"><title>{tip}</title></circle>'
            )
        parts.append(
            f'<rect x="{legend_x}" y="{HEIGHT - 14}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{legend_x + 14}" y="{HEIGHT - 5}" font-size="11">{escape(mode)}</text>'
        )
        legend_x += 90
    parts.append("</svg>")
    return mark_safe("".join(parts))

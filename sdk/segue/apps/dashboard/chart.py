"""The dashboard's usage bars: cache read, cache write and uncached input, one stacked bar per run or iteration,
as plain data the templates draw as SVG."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from segue._core.usage import cache_parts
from segue.generated import Usage

Segment = Literal["cache-read", "cache-write", "uncached"]


@attrs.frozen(kw_only=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    kind: Segment
    title: str


@attrs.frozen(kw_only=True)
class BarRow:
    label: str
    y: float
    rects: list[Rect]
    total: str
    total_x: float


@attrs.frozen(kw_only=True)
class Chart:
    width: int
    height: int
    rows: list[BarRow]


_KIND_LABEL = {"cache-read": "cache read", "cache-write": "cache write", "uncached": "uncached"}


def bar_chart(bars: Sequence[tuple[str, Usage]], *, width: int = 640, row: int = 26, label_width: int = 56) -> Chart:
    """Stacked horizontal bars, one per (label, usage): cache read, cache write, uncached, on one scale."""
    plot = width - label_width - 90
    scale = max((u.input_tokens for _, u in bars), default=0) or 1
    rows = []
    for i, (label, usage) in enumerate(bars):
        parts = cache_parts(usage)
        y = i * row + 4
        x = float(label_width)
        rects = []
        segments: list[tuple[Segment, int | None]] = [
            ("cache-read", parts.read),
            ("cache-write", parts.write),
            ("uncached", parts.uncached),
        ]
        for kind, value in segments:
            if not value:
                continue
            w = plot * value / scale
            title = f"{label}: {value:,} tokens {_KIND_LABEL[kind]}".lstrip(": ")
            rects.append(Rect(x=x, y=y, width=w, height=row - 8, kind=kind, title=title))
            x += w
        rows.append(BarRow(label=label, y=y, rects=rects, total=f"{usage.input_tokens:,}", total_x=x + 6))
    return Chart(width=width, height=max(len(bars), 1) * row + 8, rows=rows)

"""A small bar chart as inline SVG, drawn on the server (no chart library, no script: the page's CSP
allows neither inline script nor inline style, and needs neither: bars are styled by class)."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

WIDTH = 640
HEIGHT = 160
PAD_LEFT = 34
PAD_BOTTOM = 22
PAD_TOP = 10


def bar_chart(points: Sequence[tuple[str, int]], *, label: str, unit: str = "") -> Markup:
    """Bars for ``(day, value)`` points, oldest first; every bar has a tooltip with its exact value."""
    n = max(1, len(points))
    top = max([v for _, v in points] + [1])
    plot_w = WIDTH - PAD_LEFT - 4
    plot_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    step = plot_w / n
    bar_w = max(1.0, step * 0.8)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(label)}</title>",
        f'<line class="axis" x1="{PAD_LEFT}" y1="{PAD_TOP + plot_h}" x2="{WIDTH - 4}" y2="{PAD_TOP + plot_h}"/>',
        f'<text class="tick" x="{PAD_LEFT - 4}" y="{PAD_TOP + 4}" text-anchor="end">{top}</text>',
        f'<text class="tick" x="{PAD_LEFT - 4}" y="{PAD_TOP + plot_h}" text-anchor="end">0</text>',
    ]
    every = max(1, round(n / 6))  # about six date labels, whatever the span
    for i, (day, value) in enumerate(points):
        h = plot_h * value / top
        x = PAD_LEFT + i * step + (step - bar_w) / 2
        y = PAD_TOP + plot_h - h
        parts.append(
            f'<rect class="bar" data-day="{escape(day)}" data-value="{value}" x="{x:.1f}" y="{y:.1f}" '
            f'width="{bar_w:.1f}" height="{max(h, 0):.1f}"><title>{escape(day)}: {value}{escape(unit)}</title></rect>'
        )
        if i % every == 0 or i == n - 1:
            parts.append(f'<text class="tick" x="{x + bar_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">{escape(day[5:])}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))

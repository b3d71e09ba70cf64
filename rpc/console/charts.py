"""Charts drawn on the server as SVG: no script, no chart library, nothing to build.

``line_chart`` draws rates over time (the overview's live charts), ``bar_chart`` one bar
per partition (a group's lag). Both return SVG text with every label escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

PALETTE = ("#2b6cb0", "#c05621", "#2f855a", "#9b2c2c", "#6b46c1", "#b7791f", "#2c7a7b", "#97266d")
WIDTH = 640
HEIGHT = 180
MARGIN_LEFT = 56
MARGIN_BOTTOM = 22
MARGIN_TOP = 8
BARS_MAX = 64  # a chart of more partitions shows the largest lags


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]  # (seconds, value), oldest first


def _number(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _frame(title: str, y_max: float, x_label: str, label_on_top: bool = False) -> list[str]:
    """Axes, the y axis' top value and 0, and ``x_label`` (on top when the x axis has
    labels of its own)."""
    plot_bottom = HEIGHT - MARGIN_BOTTOM
    label_y = MARGIN_TOP + 10 if label_on_top else HEIGHT - 4
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}">',
        f'<line x1="{MARGIN_LEFT}" y1="{MARGIN_TOP}" x2="{MARGIN_LEFT}" y2="{plot_bottom}" '
        'stroke="#999"/>',
        f'<line x1="{MARGIN_LEFT}" y1="{plot_bottom}" x2="{WIDTH}" y2="{plot_bottom}" '
        'stroke="#999"/>',
        f'<text x="{MARGIN_LEFT - 4}" y="{MARGIN_TOP + 10}" text-anchor="end">'
        f"{_number(y_max)}</text>",
        f'<text x="{MARGIN_LEFT - 4}" y="{plot_bottom}" text-anchor="end">0</text>',
        f'<text x="{WIDTH - 2}" y="{label_y}" text-anchor="end">{escape(x_label)}</text>',
    ]


def line_chart(title: str, series: list[Series], unit: str) -> str:
    """One line per series over the time they share; an empty chart says why."""
    points = [point for item in series for point in item.points]
    if not any(len(item.points) >= 2 for item in series):
        return _empty(title, "collecting: a line appears after two points (each refresh adds one)")
    t_first = min(t for t, _ in points)
    t_span = max(max(t for t, _ in points) - t_first, 1e-9)
    y_max = max(max(v for _, v in points), 1.0)
    plot_width = WIDTH - MARGIN_LEFT - 4
    plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    parts = _frame(title, y_max, f"last {t_span:.0f} s, {unit}")
    for index, item in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        coordinates = " ".join(
            f"{MARGIN_LEFT + (t - t_first) / t_span * plot_width:.1f},"
            f"{MARGIN_TOP + plot_height - v / y_max * plot_height:.1f}"
            for t, v in item.points
        )
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coordinates}">'
            f"<title>{escape(item.name)}</title></polyline>"
        )
        parts.append(
            f'<text x="{MARGIN_LEFT + 8 + 150 * (index % 4)}" y="{MARGIN_TOP + 12 + 14 * (index // 4)}"'
            f' fill="{colour}">{escape(item.name)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def bar_chart(title: str, bars: list[tuple[str, float]], unit: str) -> str:
    """One bar per label (a partition), its value on top."""
    if not bars:
        return _empty(title, "nothing to chart")
    shown = sorted(bars, key=lambda bar: -bar[1])[:BARS_MAX] if len(bars) > BARS_MAX else bars
    y_max = max(max(value for _, value in shown), 1.0)
    plot_width = WIDTH - MARGIN_LEFT - 4
    plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM - 12
    slot = plot_width / len(shown)
    parts = _frame(title, y_max, unit, label_on_top=True)
    for index, (label, value) in enumerate(shown):
        height = value / y_max * plot_height
        x = MARGIN_LEFT + index * slot + slot * 0.15
        y = HEIGHT - MARGIN_BOTTOM - height
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" height="{height:.1f}" '
            f'fill="{PALETTE[0]}"><title>{escape(label)}: {_number(value)}</title></rect>'
        )
        parts.append(
            f'<text x="{x + slot * 0.35:.1f}" y="{y - 2:.1f}" text-anchor="middle">'
            f"{_number(value)}</text>"
        )
        if len(shown) <= 16:
            parts.append(
                f'<text x="{x + slot * 0.35:.1f}" y="{HEIGHT - MARGIN_BOTTOM + 12}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


def _empty(title: str, why: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} 40" '
        f'width="{WIDTH}" height="40" role="img" aria-label="{escape(title)}">'
        f'<text x="8" y="24">{escape(why)}</text></svg>'
    )

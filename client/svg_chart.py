"""A line chart as an inline SVG string: several named series of (x, y) points, axes with min/max ticks, a legend."""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 460, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 28, 40
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def tick(value: float) -> str:
    """A short label: 1.2M, 35k, 0.25, 475."""
    magnitude = abs(value)
    if magnitude >= 1e6:
        return f"{value / 1e6:.3g}M"
    if magnitude >= 1e4:
        return f"{value / 1e3:.3g}k"
    return f"{value:.4g}"


def bounds(values: list[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    if low == high:  # a flat series still gets an axis around it
        pad = abs(low) * 0.1 or 1.0
        return low - pad, high + pad
    return low, high


def line_chart(title: str, x_label: str, series: dict[str, list[tuple[float, float]]]) -> str:
    """The chart as `<svg>...</svg>`; series with no points are left out, an empty chart says so."""
    series = {name: points for name, points in series.items() if points}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
             f'<text x="{LEFT}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>']
    if not series:
        parts.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" fill="#888">no data</text></svg>')
        return "".join(parts)
    xs = [x for points in series.values() for x, _ in points]
    ys = [y for points in series.values() for _, y in points]
    (x0, x1), (y0, y1) = bounds(xs), bounds(ys)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return TOP + (1 - (y - y0) / (y1 - y0)) * plot_h

    bottom = TOP + plot_h
    parts.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#ccc"/>')
    for y in (y0, (y0 + y1) / 2, y1):
        parts.append(f'<text x="{LEFT - 4}" y="{sy(y) + 4:.1f}" text-anchor="end">{tick(y)}</text>')
    for x, anchor in ((x0, "start"), (x1, "end")):
        parts.append(f'<text x="{sx(x):.1f}" y="{bottom + 14}" text-anchor="{anchor}">{tick(x)}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{bottom + 30}" text-anchor="middle">{escape(x_label)}</text>')
    for i, (name, points) in enumerate(sorted(series.items())):
        colour = COLOURS[i % len(COLOURS)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        parts.append(f'<polyline data-series="{escape(name)}" fill="none" stroke="{colour}" stroke-width="1.5" '
                     f'points="{coords}"/>')
        parts.append(f'<text x="{LEFT + 6}" y="{TOP + 14 + 13 * i}" fill="{colour}">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)

"""Line charts as inline SVG: the coordinates a template draws, and a text summary of
them for screen readers. Pure code."""

from __future__ import annotations

from dataclasses import dataclass

WIDTH = 640
HEIGHT = 200
LEFT = 48  # room for the y-axis labels
BOTTOM = 24  # room for the x-axis labels
TOP = 10
RIGHT = 10
STEPS_S = (10, 15, 30, 60, 120, 300, 600, 900)


@dataclass(frozen=True)
class Line:
    """One series: its name, its polyline points, and its latest value."""

    name: str
    points: str
    latest: int
    peak: int
    end: tuple[float, float] | None  # where the latest point is drawn (marked)


@dataclass(frozen=True)
class Tick:
    """An axis label and where it goes."""

    label: str
    at: float


@dataclass(frozen=True)
class Chart:
    """What a template needs to draw one chart."""

    chart_id: str
    title: str
    summary: str
    lines: tuple[Line, ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    bottom_y: int = HEIGHT - BOTTOM
    right_x: int = WIDTH - RIGHT


def _nice_max(value: int) -> int:
    """The smallest of 1, 2, 5 x 10^k at or above the value (at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def chart(chart_id: str, title: str, unit: str, start_ms: int, end_ms: int,
          series: dict[str, list[tuple[int, int]]]) -> Chart:
    """A chart of the series (name -> [(epoch ms, value)]) between two times."""
    peak = max((v for points in series.values() for _, v in points), default=0)
    top_value = _nice_max(peak)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    span = max(1, end_ms - start_ms)

    def x(at: int) -> float:
        return round(LEFT + plot_w * (min(max(at, start_ms), end_ms) - start_ms) / span, 1)

    def y(value: int) -> float:
        return round(TOP + plot_h * (1 - value / top_value), 1)

    lines = tuple(
        Line(name, " ".join(f"{x(at)},{y(v)}" for at, v in points),
             points[-1][1] if points else 0, max((v for _, v in points), default=0),
             (x(points[-1][0]), y(points[-1][1])) if points else None)
        for name, points in series.items()
    )
    marks = (0, top_value // 2, top_value) if top_value >= 2 else (0, top_value)
    y_ticks = tuple(Tick(str(v), y(v)) for v in marks)
    step_s = next((s for s in STEPS_S if span / 1000 / s <= 5), STEPS_S[-1])
    x_ticks = tuple(Tick(_ago(back_s), x(end_ms - back_s * 1000))
                    for back_s in range(0, span // 1000 + 1, step_s))
    if any(line.points for line in lines):
        summary = f"{title} over the last {_ago(span // 1000, False)}, in {unit}: " + "; ".join(
            f"{line.name} now {line.latest}, at most {line.peak}" for line in lines) + "."
    else:
        summary = f"{title}: no samples yet."
    return Chart(chart_id, title, summary, lines, y_ticks, x_ticks)


def _ago(seconds: int, signed: bool = True) -> str:
    """"-5 min", "-30 s", "now" (or "5 minutes", "30 seconds" unsigned)."""
    if signed:
        if not seconds:
            return "now"
        return f"-{seconds // 60} min" if seconds % 60 == 0 else f"-{seconds} s"
    if seconds % 60 == 0:
        return f"{seconds // 60} minute{'s' if seconds != 60 else ''}"
    return f"{seconds} seconds"

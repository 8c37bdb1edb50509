"""The soak run's figures: windows of latency and memory, the flat-or-not verdict, a Markdown
page and a plot."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.timing import percentile

OPERATIONS = ("SendMessageBatch", "ReceiveMessage", "DeleteMessageBatch")
P99_RATIO = 1.5
RSS_GROWTH = 0.10
WINDOW_S = 300.0
WARM_UP_S = 120.0


@dataclass(frozen=True)
class Sample:
    """One sampling window of the soak run."""

    at_s: float
    p50_ms: dict[str, float]
    p99_ms: dict[str, float]
    rss_mib: float
    depth: int
    deleted: int


@dataclass
class SoakFigures:
    """The run's samples, its raw latencies and the verdict."""

    duration_s: float
    rate: float
    samples: list[Sample]
    calls: list[tuple[float, str, float]]  # (seconds since start, operation, seconds)
    sent: int = 0
    deleted: int = 0
    errors: int = 0
    verdict: dict[str, object] = field(default_factory=dict)


def window_p99(calls: list[tuple[float, str, float]], start: float, end: float,
               operation: str) -> float:
    """The p99 in ms of one operation's calls that began in [start, end)."""
    picked = [s * 1000 for at, op, s in calls if op == operation and start <= at < end]
    return round(percentile(picked, 99), 2)


def rss_slope_mib_per_hour(samples: list[Sample]) -> float:
    """Least-squares slope of RSS against time."""
    if len(samples) < 2:
        return 0.0
    xs = [s.at_s / 3600 for s in samples]
    ys = [s.rss_mib for s in samples]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    denominator = sum((x - mx) ** 2 for x in xs)
    if denominator == 0:
        return 0.0
    return round(sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / denominator, 2)


def judge(figures: SoakFigures) -> dict[str, object]:
    """First versus last window (5 minutes, or a third of a shorter run) and RSS growth
    after the warm-up (2 minutes, or a quarter of a shorter run)."""
    end = figures.duration_s
    window = min(WINDOW_S, end / 3)
    warm_up = min(WARM_UP_S, end / 4)
    first = {op: window_p99(figures.calls, 0, window, op) for op in OPERATIONS}
    last = {op: window_p99(figures.calls, end - window, end + 1, op) for op in OPERATIONS}
    latency_flat = all(last[op] <= P99_RATIO * first[op] for op in OPERATIONS if first[op])
    warm = [s for s in figures.samples if s.at_s >= warm_up] or figures.samples
    rss_start = warm[0].rss_mib if warm else 0.0
    rss_end = warm[-1].rss_mib if warm else 0.0
    growth = (rss_end - rss_start) / rss_start if rss_start else 0.0
    rss_first = [s.rss_mib for s in figures.samples if s.at_s <= window]
    rss_last = [s.rss_mib for s in figures.samples if s.at_s >= end - window]
    return {
        "window_s": round(window, 1), "warm_up_s": round(warm_up, 1),
        "first_p99_ms": first, "last_p99_ms": last,
        "first_rss_mib": max(rss_first, default=0.0), "last_rss_mib": max(rss_last, default=0.0),
        "rss_growth_after_warm_up": round(growth, 4),
        "rss_slope_mib_per_hour": rss_slope_mib_per_hour(warm),
        "latency_flat": latency_flat, "rss_flat": growth < RSS_GROWTH,
        "flat": latency_flat and growth < RSS_GROWTH,
    }


def markdown(figures: SoakFigures) -> str:
    """The soak page."""
    v = figures.verdict
    first, last = v["first_p99_ms"], v["last_p99_ms"]
    assert isinstance(first, dict) and isinstance(last, dict)
    lines = [
        "# Soak",
        "",
        f"`make soak`: DMQ on its default store (DynamoDB Local), {figures.rate:g} messages/s "
        f"sent (SendMessageBatch of 10 by 2 producers), received (up to 10, "
        f"WaitTimeSeconds=1) and deleted (DeleteMessageBatch) by 2 consumers, for "
        f"{figures.duration_s:.0f} s; sampled every 10 s. Sent {figures.sent:,} "
        f"({figures.sent / figures.duration_s:.1f}/s), deleted {figures.deleted:,} "
        f"({figures.deleted / figures.duration_s:.1f}/s); {figures.errors} calls failed.",
        "",
        f"Verdict: **{'flat' if v['flat'] else 'not flat'}** (last p99 within "
        f"{P99_RATIO:g}x of the first: {v['latency_flat']}; RSS growth after a "
        f"{v['warm_up_s']} s warm-up under {RSS_GROWTH:.0%}: {v['rss_flat']}).",
        "",
        f"| figure | first {v['window_s']} s | last {v['window_s']} s |",
        "|---|---:|---:|",
        *[f"| {op} p99 ms | {first[op]:.1f} | {last[op]:.1f} |" for op in OPERATIONS],
        f"| RSS MiB, DMQ + DynamoDB Local (max) | {v['first_rss_mib']} | {v['last_rss_mib']} |",
        "",
        f"- RSS growth after the warm-up: {float(str(v['rss_growth_after_warm_up'])):.1%}; "
        f"least-squares slope {v['rss_slope_mib_per_hour']} MiB per hour.",
        f"- Queue depth at the end: {figures.samples[-1].depth if figures.samples else 0}.",
        "",
        "![latency p99 and RSS over time](soak.png)",
    ]
    return "\n".join(lines) + "\n"


def plot(figures: SoakFigures, path: Path) -> None:
    """Latency p99 of each operation and RSS over time, one above the other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.at_s / 60 for s in figures.samples]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    for op in OPERATIONS:
        top.plot(minutes, [s.p99_ms.get(op, 0.0) for s in figures.samples], label=op)
    top.set_ylabel("p99 ms (10 s windows)")
    top.legend(loc="upper left", fontsize="small")
    bottom.plot(minutes, [s.rss_mib for s in figures.samples], color="tab:red")
    bottom.set_ylabel("RSS MiB (DMQ + DynamoDB Local)")
    bottom.set_xlabel("minutes")
    fig.suptitle(f"DMQ soak: {figures.rate:g} messages/s")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)

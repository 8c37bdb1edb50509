"""The human report: Markdown with PNG plots drawn by matplotlib (headless)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


class Report:
    """Collects lines, tables and plots; writes `report.md` beside its PNGs."""

    def __init__(self, folder: str | Path, title: str) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lines = [f"# {title}", ""]

    def line(self, text: str) -> None:
        """A paragraph."""
        self._lines += [text, ""]

    def table(self, columns: Sequence[str], rows: Sequence[Sequence[Any]],
              limit: int = 50) -> None:
        """A Markdown table (at most `limit` rows, with a note of the rest)."""
        if not rows:
            self.line("_(none)_")
            return
        self._lines.append("| " + " | ".join(columns) + " |")
        self._lines.append("|" + "---|" * len(columns))
        for row in rows[:limit]:
            self._lines.append("| " + " | ".join("" if v is None else str(v) for v in row) + " |")
        if len(rows) > limit:
            self._lines.append(f"\n_...and {len(rows) - limit} more (see the Parquet output)._")
        self._lines.append("")

    def histogram(self, name: str, values: Sequence[float], title: str, xlabel: str) -> None:
        """A histogram PNG, linked from the report."""
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.hist(list(values) or [0], bins=50, color="#4c72b0")
        ax.set(title=title, xlabel=xlabel, ylabel="messages")
        self._save(fig, name, title)

    def series(self, name: str, xs: Sequence[float], lines: dict[str, Sequence[float]],
               title: str, xlabel: str) -> None:
        """A line chart PNG (one line per entry of `lines`)."""
        fig, ax = plt.subplots(figsize=(7, 3.5))
        for label, ys in lines.items():
            ax.plot(list(xs), list(ys), label=label)
        ax.set(title=title, xlabel=xlabel)
        ax.legend()
        self._save(fig, name, title)

    def bars(self, name: str, labels: Sequence[str], values: Sequence[float], title: str,
             alert: bool = False) -> None:
        """A bar chart PNG; red when `alert` (lost or duplicate messages found)."""
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.bar(list(labels), list(values), color="#c44e52" if alert else "#55a868")
        ax.set(title=title)
        self._save(fig, name, title)

    def _save(self, fig: Any, name: str, title: str) -> None:
        fig.tight_layout()
        fig.savefig(self.folder / f"{name}.png", dpi=80)
        plt.close(fig)
        self._lines += [f"![{title}]({name}.png)", ""]

    def write(self) -> Path:
        """Write `report.md`; return its path."""
        path = self.folder / "report.md"
        path.write_text("\n".join(self._lines), encoding="utf-8")
        return path

"""Markdown tables and PNG charts of benchmark results (benchmarks/results/)."""

from __future__ import annotations

import datetime
import functools
import os
import pathlib
import platform
import shlex
import subprocess

RESULTS_DIR = pathlib.Path(os.environ.get("BENCH_RESULTS", pathlib.Path(__file__).parent / "results"))


@functools.cache
def repo_version() -> str:
    """The commit the benchmark runs, `-dirty` if tracked files other than the results differ
    from it (the results a run writes as it goes do not make it dirty)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True,
                              cwd=pathlib.Path(__file__).parent).stdout.strip()
    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return ""
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ":/", ":(exclude,top)benchmarks/results")
    return head + ("-dirty" if changed else "")


def machine() -> str:
    try:
        load = "%.1f" % os.getloadavg()[0]
    except OSError:
        load = "?"
    git = repo_version()
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, repo at `{git or '?'}`, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, 1-minute load average {load}")


def knobs(*names: str) -> str:
    """The benchmark knobs (environment variables) among `names` this run set, as a command
    prefix ("" if none): a report says how it was narrowed."""
    return "".join(f"{n}={shlex.quote(os.environ[n])} " for n in names if os.environ.get(n))


def fmt(v, digits=0) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def mib(n) -> str:
    return "–" if n is None else f"{n / 2**20:,.1f}"


def ratio(a, b) -> str:
    return "–" if not a or not b else f"{a / b:.2f}x"


def table(headers: list[str], rows: list[list[str]]) -> str:
    right = ["---:" if i else "---" for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(right) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def bar_chart(path: pathlib.Path, title: str, groups: list[str], series: dict[str, list[float | None]],
              ylabel: str) -> str:
    """A grouped bar chart as PNG (matplotlib, the `bench` extra); returns a note for the report."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(no chart: matplotlib is not installed; `pip install -e '.[bench]'`)"
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(groups)), 4))
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [v or 0 for v in values], width, label=name)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"![{title}]({path.name})"

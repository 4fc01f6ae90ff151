"""Chart of LoCoMo evidence recall@k from ``python -m bench.locomo_recall --json`` output.

Usage: ``.venv/bin/python -m bench.plot_locomo RESULT.json [--before BEFORE.json] [--out docs/locomo_recall.png]``

Bars per k: the paper's DRAGON, mnemo hybrid (the real recall path), and the
BM25-only and vector-only ablations of the same run; ``--before`` adds the hybrid
figures of an earlier run (e.g. before a pipeline change) for comparison.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path)
    parser.add_argument("--before", type=Path, help="an earlier run's JSON: its hybrid figures are drawn too")
    parser.add_argument("--out", type=Path, default=Path("docs/locomo_recall.png"))
    args = parser.parse_args()
    result = json.loads(args.result.read_text())
    ks = sorted(result["overall"], key=int)
    dragon = result.get("dragon", {})
    series: list[tuple[str, list[float], str]] = []
    if dragon:
        series.append(("DRAGON (paper, Table 3)", [100 * dragon.get(k, float("nan")) for k in ks], "#9e9e9e"))
    if args.before:
        before = json.loads(args.before.read_text())
        series.append(("mnemo hybrid, before", [100 * before["overall"][k] for k in ks], "#90caf9"))
    series.append(("mnemo hybrid (real path)", [100 * result["overall"][k] for k in ks], "#1565c0"))
    ablations = result.get("ablations", {})
    if "lexical" in ablations:
        series.append(("BM25-only ablation", [100 * ablations["lexical"]["overall"][k] for k in ks], "#ffb74d"))
    if "semantic" in ablations:
        series.append(("vector-only ablation", [100 * ablations["semantic"]["overall"][k] for k in ks], "#81c784"))

    fig, ax = plt.subplots(figsize=(9, 4.8), dpi=120)
    width = 0.8 / len(series)
    for i, (label, values, color) in enumerate(series):
        xs = [n + (i - (len(series) - 1) / 2) * width for n in range(len(ks))]
        bars = ax.bar(xs, values, width, label=label, color=color)
        ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=1)
    ax.set_xticks(range(len(ks)), [f"recall@{k}" for k in ks])
    ax.set_ylim(0, 105)
    ax.set_ylabel("evidence recall (%)")
    ax.set_title(f"LoCoMo evidence recall@k, {result['questions']} questions (all categories, adversarial included)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

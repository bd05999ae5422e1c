#!/usr/bin/env python3
"""Where a CUDA step's time goes, kernel by kernel, from Nsight Compute's CSV.

bench/gpu/proof.sh runs `ncu --csv --metrics gpu__time_duration.sum` over one step of
bench_llm (a short model: --layers 2) and pipes its output here. Each kernel launch is
one row of the CSV (its name and its duration); this prints the kernels grouped by name,
largest total first: total milliseconds, share of the step's GPU time, launches and the
mean microseconds per launch, then the whole. ncu runs the kernels one at a time, so the
durations are each kernel's alone, not the step's wall time (no overlap, no launch gaps).

  ncu --csv --metrics gpu__time_duration.sum PROGRAM ... | kernel_table.py [--top N]
"""
import argparse
import csv
import re
import sys


def short(name: str, width: int = 90) -> str:
    """The kernel's name without template arguments and parameter lists, cut to width."""
    out, depth = [], 0
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = re.sub(r"\s+", " ", "".join(out)).strip() or name
    return s if len(s) <= width else s[: width - 3] + "..."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=25, help="kernels listed (the rest are summed in one row)")
    ap.add_argument("csv", nargs="?", help="ncu's CSV output (default: standard input)")
    args = ap.parse_args()
    lines = open(args.csv, encoding="utf-8", errors="replace") if args.csv else sys.stdin
    # ncu prints its own lines (==PROF==, the program's output) before and among the CSV.
    rows = [l for l in lines if l.startswith('"')]
    if not rows:
        print("kernel_table.py: no CSV rows from ncu (did it profile any kernel?)", file=sys.stderr)
        return 2
    totals = {}
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        ns = value * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1)
        name = short(r["Kernel Name"])
        t, n = totals.get(name, (0.0, 0))
        totals[name] = (t + ns, n + 1)
    whole = sum(t for t, _ in totals.values())
    if whole <= 0:
        print("kernel_table.py: no kernel durations in the CSV", file=sys.stderr)
        return 2
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])
    print(f"{'ms':>9} {'share':>6} {'launches':>8} {'us/launch':>10}  kernel")
    for name, (t, n) in ranked[: args.top]:
        print(f"{t / 1e6:9.2f} {100 * t / whole:5.1f}% {n:8d} {t / n / 1e3:10.1f}  {name}")
    rest = ranked[args.top:]
    if rest:
        t, n = sum(v[0] for _, v in rest), sum(v[1] for _, v in rest)
        print(f"{t / 1e6:9.2f} {100 * t / whole:5.1f}% {n:8d} {t / n / 1e3:10.1f}  ({len(rest)} other kernels)")
    launches = sum(n for _, n in totals.values())
    print(f"kernels: {whole / 1e6:.2f} ms of GPU time in {launches} launches of {len(totals)} kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())

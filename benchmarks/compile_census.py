"""Which kernels a run compiled, where, and for how long: a table from a BULKEM_COMPILE_LOG file.

Every process that imports bulkem with ``BULKEM_COMPILE_LOG=FILE`` set appends a JSON line to
FILE for each top-level compilation (``bulkem/kernels/cache.py``).  Run the test command's
parts with it, e.g.::

    rm -f /tmp/compiles.jsonl
    BULKEM_COMPILE_LOG=/tmp/compiles.jsonl NUMBA_OPT=1 \\
        python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile
    python benchmarks/compile_census.py /tmp/compiles.jsonl

It prints the seconds spent compiling per process and per model family (each kernel counted
at its first compilation: the union a cold run must pay), the kernels compiled more than once
(by several processes at once, or again after a lost cache entry), the most expensive
kernels, the kernels that one test file alone calls (from the logged calls: candidates to
share) and, for a pytest run, the compile seconds of each test file (with ``--durations
LOG``, a pytest log of ``--durations=0``, beside each file's test time: what is left is the
tests' own work).  Seconds are wall time of the compiling process, so they grow when
processes share the cores.
"""

from __future__ import annotations

import argparse
import collections
import json
import re

FAMILIES = ("mixture", "hmm", "tmap", "ssm", "kalman")


def family(key: str) -> str:
    for name in FAMILIES:
        if f"'{name}'" in key:
            return name
    return "other"


def short(key: str) -> str:
    """A kernel's key without its tuning (the long repr of compiled Tuning fields)."""
    return re.sub(r'"\[\(.cpu_tile_obs.*?\]"', "tuning", key)[:110]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", help="a BULKEM_COMPILE_LOG file")
    ap.add_argument("--top", type=int, default=15, help="the most expensive kernels to list")
    ap.add_argument("--min-single", type=float, default=5.0,
                    help="list kernels one test file alone calls from this many seconds")
    ap.add_argument("--durations", help="a pytest log of --durations=0 (per-file test time)")
    args = ap.parse_args()
    with open(args.log) as fh:
        lines = [json.loads(line) for line in fh if line.strip()]
    recs = [r for r in lines if "use" not in r]
    uses = [r for r in lines if "use" in r]
    first: dict = {}
    again = collections.defaultdict(list)
    for r in recs:
        k = (r["name"], r["key"])
        if k in first:
            again[k].append(r)
        else:
            first[k] = r
    total = sum(r["seconds"] for r in recs)
    print(f"{len(recs)} compilations, {total:.0f} s; {len(first)} kernels "
          f"({sum(r['seconds'] for r in first.values()):.0f} s at their first compilation)\n")

    print("| process | compilations | seconds |\n|---|---|---|")
    per = collections.defaultdict(lambda: [0, 0.0])
    for r in recs:
        per[r["pid"]][0] += 1
        per[r["pid"]][1] += r["seconds"]
    for pid, (n, s) in sorted(per.items(), key=lambda x: -x[1][1]):
        print(f"| {pid} | {n} | {s:.0f} |")

    print("\n| family | kernels | seconds (first compilation) |\n|---|---|---|")
    fam = collections.defaultdict(lambda: [0, 0.0])
    for (_, key), r in first.items():
        fam[family(key)][0] += 1
        fam[family(key)][1] += r["seconds"]
    for name, (n, s) in sorted(fam.items(), key=lambda x: -x[1][1]):
        print(f"| {name} | {n} | {s:.0f} |")

    print("\n| compiled again | times | seconds lost | processes | kernel |\n|---|---|---|---|---|")
    for k, rs in sorted(again.items(), key=lambda x: -sum(r["seconds"] for r in x[1])):
        pids = sorted({first[k]["pid"], *(r["pid"] for r in rs)})
        print(f"| {k[0][:30]} | {len(rs)} | {sum(r['seconds'] for r in rs):.1f} | {pids} | "
              f"{short(k[1])} |")

    print("\n| seconds | function | kernel |\n|---|---|---|")
    for (name, key), r in sorted(first.items(), key=lambda x: -x[1]["seconds"])[:args.top]:
        print(f"| {r['seconds']:.1f} | {name[:30]} | {short(key)} |")

    if uses:
        users = collections.defaultdict(set)
        for u in uses:
            users[(u["name"], u["use"])].add(u["test"].split("::")[0] or "(outside pytest: R)")
        print("\n| seconds | kernel | the only test file that calls it |\n|---|---|---|")
        for (name, key), r in sorted(first.items(), key=lambda x: -x[1]["seconds"]):
            files = users.get((name, key), set())
            if len(files) == 1 and r["seconds"] >= args.min_single:
                print(f"| {r['seconds']:.1f} | {name[:30]} {short(key)} | {next(iter(files))} |")

    by_file = collections.defaultdict(float)
    for r in recs:
        if r.get("test"):
            by_file[r["test"].split("::")[0]] += r["seconds"]
    if by_file:
        spent = durations(args.durations) if args.durations else {}
        print("\n| test file | compiling (s) | test time (s) | the rest (s) |\n|---|---|---|---|")
        for f in sorted(set(by_file) | set(spent), key=lambda f: -spent.get(f, by_file[f])):
            t = spent.get(f)
            rest = f"{t - by_file[f]:.0f}" if t is not None else ""
            print(f"| {f} | {by_file[f]:.0f} | {'' if t is None else f'{t:.0f}'} | {rest} |")


def durations(path: str) -> dict:
    """Seconds per test file from a pytest log of ``--durations=0`` (setup, call, teardown)."""
    out: dict = collections.defaultdict(float)
    with open(path) as fh:
        for line in fh:
            m = re.match(r"([\d.]+)s (?:call|setup|teardown)\s+(\S+)", line)
            if m:
                out[m.group(2).split("::")[0]] += float(m.group(1))
    return out


if __name__ == "__main__":
    main()

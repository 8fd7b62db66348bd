#!/usr/bin/env python3
"""One line per kernel launch, then the kernels by total time, from Nsight Compute's CSV details page.

    ncu -i REPORT.ncu-rep --csv --page details | scripts/ncu-table.py [--top N]

scripts/gpu-check.sh runs it on its `ncu` steps: each launch's duration, the SM's and memory's throughput against
their peaks, the DRAM's, achieved / theoretical occupancy, registers a thread, waves and the cycles a warp waits
per issued instruction, which a session without a GPU reads to choose its next kernel. Rows whose metrics are
missing (another Nsight Compute version's names) print as '-'; input that is not such a CSV is said in one line.
"""
import csv
import sys

# column of the table, then the metric names it may carry (Nsight Compute's section bodies)
COLUMNS = [
    ("us", ["Duration"]),
    ("sm%", ["Compute (SM) Throughput", "SM Throughput"]),
    ("mem%", ["Memory Throughput"]),
    ("dram%", ["DRAM Throughput"]),
    ("occ%", ["Achieved Occupancy"]),
    ("th.occ%", ["Theoretical Occupancy"]),
    ("regs", ["Registers Per Thread"]),
    ("waves", ["Waves Per SM"]),
    ("cyc/inst", ["Warp Cycles Per Issued Instruction"]),
]
TIME_UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6,
              "s": 1e6}


def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def short(name, width=56):
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    cut = name.find("(")
    if cut > 0:
        name = name[:cut]
    return name if len(name) <= width else name[:width - 1] + "~"


def main(argv):
    top = 25
    if len(argv) >= 3 and argv[1] == "--top":
        top = int(argv[2])
    lines = [ln for ln in sys.stdin.read().splitlines() if ln.startswith('"')]
    if not lines:
        print("ncu-table: no CSV rows on the input (was the report empty, or not exported with --csv?)")
        return 1
    rows = list(csv.DictReader(lines))
    need = ("ID", "Metric Name", "Metric Value")
    if not rows or any(k not in rows[0] for k in need):
        have = ", ".join(rows[0].keys()) if rows else "none"
        print("ncu-table: the CSV lacks the columns %s (has %s)" % (", ".join(need), have))
        return 1
    launches = {}
    for r in rows:
        k = launches.setdefault(r["ID"], {"name": r.get("Kernel Name") or r.get("Function Name") or "?",
                                          "grid": r.get("Grid Size", ""), "block": r.get("Block Size", ""), "m": {}})
        k["m"].setdefault(r["Metric Name"], (r.get("Metric Unit", ""), r["Metric Value"]))

    def value(k, names):
        """the first of names k has, a duration in microseconds"""
        for n in names:
            if n in k["m"]:
                unit, v = k["m"][n]
                x = number(v)
                return None if x is None else x * TIME_UNITS.get(unit.strip(), 1.0) if n == "Duration" else x
        return None

    head = "%4s  %-56s %-15s %-11s" % ("id", "kernel", "grid", "block") + "".join("%9s" % c for c, _ in COLUMNS)
    print(head)
    for kid in sorted(launches, key=lambda s: int(s) if s.isdigit() else 0):
        k = launches[kid]
        cells = []
        for _, names in COLUMNS:
            x = value(k, names)
            cells.append("%9s" % ("-" if x is None else ("%.1f" % x if x < 1e4 else "%.0f" % x)))
        grid, block = k["grid"].replace(" ", ""), k["block"].replace(" ", "")
        print("%4s  %-56s %-15s %-11s" % (kid, short(k["name"]), grid, block) + "".join(cells))
    total = {}
    for k in launches.values():
        t = value(k, COLUMNS[0][1]) or 0.0
        n, s = total.get(short(k["name"]), (0, 0.0))
        total[short(k["name"])] = (n + 1, s + t)
    whole = sum(s for _, s in total.values()) or 1.0
    print("kernels by total time (%d launches, %.1f us):" % (len(launches), whole))
    for name, (n, s) in sorted(total.items(), key=lambda e: -e[1][1])[:top]:
        print("  %-56s %5d x %10.1f us  %5.1f%%" % (name, n, s, 100.0 * s / whole))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

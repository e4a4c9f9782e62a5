# SPDX-License-Identifier: MIT
# preload-summary.py CSV ERRORS OUT LABELS RATIOS ROUNDS, for
# preload-compare.sh: the median of each measure and mode, the ratios of
# medians, as a markdown table (OUT/preload-compare.md, printed) and
# gnuplot data (OUT/preload-compare.dat). LABELS "mode:label ...", RATIOS
# "a/b ...". A failed run has the value "fail"; ERRORS says why.
import csv, statistics, sys

path, errs, out, labels, ratios, rounds = sys.argv[1:7]
label = dict(x.split(":", 1) for x in labels.split())
modes = list(label)
pairs = [r.split("/") for r in ratios.split()]
rows = list(csv.DictReader(open(path)))
names = list(dict.fromkeys(r["measure"] for r in rows))
why = {}
for line in open(errs):
    key, _, msg = line.rstrip("\n").partition(": ")
    n, m, _ = key.split(",")
    why.setdefault((n, m), msg)

head = ["measure"] + [f"{label[m]} (median)" for m in modes]
head += [f"{label[a]} / {label[b]}" for a, b in pairs]
md = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
dat, notes = [], {}
for n in names:
    med, cells = {}, [n]
    for m in modes:
        v = [r["value"] for r in rows if r["measure"] == n and r["mode"] == m]
        ok = [float(x) for x in v if x != "fail"]
        bad = len(v) - len(ok)
        med[m] = statistics.median(ok) if ok else None
        cell = f"{med[m]:.1f}" if ok else ("failed" if v else "")
        if bad and ok:
            cell += f" ({bad} of {len(v)} failed)"
        cells.append(cell)
        if bad:
            notes.setdefault((label[m], why.get((n, m), "failed")), []).append(n)
    rat = []
    for a, b in pairs:
        x = med.get(a) / med[b] if med.get(a) and med.get(b) else None
        cells.append(f"{x:.2f}" if x else "-")
        rat.append(f"{x:.3f}" if x else "NaN")
    md.append("| " + " | ".join(cells) + " |")
    if not n.startswith("idle"):
        dat.append(f"{n} " + " ".join(rat))
md.append("")
md.append(f"Medians of {rounds} rounds.")
# rxe packets per request (the VM's rdma modes): what the emulator charges
per = []
for m in modes:
    x = [int(r["rdma_pkts"]) / int(r["requests"]) for r in rows
         if r["mode"] == m and r["value"] != "fail" and r.get("requests") and r.get("rdma_pkts")]
    if x and statistics.median(x) >= 1:
        per.append(f"{label[m]} {statistics.median(x):.1f}")
if per:
    md.append("rxe0 packets per request (median over runs): " + ", ".join(per) + ".")
if notes:
    md += ["", "Failed runs:"]
    md += [f"- {m}, {', '.join(ns)}: {w}" for (m, w), ns in notes.items()]
open(out + "/preload-compare.md", "w").write("\n".join(md) + "\n")
open(out + "/preload-compare.dat", "w").write("\n".join(dat) + "\n")
print("\n".join(md))

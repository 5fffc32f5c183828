#!/usr/bin/env python3
"""The HTML reports of `llmsim report` and `llmsim search -o` in a real browser (headless Chromium).

For each report: Chromium opens it with console logging on (any console message fails the test:
the page has no script, so a message is an error, such as a blocked network load); takes a
screenshot whose chart colours must cover real areas; and opens it inside harness.html, which
writes what the browser laid out. Then:
- every chart is a non-empty box with drawn shapes;
- every number shown equals the JSON output of the same job (`llmsim perf --format json`, or the
  search's own --format json) printed with the page's stated decimals and scale;
- every bar or segment is as long as its value on the chart's common scale (within half a pixel);
- the timeline has every pass of the Chrome trace `llmsim perf --trace` writes, placed linearly in
  time; the scatter's points lie on linear axes; its grid counts plus its circles are every fitting
  candidate.

Usage: report_in_browser.py --cli LLMSIM --source-dir DIR --work-dir DIR
Exit status: 0 pass, 1 fail, 77 skip (no chromium).
"""

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys

SKIP = 77
failures = []
missing_pil = []  # screenshots taken but not read (no PIL)


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browser(binary, *args):
    """Runs headless Chromium; returns (stdout, the console lines of its log)."""
    run = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          "--enable-logging=stderr", "--v=0", *args],
                         capture_output=True, text=True, timeout=120)
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    return run.stdout, console


def run_cli(cli, *args, expect=0):
    run = subprocess.run([cli, *args], capture_output=True, text=True, timeout=600)
    check(run.returncode == expect, f"llmsim {' '.join(args)}: exit {run.returncode}, expected {expect}: "
          f"{run.stderr.strip()}")
    return run.stdout


def at_path(doc, path):
    """The member at a dotted path of the page's convention (list indices as numbers)."""
    value = doc
    for key in path.split("."):
        if isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return None
    return value


def laid_out(binary, work_dir, report):
    """What harness.html reads from the report as the browser laid it out."""
    dom, console = browser(binary, "--allow-file-access-from-files", "--window-size=1280,4200", "--dump-dom",
                           "file://" + os.path.join(work_dir, "harness.html") + "?report=" + report)
    check(not console, f"{report} in the harness: console messages: {console}")
    match = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    if not check(match is not None, f"{report}: the harness wrote no result"):
        return None
    result = json.loads(html.unescape(match.group(1)))
    if not check("error" not in result, f"{report}: the harness failed: {result.get('error')}"):
        return None
    return result


def screenshot_colours(binary, work_dir, report):
    """Pixels of the chart palette in a screenshot of the page, by colour."""
    png = os.path.join(work_dir, report + ".png")
    _, console = browser(binary, "--window-size=1280,4200", "--screenshot=" + png,
                         "file://" + os.path.join(work_dir, report))
    check(not console, f"{report}: console messages (errors, blocked loads): {console}")
    if not check(os.path.exists(png), f"{report}: no screenshot"):
        return {}
    try:
        from PIL import Image  # Debian python3-pil
    except ImportError:
        missing_pil.append(report)
        return {}
    image = Image.open(png).convert("RGB")
    colours = {"#4e79a7": (78, 121, 167), "#f28e2b": (242, 142, 43), "#59a14f": (89, 161, 79)}
    counts = dict.fromkeys(colours, 0)
    for n, rgb in image.getcolors(maxcolors=1 << 24):
        for name, want in colours.items():
            if rgb == want:
                counts[name] += n
    return counts


def check_charts(layout, report, expected_ids):
    ids = [c["id"] for c in layout["charts"]]
    check(ids == expected_ids, f"{report}: charts {ids}, expected {expected_ids}")
    for c in layout["charts"]:
        check(c["width"] > 100 and c["height"] > 50 and c["drawn"] >= 3,
              f"{report}: chart {c['id']} is empty: {c}")


def check_fields(layout, doc, report, skip=()):
    """Every number shown is the document's value, printed as the page says it prints it."""
    check(len(layout["fields"]) >= 30, f"{report}: only {len(layout['fields'])} numbers found")
    for f in layout["fields"]:
        if f["field"] in skip:
            continue
        value = at_path(doc, f["field"])
        if not check(isinstance(value, (int, float)) and not isinstance(value, bool),
                     f"{report}: shows {f['field']} = {f['text']!r}, the JSON has {value!r}"):
            continue
        want = "%.*f" % (f["decimals"], value * float(f["scale"]))
        check(f["text"] == want, f"{report}: {f['field']} shown as {f['text']!r}, the JSON gives {want!r}")


def check_shown(layout, report, prefix, doc):
    """The figures a reader looks for are on the page, under their own names."""
    shown = {f["field"] for f in layout["fields"]}
    wanted = [prefix + "cost_result." + k for k in ("duration_time_per_iter", "mfu", "throughput_per_accelerator")]
    wanted += [prefix + "mem_result." + k for k in ("peak_mem", "peak_mem_with_reserved", "device_mem")]
    wanted += [prefix + "cost_result.breakdown_result." + k for k in at_path(doc, prefix + "cost_result.breakdown_result")]
    for stage, mem in at_path(doc, prefix + "mem_result").items():
        if isinstance(mem, dict):
            wanted += [f"{prefix}mem_result.{stage}.{k}" for k in ("weight_mem", "grad_mem", "optimizer_state_mem",
                                                                   "model_mem", "peak_mem", "peak_mem_with_reserved")]
    missing = [w for w in wanted if w not in shown]
    check(not missing, f"{report}: figures not shown: {missing}")


def mark_value(doc, mark):
    if mark["field"]:
        return at_path(doc, mark["field"])
    first, second = mark["fields"].split("-")
    return at_path(doc, first) - at_path(doc, second)


def check_marks(layout, doc, report):
    """Bars of a chart share one scale: extent = value x pixels-per-unit, within half a pixel."""
    for chart in sorted({m["chart"] for m in layout["marks"]}):
        marks = [m for m in layout["marks"] if m["chart"] == chart]
        extent = [m["width"] if m["axis"] == "x" else m["height"] for m in marks]
        values = [mark_value(doc, m) for m in marks]
        big = max(range(len(marks)), key=lambda i: values[i])
        scale = extent[big] / values[big]
        check(len(marks) >= 3, f"{report}: chart {chart} has {len(marks)} marks")
        for m, e, v in zip(marks, extent, values):
            check(abs(e - v * scale) <= 0.5,
                  f"{report}: {chart} mark {m['field'] or m['fields']} is {e:.2f} px for {v}, expected "
                  f"{v * scale:.2f}")


def check_columns(layout, doc, report, prefix):
    """Each stage's memory column adds up to its peak with the allocator reserve."""
    marks = [m for m in layout["marks"] if m["chart"] == "memory"]
    if not check(marks, f"{report}: no memory column"):
        return
    top = max(marks, key=lambda m: mark_value(doc, m))
    scale = top["height"] / mark_value(doc, top)
    for stage, mem in at_path(doc, prefix + "mem_result").items():
        if not isinstance(mem, dict):
            continue
        own = [m for m in marks if (m["field"] or m["fields"]).startswith(f"{prefix}mem_result.{stage}.")]
        height = sum(m["height"] for m in own)
        check(abs(height - mem["peak_mem_with_reserved"] * scale) <= 0.5 * len(own),
              f"{report}: {stage}'s column is {height:.2f} px, its peak with reserve "
              f"{mem['peak_mem_with_reserved'] * scale:.2f}")


def check_timeline(layout, trace, report):
    """The passes of the Chrome trace (tid 0 of every rank), each drawn where its time puts it."""
    passes = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("tid") == 0]
    drawn = [s for s in layout["spans"] if s["start"] >= 0 and s["name"] in
             ("forward", "backward", "backward input", "backward weight")]
    check(len(drawn) == len(passes), f"{report}: timeline draws {len(drawn)} passes, the trace has {len(passes)}")
    by_key = {(e["pid"], round(e["ts"] / 1e3, 3)): e for e in passes}
    first = min(drawn, key=lambda s: s["start"])
    last = max(drawn, key=lambda s: s["end"])
    px_per_ms = (last["left"] + last["width"] - first["left"]) / (last["end"] - first["start"])
    for s in drawn:
        check((s["rank"], round(s["start"], 3)) in by_key, f"{report}: span {s} is not in the trace")
        check(abs(s["left"] - (first["left"] + (s["start"] - first["start"]) * px_per_ms)) <= 0.5,
              f"{report}: span {s} is not where its start time puts it")
        check(abs(s["width"] - (s["end"] - s["start"]) * px_per_ms) <= 0.5, f"{report}: span {s} has the wrong width")


def check_scatter(layout, doc, report):
    points = layout["points"]
    check(any(p["cls"] == "winner" for p in points), f"{report}: no winner marked")
    check(len([p for p in points if p["cls"] == "pareto"]) == len(doc.get("pareto", [])),
          f"{report}: the Pareto front has {len(doc.get('pareto', []))} members, the chart marks a different count")
    xs = [(at_path(doc, p["x_field"]), p["x"]) for p in points]
    ys = [(at_path(doc, p["y_field"]), p["y"]) for p in points]
    for name, pairs in (("time", xs), ("memory", ys)):
        lo, hi = min(pairs), max(pairs)
        if hi[0] == lo[0]:
            continue
        slope = (hi[1] - lo[1]) / (hi[0] - lo[0])
        for v, px in pairs:
            check(abs(px - (lo[1] + (v - lo[0]) * slope)) <= 0.5, f"{report}: {name} {v} drawn at {px}, off its axis")
    drawn = sum(layout["cells"]) + layout["circles"]
    check(drawn == doc["fitting"], f"{report}: the scatter shows {drawn} candidates, {doc['fitting']} fit")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--work-dir", required=True)
    a = parser.parse_args()
    binary = chromium()
    if binary is None:
        print("SKIP: no chromium (Debian package chromium) to open the reports in")
        return SKIP
    os.makedirs(a.work_dir, exist_ok=True)
    shutil.copy(os.path.join(a.source_dir, "tests", "browser", "harness.html"), a.work_dir)
    os.chdir(a.source_dir)

    # A perf report: Llama 3 70B on the shipped H100 file, tp 4 x pp 4 x dp 4 (3 stage kinds).
    job = ["--system", "configs/system/h100_sxm.json", "--strategy", "configs/strategy/tp4_pp4_dp4_mbs1.json",
           "--model", "configs/models/llama3-70b.json"]
    perf_html = os.path.join(a.work_dir, "perf.html")
    trace_file = os.path.join(a.work_dir, "perf_trace.json")
    run_cli(a.cli, "report", *job, "-o", perf_html)
    doc = json.loads(run_cli(a.cli, "perf", *job, "--format", "json", "--trace", trace_file))
    with open(trace_file) as f:
        trace = json.load(f)
    layout = laid_out(binary, a.work_dir, "perf.html")
    if layout:
        check_charts(layout, "perf.html", ["breakdown-chart", "memory-chart", "timeline-chart"])
        check_fields(layout, doc, "perf.html")
        check_shown(layout, "perf.html", "", doc)
        check_marks(layout, doc, "perf.html")
        check_columns(layout, doc, "perf.html", "")
        check_timeline(layout, trace, "perf.html")
    colours = screenshot_colours(binary, a.work_dir, "perf.html")
    for name, n in colours.items():
        check(n >= 2000, f"perf.html: the screenshot has {n} pixels of {name}, the charts' colour")

    # A search report, from the same run as its JSON (the search's timing is part of both).
    search_html = os.path.join(a.work_dir, "search.html")
    doc = json.loads(run_cli(a.cli, "search", "--model", "llama3-8b", "--system", "h100-sxm", "--gpus", "8",
                             "--global-batch", "32", "--seq", "4096", "--pareto", "--format", "json", "-o",
                             search_html))
    layout = laid_out(binary, a.work_dir, "search.html")
    if layout:
        check_charts(layout, "search.html",
                     ["scatter-chart", "breakdown-chart", "memory-chart", "timeline-chart"])
        check_fields(layout, doc, "search.html")
        check_shown(layout, "search.html", "winner.", doc)
        shown = {f["field"] for f in layout["fields"]}
        for i in range(len(doc["top"])):
            check(f"top.{i}.step_time" in shown and f"top.{i}.peak_mem_gib" in shown,
                  f"search.html: row {i + 1} of the ranking is not shown")
        check_marks(layout, doc, "search.html")
        check_columns(layout, doc, "search.html", "winner.")
        check_scatter(layout, doc, "search.html")
    screenshot_colours(binary, a.work_dir, "search.html")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failure(s)")
    if failures:
        return 1
    if missing_pil:
        print(f"SKIP: screenshots of {missing_pil} not checked: no PIL (Debian python3-pil); the rest passed")
        return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Seed corpus and dictionary for tests/fuzz/fuzz_estimate.cpp.

usage: fuzz_seeds.py SEED_DIR DICT_FILE

A seed is three documents separated by a line "---": model, strategy, system. Documents come from
configs/ and, when present, ../shared/reference/simumax/configs (every model with two strategies
and two systems, every strategy and every system once), plus catalogue names, plus the bad-input
corpus (each file in the slot of its kind). The dictionary holds every JSON key and string value
those files use, so mutations write real field names.
"""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
seed_dir, dict_file = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
seed_dir.mkdir(parents=True, exist_ok=True)


def files(*dirs):
    out = []
    for d in dirs:
        if d.is_dir():
            out += sorted(p for p in d.glob("*.json"))
    return out


shared = root.parent / "shared" / "reference" / "simumax" / "configs"
models = files(root / "configs" / "models", shared / "models")
strategies = files(root / "configs" / "strategy", shared / "strategy")
systems = files(root / "configs" / "system", shared / "system")
text = {p: p.read_text(errors="replace") for p in models + strategies + systems}
names = {"model": ["llama3-8b", "deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b", "nemotron-3-nano-30b-a3b"],
         "strategy": ["tp2_pp1_dp4", "tp8_pp4_dp2_mbc16", "pp4_dp8_ep8_mbc16_full", "tp2_pp2_dp2_vp2_mbc8"],
         "system": ["h100-sxm", "b200", "h200", "a100-pcie"]}
seeds = []
for i, m in enumerate(models):
    for k in range(2):
        s = strategies[(i + k) % len(strategies)] if strategies else None
        y = systems[(i + k) % len(systems)] if systems else None
        if s and y:
            seeds.append((text[m], text[s], text[y]))
for i, s in enumerate(strategies):
    seeds.append((names["model"][i % 5], text[s], names["system"][i % 4]))
for i, y in enumerate(systems):
    seeds.append((names["model"][i % 5], names["strategy"][i % 4], text[y]))
for m in names["model"]:
    for s in names["strategy"]:
        seeds.append((m, s, "h100-sxm"))

bad = root / "tests" / "bad_input"
manifest = json.loads((bad / "cases.json").read_text())
for case in manifest:
    body = (bad / case["file"]).read_bytes().decode("utf-8", errors="replace")
    slot = {"model": 0, "strategy": 1, "system": 2}.get(case["kind"])
    if slot is None:
        continue
    doc = ["llama3-8b", "tp2_pp1_dp4", "h100-sxm"]
    doc[slot] = body
    seeds.append(tuple(doc))

for n, (m, s, y) in enumerate(seeds):
    (seed_dir / f"seed-{n:04d}").write_text(f"{m}\n---\n{s}\n---\n{y}", encoding="utf-8")

tokens = set()


def walk(v):
    if isinstance(v, dict):
        for k, x in v.items():
            tokens.add(k)
            walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
    elif isinstance(v, str) and len(v) < 64:
        tokens.add(v)


for p in text:
    try:
        walk(json.loads(text[p]))
    except ValueError:
        pass
for kind in names.values():
    tokens.update(kind)
with dict_file.open("w") as f:
    for t in sorted(tokens):
        f.write(json.dumps(json.dumps(t)) + "\n")  # "\"tp_size\"": the key with its quotes
print(f"{len(seeds)} seeds in {seed_dir}, {len(tokens)} dictionary entries in {dict_file}")

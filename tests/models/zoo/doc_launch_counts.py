"""The launch counts in docs/dynamic_shapes.md's dynamic-zoo table, held to
the plans' own: each passing row says `pass (N ...)`, N being the shape-generic
launches `kiln inspect` reports for the plan run_zoo_dynamic.py compiled.
run_zoo_dynamic.py --doc DOC fails when a row's N is not the plan's (a count
written by hand goes stale as soon as a pass changes the plan);
--doc DOC --update-doc writes the plans' counts into the rows instead (and
the worst ratios of that run, which are not checked).
"""
import re

# | model | exporter | precision | result | ...
ROW = re.compile(r"^\| (\w+) \| (torchscript|dynamo) \| (fp32|fp16) \| (pass|refused)\b")
COUNT = re.compile(r"^pass \((\d+)")


def row_key(line):
    """(zoo folder, precision) of a table row, or None for another line."""
    m = ROW.match(line)
    if not m:
        return None
    model, exporter, precision = m.group(1), m.group(2), m.group(3)
    return (model + ("_dynamo" if exporter == "dynamo" else ""), precision)


def result_cell(line):
    return line.split("|")[4].strip()


def row_count(line):
    m = COUNT.match(result_cell(line))
    return int(m.group(1)) if m else None


def with_count(line, n):
    """The row with its result cell saying `pass (n ...)`; a note already in
    the parentheses without a count is kept after it."""
    cells = line.split("|")
    cell = cells[4].strip()
    if COUNT.match(cell):
        cell = COUNT.sub(f"pass ({n}", cell, count=1)
    elif cell.startswith("pass ("):
        cell = f"pass ({n}; " + cell[len("pass ("):]
    else:
        cell = f"pass ({n})"
    cells[4] = f" {cell} "
    return "|".join(cells)


RATIO = re.compile(r"^\d+\.\d+(?= of )")


def with_ratio(line, ratio):
    """The row with its worst-ratio cell's number set to `ratio` (not
    checked: a ratio moves with any rounding change, a count is the plan)."""
    cells = line.split("|")
    cells[5] = " " + RATIO.sub(f"{ratio:.3f}", cells[5].strip(), count=1) + " "
    return "|".join(cells)


def check(doc_path, precision, results):
    """Problems, one line each, where a passing model's row (at `precision`)
    misses or misstates its plan's shape-generic launches."""
    rows = {}
    with open(doc_path) as f:
        for line in f:
            key = row_key(line)
            if key:
                rows[key] = line
    problems = []
    for model, r in sorted(results.items()):
        if not r.get("passed"):
            continue
        want = r.get("shape_generic_launches")
        line = rows.get((model, precision))
        if line is None:
            problems.append(f"{doc_path}: no row for {model} at {precision} in the dynamic-zoo table")
            continue
        have = row_count(line)
        if have != want:
            said = f"{have} launches" if have is not None else "no launch count"
            problems.append(f"{doc_path}: the {model} {precision} row says {said}, the plan has {want} launches "
                            f"(run_zoo_dynamic.py --doc {doc_path} --update-doc rewrites the counts)")
    return problems


def update(doc_path, precision, results):
    """Writes the passing models' counts (and worst ratios) into their rows;
    returns the models updated."""
    with open(doc_path) as f:
        lines = f.readlines()
    changed = []
    for i, line in enumerate(lines):
        key = row_key(line)
        if not key or key[1] != precision or key[0] not in results:
            continue
        r = results[key[0]]
        if not r.get("passed") or r.get("shape_generic_launches") is None:
            continue
        new = with_count(line, r["shape_generic_launches"])
        if r.get("tol_ratio") is not None:
            new = with_ratio(new, r["tol_ratio"])
        if new != line:
            lines[i] = new
            changed.append(key[0])
    with open(doc_path, "w") as f:
        f.writelines(lines)
    return changed


def main():
    """doc_launch_counts.py DOC JSON... [--update]: the same check (or update)
    from run_zoo_dynamic.py's --json files, without compiling again."""
    import argparse
    import json
    import sys

    ap = argparse.ArgumentParser()
    ap.add_argument("doc")
    ap.add_argument("json", nargs="+", help="run_zoo_dynamic.py --json outputs")
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    problems = []
    for path in a.json:
        with open(path) as f:
            run = json.load(f)
        if a.update:
            for m in update(a.doc, run["precision"], run["results"]):
                print(f"{a.doc}: {m} [{run['precision']}]: {run['results'][m]['shape_generic_launches']} launches")
        else:
            problems += check(a.doc, run["precision"], run["results"])
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

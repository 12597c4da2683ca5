#!/usr/bin/env python3
"""Checks kiln's Graphviz output (dump-ir --format dot) for issue 16:

- no edge statement inside a `subgraph cluster_*` block (an edge there makes
  Graphviz adopt its outside endpoint into the cluster);
- the nodes Graphviz itself puts in each cluster (dot -Tjson0) are exactly the
  nodes declared inside that cluster's braces: a fused group's members and its
  anchor; graph inputs/outputs (ellipses) and unfused nodes are in no cluster;
- every label is at most MAX_LABEL characters and every node and cluster has a
  tooltip.
The parts a deep picture is cut into (`cluster_part*`, ir/dot_parts.h) hold
whole items and are no fused clusters: being inside one is not being fused.
Usage: check_dot.py FILE.dot [--clusters] [NOT_IN_CLUSTER_OP ...]
  --clusters: the picture must have fused clusters (dump-ir --fused-bodies).
  NOT_IN_CLUSTER_OP: ops (first label line) that must be in no fused cluster.
"""
import json
import re
import subprocess
import sys

MAX_LABEL = 200

path = sys.argv[1]
want_clusters = '--clusters' in sys.argv[2:]
unfused_ops = set(a for a in sys.argv[2:] if a != '--clusters')
text = open(path).read()
errors = []

# Walk the statements line by line (kiln writes one statement per line),
# keeping a stack of the open cluster blocks.
stack = []  # cluster names
declared = {}  # node id -> the open clusters, outermost first
attrs = {}  # node id -> attribute text
cluster_attrs = {}  # cluster name -> its graph attribute text
node_re = re.compile(r'^\s*(\w+)\s*\[(.*)\];\s*$')
for ln, line in enumerate(text.splitlines(), 1):
    s = line.strip()
    m = re.match(r'subgraph\s+(cluster_\w+)\s*\{', s)
    if m:
        stack.append(m.group(1))
        cluster_attrs[m.group(1)] = ''
        continue
    if s == '}':
        if stack:
            stack.pop()
        continue
    if '->' in s:
        if stack:
            errors.append(f'line {ln}: edge inside {stack[-1]}: {s}')
        continue
    m = node_re.match(s)
    if m and m.group(1) not in ('node', 'edge', 'graph'):
        declared[m.group(1)] = tuple(stack)
        attrs[m.group(1)] = m.group(2)
    elif stack and s:
        cluster_attrs[stack[-1]] += s

def label_of(a):
    m = re.search(r'(?<![\w])label="((?:[^"\\]|\\.)*)"', a)
    return m.group(1) if m else ''

for nid, a in attrs.items():
    lab = label_of(a)
    if len(lab) > MAX_LABEL:
        errors.append(f'{nid}: label {len(lab)} chars > {MAX_LABEL}: {lab[:120]}...')
    if 'tooltip=' not in a:
        errors.append(f'{nid}: no tooltip')
    op = lab.split('\\n')[0]
    fused_clusters = [c for c in declared[nid] if not c.startswith('cluster_part')]
    if fused_clusters and ('shape=ellipse' in a or op in unfused_ops):
        errors.append(f'{nid} ({op}) is declared inside {fused_clusters[-1]} but is no fused member')
for c, a in cluster_attrs.items():
    lab = label_of(a)
    if len(lab) > MAX_LABEL:
        errors.append(f'{c}: label {len(lab)} chars > {MAX_LABEL}: {lab[:120]}...')
    if 'tooltip=' not in a:
        errors.append(f'{c}: no tooltip')
if want_clusters and not [c for c in cluster_attrs if not c.startswith('cluster_part')]:
    errors.append('no fused clusters at all')

# What Graphviz actually makes of it.
js = json.loads(subprocess.run(['dot', '-Tjson0', path], check=True, capture_output=True, text=True).stdout)
objs = js.get('objects', [])
nodes_by_gvid = {o['_gvid']: o['name'] for o in objs if 'nodes' not in o and 'subgraphs' not in o
                 and not o['name'].startswith('cluster')}
for o in objs:
    if not o['name'].startswith('cluster_'):
        continue
    got = {nodes_by_gvid.get(i, f'#{i}') for i in o.get('nodes', [])}
    want = {n for n, cs in declared.items() if o['name'] in cs}  # nested ones too
    extra = got - want
    if extra:
        labs = [label_of(attrs.get(n, '')).split('\\n')[0] or n for n in sorted(extra)]
        errors.append(f'Graphviz puts {sorted(extra)} {labs} into {o["name"]}, declared elsewhere')
    if want - got:
        errors.append(f'{o["name"]}: declared {sorted(want - got)} missing in Graphviz')

if errors:
    print('\n'.join(f'FAIL: {e}' for e in errors[:40]))
    if len(errors) > 40:
        print(f'... {len(errors) - 40} more')
    sys.exit(1)
print(f'PASS ({len(cluster_attrs)} clusters, {len(attrs)} nodes)')

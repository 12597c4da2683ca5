#!/usr/bin/env python3
"""What issue 18's wave target costs (docs/performance.md, "the wave target examined"): an experiment,
not product code. Writes a tuning cache (docs/tuning.md) that forces every tensor-core GEMM/conv problem
of a plan onto the configuration that a replica of the performance model's first-order terms puts
cheapest among those whose grid fills one wave of resident blocks (blocks >= 132 SMs x blocks per SM,
registers estimated with a margin over ptxas's usual count). Every block of such a grid does work; the
replica only picks the configurations, the real model judges them. A split is costed both ways the
tile chooser can sum it (codegen/emitters/gemm_conv/gemm_tiles.cpp): a reduction kernel (its own
time and one more graph node) or folded into the GEMM (the last block of each tile sums the partial
tiles: a tail through as many SMs as there are tiles, no extra node); the cheaper is written
("fold_split": true for the fold):

  bench/wave_fill_experiment.py PLAN OUT.json KILN_VERSION     # problems read from PLAN's kernel sources
  kiln compile MODEL.onnx --target sm_90 --precision fp16 --tuning-cache OUT.json -o forced.plan
  kiln inspect forced.plan --perf                              # the wave count and the estimate
"""
import json, math, re, subprocess, sys
plan, out, ver = sys.argv[1:4]
src = subprocess.run(["strings", "-n", "20", plan], capture_output=True, text=True).stdout
probs = set(re.findall(r"// [^ ]*: batch (\d+) x \[(\d+) x (\d+)\] = \[\d+ x (\d+)\] \[\d+ x \d+\] on tensor cores \((\w+)\)", src))
SMS, LAT, BW, SMF = 132, 0.5, 3350e3 * 0.9, 989.4e6 * 0.6 / 132
def occ(threads, smem, regs):
    warps = math.ceil(threads / 32); b = min(32, 64 // warps)
    pw = math.ceil(regs * 32 / 256) * 256; b = min(b, ((65536 // 4 // pw) * 4) // warps)
    return min(b, (228 * 1024) // (smem + 1024))
def est(M, N, K, bm, bn, wm, wn, split, st, fold):
    kta = math.ceil(K / 32); kt = math.ceil(kta / split); S = math.ceil(kta / kt)
    blocks = math.ceil(M / bm) * math.ceil(N / bn) * S
    MI, NI = bm // wm // 16, bn // wn // 8
    regs = 64 + MI * NI * 4 + 8  # a margin over ptxas's usual count (93-99 for 64x64 w2x2)
    smem = max(st * (bm * 40 + bn * 40) * 2, bm * (bn + 4) * 4)
    b = occ(32 * wm * wn, smem, regs); wave = SMS * b
    fill = min(blocks, SMS) / SMS; busiest = math.ceil(blocks / SMS)
    comp = busiest * 2 * bm * bn * 32 * kt / (SMF * min(1, min(busiest, b) * wm * wn / 4))
    lat = math.ceil(blocks / wave) * (kt * LAT / max(1, st - 1) + 2 * LAT)
    ws = S * M * N * 4 if S > 1 else 0
    mem = (M * K * 2 / 4 + K * N * 2 + (ws if S > 1 else M * N * 2)) / BW / fill
    t = max(comp, lat, mem)
    tiles = math.ceil(M / bm) * math.ceil(N / bn)
    if S > 1 and fold: t += max(2 * LAT, (ws + M * N * 2) / BW / min(1, tiles / SMS))  # the fold's tail
    elif S > 1: t += max(2 * LAT, (ws + M * N * 2) / BW / min(1, M * N / 256 / SMS)) + 1  # kernel + node
    return t, blocks >= wave * 1.1, S
entries = []
for b, M, N, K, math_ in sorted(probs):
    M, N, K = int(M), int(N), int(K)
    best = None
    for bm in (16, 32, 64, 128):
        for bn in (32, 64, 128):
            wn = bn // min(bn, 32); wm = min(bm // min(bm, 32), 8 // wn)
            if bm // wm not in (16, 32, 48, 64): continue
            kta = math.ceil(K / 32)
            for split in range(1, min(64, kta) + 1):
                kt = math.ceil(kta / split)
                if math.ceil(kta / kt) != split: continue
                for st in (2, 3, 4):
                    for fold in ((False, True) if split > 1 else (False,)):
                        t, fills, S = est(M, N, K, bm, bn, wm, wn, split, st, fold)
                        if fills and (best is None or t < best[0]):
                            best = (t, dict(bm=bm, bn=bn, bk=32, warps_m=wm, warps_n=wn, stages=st, split_k=split))
                            if fold: best[1]["fold_split"] = True
    if best is None:
        print(f"{M}x{N}x{K}: no wave-filling configuration", file=sys.stderr); continue
    cfg = best[1]
    if cfg["split_k"] == 1: del cfg["split_k"]
    entries.append({"gpu": "wave experiment", "cc": "9.0", "kiln": ver, "op": "gemm",
                    "problem": f"{math_}:b{b}:m{M}:n{N}:k{K}", "config": cfg})
    print(f"{M}x{N}x{K}: {cfg} est {best[0]:.2f} us", file=sys.stderr)
json.dump({"kiln_tuning_cache": 1, "entries": entries}, open(out, "w"), indent=1)

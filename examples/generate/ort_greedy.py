#!/usr/bin/env python3
"""The reference for examples/generate: the same greedy loop on ONNX Runtime
(CPU, graph optimisations off), on the same ONNX file: a prefill of the
prompt with an empty past, then one decode step per token, each step's
present cache fed back as the next past. Prints "tokens: ..." as generate
does.

Usage: ort_greedy.py MODEL.onnx --prompt 1,2,3 --tokens N   (needs numpy, onnxruntime)
"""
import argparse

import numpy as np
import onnxruntime as ort


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--prompt", required=True)
    p.add_argument("--tokens", type=int, required=True)
    a = p.parse_args()
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(a.model, opts, providers=["CPUExecutionProvider"])
    past = {}
    for i in sess.get_inputs():
        if i.name.startswith("past_"):
            kv_heads, head_dim = i.shape[1], i.shape[3]
            past[i.name] = np.zeros((1, kv_heads, 0, head_dim), np.float32)
    seq = [int(t) for t in a.prompt.split(",")]
    ids = list(seq)
    out_names = [o.name for o in sess.get_outputs()]
    for _ in range(a.tokens):
        outs = dict(zip(out_names, sess.run(None, {"input_ids": np.array([ids], np.int64), **past})))
        nxt = int(np.argmax(outs["logits"][0, -1]))
        seq.append(nxt)
        ids = [nxt]
        past = {n: outs[n.replace("past_", "present_")] for n in past}
    print("tokens:", " ".join(str(t) for t in seq))


if __name__ == "__main__":
    main()

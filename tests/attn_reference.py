#!/usr/bin/env python3
"""attn_reference.py - `clformer attention`'s first-layer heatmaps of a
pre-norm GPT (the tiny test model: learned positions, LayerNorm, a char
tokenizer) against the weights computed here in float64 from the
checkpoint alone.

  attn_reference.py CKPT.safetensors FILE.svg TEXT

Layer 0's attention reads x = wte[ids] + wpe[positions] through ln1 and the
qkv projection; each head's weights are softmax(q k^T / sqrt(HS)) over the
keys up to the query. Every drawn cell must equal the reference within
2e-6 (float32 rounding of a 32-wide model), every undrawn one be under
1/512 (the heatmap leaves those white). Prints "ok" or what differs.
Pure Python (no numpy): the model is small.
"""
import json
import math
import re
import struct
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    md = h.pop("__metadata__")
    t = {}
    for k, v in h.items():
        assert v["dtype"] == "F32", k
        s, e = v["data_offsets"]
        vals = struct.unpack(f"<{(e - s) // 4}f", b[8 + n + s:8 + n + e])
        t[k] = (vals, v["shape"])
    return t, md


def matrix(t, name):
    vals, shape = t[name]
    if len(shape) == 1:
        return list(vals)
    r, c = shape
    return [list(vals[i * c:(i + 1) * c]) for i in range(r)]


def main():
    ckpt, svg, text = sys.argv[1], sys.argv[2], sys.argv[3]
    t, md = load(ckpt)
    cfg = md["config"]
    heads = int(re.search(r"\n\s+heads: (\d+)", cfg).group(1))
    eps = float(re.search(r"\n\s+eps: ([0-9.e+-]+)", cfg).group(1))
    vocab = json.loads(md["tokenizer"])["vocab"]
    ids = [vocab.index(c) for c in text]
    wte, wpe = matrix(t, "wte"), matrix(t, "wpe")
    g, bb = matrix(t, "blocks.0.ln1.weight"), matrix(t, "blocks.0.ln1.bias")
    W, bq = matrix(t, "blocks.0.attn.qkv.weight"), matrix(t, "blocks.0.attn.qkv.bias")
    C = len(g)
    HS = C // heads
    T = len(ids)
    qkv = []
    for p, i in enumerate(ids):
        x = [wte[i][c] + wpe[p][c] for c in range(C)]
        mu = sum(x) / C
        var = sum((v - mu) ** 2 for v in x) / C
        h = [(x[c] - mu) / math.sqrt(var + eps) * g[c] + bb[c] for c in range(C)]
        qkv.append([sum(W[r][c] * h[c] for c in range(C)) + bq[r] for r in range(3 * C)])
    ref = []
    for hd in range(heads):
        rows = []
        for tq in range(T):
            q = qkv[tq][hd * HS:(hd + 1) * HS]
            s = [sum(q[d] * qkv[k][C + hd * HS + d] for d in range(HS)) / math.sqrt(HS)
                 for k in range(tq + 1)]
            m = max(s)
            e = [math.exp(v - m) for v in s]
            z = sum(e)
            rows.append([v / z for v in e] + [0.0] * (T - tq - 1))
        ref.append(rows)
    root = ET.parse(svg).getroot()
    maps = [g for g in root.iter(NS + "g") if g.get("class") == "heatmap"]
    if len(maps) != heads:
        print(f"attn_reference: {len(maps)} panels for {heads} heads")
        return 1
    worst = 0.0
    for hd, g in enumerate(maps):
        drawn = {}
        for r in g.iter(NS + "rect"):
            if r.get("data-w") is not None:
                drawn[(int(r.get("data-row")), int(r.get("data-col")))] = float(r.get("data-w"))
        for tq in range(T):
            for k in range(T):
                want = ref[hd][tq][k]
                got = drawn.get((tq, k))
                if got is None:
                    if want >= 1 / 512:
                        print(f"attn_reference: head {hd} ({tq}, {k}) not drawn, reference {want:.6g}")
                        return 1
                    continue
                worst = max(worst, abs(got - want))
                if abs(got - want) > 2e-6:
                    print(f"attn_reference: head {hd} ({tq}, {k}) drawn {got:.9g}, reference {want:.9g}")
                    return 1
    print(f"ok (worst difference {worst:.2e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

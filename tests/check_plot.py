#!/usr/bin/env python3
"""check_plot.py - a run's metrics.jsonl and `clformer plot`'s SVG of it.

  check_plot.py metrics RUN/metrics.jsonl STEPS_A STEPS_B
      the records of a run trained to STEPS_A and resumed to STEPS_B: a start
      record (step 0, device, config), a resume record at STEPS_A, each log
      record with step, loss, lr, tokens/s, step time and a gradient norm,
      evaluations with val_loss, an end record per session naming the
      checkpoint's step, and every line valid JSON
  check_plot.py svg FILE.svg RUN/metrics.jsonl
      the SVG is well-formed XML; its loss panel's series hold exactly the
      logged (step, loss) and (step, val_loss) pairs, its learning-rate and
      tokens/s panels the logged values; each plotted point sits where the
      panel's axis puts its value (within 0.01 px); tick labels are round

  check_plot.py heatmap FILE.svg PANELS ROWS COLS causal|full
      `clformer attention`'s heatmaps: the panels and their sizes, each
      row's weights summing to 1, none after the query when causal (the
      weights themselves are checked against float64 in test_attn_fused)

  check_plot.py report FILE.html RUN/metrics.jsonl decoder|translator|classifier
      `clformer report`'s page: self-contained, its sections, its chart the
      logged values, the kind's preview (the confusion matrix adding up)

Prints what failed and exits 1, or prints "ok" and exits 0.
"""
import json
import math
import re
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def records(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def check_metrics(path, a, b):
    recs = records(path)
    ev = [r for r in recs if "event" in r]
    kinds = [r["event"] for r in ev]
    assert kinds == ["start", "end", "resume", "end"], f"session records {kinds}"
    assert ev[0]["step"] == 0 and ev[0]["device"] and "kind: decoder" in ev[0]["config"], ev[0]
    assert ev[1]["step"] == a and ev[1]["checkpoint_step"] == a, ev[1]
    assert ev[2]["step"] == a and ev[3]["step"] == b and ev[3]["checkpoint_step"] == b, ev[2:]
    logs = [r for r in recs if "loss" in r]
    evals = [r for r in recs if "val_loss" in r]
    assert logs and evals, "no log or evaluation records"
    for r in logs:
        for k in ("step", "loss", "lr", "tokens_per_s", "step_ms", "elapsed_s", "grad_norm"):
            assert k in r and math.isfinite(r[k]), f"log record without {k}: {r}"
        assert r["grad_norm"] > 0, r
    steps = [r["step"] for r in logs]
    assert steps == sorted(steps) and steps[-1] == b, f"log steps {steps}"
    assert evals[-1]["step"] == b, evals[-1]


def panel_map(g):
    f = {k: float(g.get("data-" + k)) for k in ("x0", "x1", "y0", "y1", "left", "top", "width", "height")}
    log = g.get("data-log") == "1"

    def to_px(x, y):
        px = f["left"] + (x - f["x0"]) / (f["x1"] - f["x0"]) * f["width"]
        if log:
            t = (math.log10(y) - math.log10(f["y0"])) / (math.log10(f["y1"]) - math.log10(f["y0"]))
        else:
            t = (y - f["y0"]) / (f["y1"] - f["y0"])
        return px, f["top"] + f["height"] - t * f["height"]
    return to_px, f


def check_svg(svg, metrics):
    root = ET.parse(svg).getroot()
    recs = [r for r in records(metrics) if "event" not in r]  # sessions' records: not plotted
    want = {
        ("loss", "train"): [(r["step"], r["loss"]) for r in recs if "loss" in r],
        ("loss", "val"): [(r["step"], r["val_loss"]) for r in recs if "val_loss" in r],
        ("learning rate", ""): [(r["step"], r["lr"]) for r in recs if "lr" in r],
        ("tokens/s", ""): [(r["step"], r["tokens_per_s"]) for r in recs if "tokens_per_s" in r],
    }
    seen = set()
    for g in root.iter(NS + "g"):
        if g.get("class") != "panel":
            continue
        title = g.get("data-title")
        to_px, f = panel_map(g)
        for s in g.iter(NS + "g"):
            if s.get("class") != "series":
                continue
            name = s.get("data-name")
            key = (title, "train" if name.endswith(" train") else "val" if name.endswith(" val") else "")
            vals = [tuple(float(v) for v in p.split(",")) for p in s.get("data-values").split()]
            assert key in want, f"unexpected series {key}"
            exp = [(float(x), float(y)) for x, y in want[key]]
            assert vals == exp, f"{key}: plotted {vals[:4]}... logged {exp[:4]}..."
            pts = [tuple(float(v) for v in p.split(",")) for p in s.find(NS + "polyline").get("points").split()]
            assert len(pts) == len(vals), f"{key}: {len(pts)} points for {len(vals)} values"
            for (x, y), (px, py) in zip(vals, pts):
                ex, ey = to_px(x, y)
                assert abs(ex - px) < 0.01 and abs(ey - py) < 0.01, f"{key}: ({x}, {y}) at ({px}, {py}), axis says ({ex:.2f}, {ey:.2f})"
                assert f["left"] - 0.01 <= px <= f["left"] + f["width"] + 0.01, f"{key}: x outside the panel"
                assert f["top"] - 0.01 <= py <= f["top"] + f["height"] + 0.01, f"{key}: y outside the panel"
            seen.add(key)
        # ticks: y labels end-anchored, x labels centred; linear ones evenly
        # spaced by 1, 2 or 5 x 10^k, each a multiple of that step; a log
        # axis's powers of ten
        for anchor, log in (("end", g.get("data-log") == "1"), ("middle", False)):
            vals = []
            for t in g.iter(NS + "text"):
                if t.get("class") == "tick" and t.get("text-anchor") == anchor:
                    assert re.fullmatch(r"-?\d+(\.\d+)?(e[+-]\d+)?", t.text or ""), f"tick label {t.text!r}"
                    vals.append(float(t.text))
            assert len(vals) >= 2, f"{title}: {len(vals)} ticks"
            if log:
                assert all(abs(math.log10(v) - round(math.log10(v))) < 1e-9 for v in vals), f"{title}: log ticks {vals}"
                continue
            step = vals[1] - vals[0]
            mag = 10 ** math.floor(math.log10(step) + 1e-9)
            assert any(abs(step - k * mag) < 1e-9 * mag for k in (1, 2, 5)), f"{title}: tick step {step}"
            for v in vals:
                assert abs(v / step - round(v / step)) < 1e-6, f"{title}: tick {v} not a multiple of {step}"
            for a, b in zip(vals, vals[1:]):
                assert abs((b - a) - step) < 1e-6 * step, f"{title}: ticks {vals} not evenly spaced"
    missing = set(want) - seen
    assert not missing, f"series missing: {missing}"


def check_heatmap(svg, panels, rows, cols, causal):
    """Attention heatmaps: PANELS panels of ROWS x COLS cells; each row's
    drawn weights (cells under 1/512 are not drawn) sum to 1 within what
    the undrawn ones can hold; with causal, no weight right of the diagonal
    (keys after the query)."""
    root = ET.parse(svg).getroot()
    maps = [g for g in root.iter(NS + "g") if g.get("class") == "heatmap"]
    assert len(maps) == panels, f"{len(maps)} panels, expected {panels}"
    for g in maps:
        assert (int(g.get("data-rows")), int(g.get("data-cols"))) == (rows, cols), \
            f"{g.get('data-title')}: {g.get('data-rows')} x {g.get('data-cols')}, expected {rows} x {cols}"
        sums = [0.0] * rows
        for r in g.iter(NS + "rect"):
            if r.get("data-w") is None:
                continue
            t, s, w = int(r.get("data-row")), int(r.get("data-col")), float(r.get("data-w"))
            assert 0 <= t < rows and 0 <= s < cols and 1 / 512 <= w <= 1 + 1e-6, (t, s, w)
            assert not (causal and s > t), f"{g.get('data-title')}: weight {w} on key {s} after query {t}"
            sums[t] += w
        for t, v in enumerate(sums):
            assert 1 - cols / 512 - 1e-5 <= v <= 1 + 1e-5, f"{g.get('data-title')}: row {t} sums to {v}"


def check_report(html, metrics, kind):
    """`clformer report`'s page: self-contained (no script, no external
    reference), the sections, its chart the run's logged values (check_svg),
    and the preview of the kind."""
    from html.parser import HTMLParser
    text = open(html, encoding="utf-8").read()

    class P(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tags, self.h2, self.cur, self.rows = [], [], None, {}

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            for k, v in attrs:
                assert not (k in ("src", "href") or (v or "").startswith(("http:", "https:"))) or \
                    v == "http://www.w3.org/2000/svg", f"an external reference: {k}={v}"
            if tag == "table":
                self.table = []
            if tag == "tr":
                self.table.append([])
            self.cur = tag

        def handle_data(self, data):
            if self.cur == "h2":
                self.h2.append(data.strip())
            if self.cur in ("td", "th") and hasattr(self, "table") and self.table:
                self.table[-1].append(data.strip())
            self.cur = None if self.cur == "h2" else self.cur

    p = P()
    p.feed(text)
    assert "script" not in p.tags and "link" not in p.tags and "img" not in p.tags, "not self-contained"
    preview = {"decoder": "Sample", "translator": "Translations", "classifier": "Confusion matrix"}[kind]
    assert p.h2 == ["Run", "Curves", preview, "Config"], f"sections {p.h2}"
    svg = text[text.index("<svg"):text.index("</svg>") + 6]
    with open(html + ".svg", "w", encoding="utf-8") as f:
        f.write(svg)
    check_svg(html + ".svg", metrics)
    if kind == "classifier":  # the matrix's counts add up to the sentences it names
        m = re.search(r"(\d+) sentences, accuracy ([\d.]+)%", text)
        cells = re.findall(r'<td class="(diag|off)">(\d+)</td>', text)
        total = sum(int(v) for _, v in cells)
        diag = sum(int(v) for k, v in cells if k == "diag")
        assert m and total == int(m.group(1)) and abs(100 * diag / total - float(m.group(2))) < 0.01, \
            f"confusion matrix {cells} against {m and m.group(0)}"
    if kind == "translator":
        assert text.count("</tr>") >= 6 and "BLEU" in text, "the translations table"


def main():
    try:
        if sys.argv[1] == "metrics":
            check_metrics(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        elif sys.argv[1] == "report":
            check_report(sys.argv[2], sys.argv[3], sys.argv[4])
        elif sys.argv[1] == "heatmap":
            check_heatmap(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                          sys.argv[6] == "causal")
        else:
            check_svg(sys.argv[2], sys.argv[3])
    except (AssertionError, ValueError, KeyError, ET.ParseError) as e:
        print(f"check_plot: {e}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A detection-style step: the graph scores anchors and regresses boxes,
Python fetches them, keeps the confident ones with a greedy non-maximum
suppression written as a Python loop, and feeds the survivors back for a
second stage whose row count changes from step to step."""
import numpy as np


def iou(a, b):
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])
    return inter / (area - inter + 1e-9)


def nms(boxes, scores, threshold=0.5, keep_at_most=8):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    kept = []
    for i in order:
        if scores[i] < 0.5 or len(kept) == keep_at_most:
            break
        if all(iou(boxes[i], boxes[j]) < threshold for j in kept):
            kept.append(i)
    return kept


def step(feat, anchors, Wc, Wb, Wr):
    scores = 1.0 / (1.0 + np.exp(-(feat @ Wc)))        # [n, 1]
    boxes = anchors + feat @ Wb                          # [n, 4]
    b, s = np.asarray(boxes), np.asarray(scores)[:, 0]   # fetched
    kept = nms(b.tolist(), s.tolist())
    if not kept:
        return 0, 0.0
    rois = b[kept]                                        # Python-side survivors, fed back
    refined = np.tanh(rois @ Wr) + rois
    return len(kept), float(refined.sum())


def run(step_fn, steps=100, seed=0, n=64, d=16):
    data = np.random.default_rng(seed)
    Wc = (data.standard_normal((d, 1)) * 0.5).astype(np.float32)
    Wb = (data.standard_normal((d, 4)) * 0.1).astype(np.float32)
    Wr = (data.standard_normal((4, 4)) * 0.1).astype(np.float32)
    xy = data.uniform(0, 10, (n, 2))
    anchors = np.concatenate([xy, xy + data.uniform(1, 3, (n, 2))], axis=1).astype(np.float32)
    out = []
    for _ in range(steps):
        feat = data.standard_normal((n, d)).astype(np.float32)
        out.append(step_fn(feat, anchors, Wc, Wb, Wr))
    return out


if __name__ == "__main__":
    import tfvm
    print(run(tfvm.terra(step))[-3:], run(step)[-3:])

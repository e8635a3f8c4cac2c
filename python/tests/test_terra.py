"""tfvm.terra (docs/terra.md): the six programs of examples/terra/ against
plain NumPy over 100 steps, every fallback path, the merge of traces, the
case assignment, the generated program and the proxy array's protocols."""
import importlib
import os
import random
import sys

import numpy as np
import pytest

import tfvm
from tfvm import _terra, _terra_graph as tg

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "terra")
sys.path.insert(0, EXAMPLES)


def same(a, b, path="result"):
    """Equal structures; floats and arrays within 1e-5 relative."""
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), "%s: %r != %r" % (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, "%s[%d]" % (path, i))
    elif isinstance(a, float) or isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7, err_msg=path)
    else:
        assert a == b, "%s: %r != %r" % (path, a, b)


# program, least co-executed steps of 100, the fallbacks' reasons
PROGRAMS = [
    ("dropblock", 99, set()),
    ("sdpoint", 95, {"a new operation", "a new path"}),
    ("charrnn", 99, set()),                 # its sampling loop is a tagged loop: any length fits
    ("layerlist", 95, {"a new operation", "a new path"}),
    ("detection", 99, set()),
    ("mlp", 98, {"a new operation"}),       # step 1's weights are step 0's arrays: W2.T is traced from then on
]


@pytest.mark.parametrize("name,coexec,reasons", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_program_matches_numpy(name, coexec, reasons):
    m = importlib.import_module(name)
    f = tfvm.terra(m.step)
    try:
        got = m.run(f, steps=100)
    finally:
        f.close()
    same(got, m.run(m.step, steps=100))
    assert f.disabled is None
    assert f.stats["traced_steps"] + f.stats["coexec_steps"] == 100
    assert f.stats["coexec_steps"] >= coexec, f.stats
    assert set(f.fallback_reasons) == reasons
    assert f.stats["fallbacks"] == len(f.fallback_reasons) == f.stats["traced_steps"] - 1


def run_both(fn, args_per_step, **options):
    """fn under tfvm.terra and plain, step by step; returns the terra one."""
    t = tfvm.terra(fn, **options)
    try:
        for args in args_per_step:
            same(t(*args), fn(*args))
    finally:
        t.close()
    return t


X = np.arange(12, dtype=np.float32).reshape(3, 4) / 10


def branchy(x, k):
    h = np.tanh(x)
    if k % 3 == 0:
        h = h * 2.0
    return h.sum(axis=1)


def test_fallback_new_path_then_cases():
    # step 0 traces the multiply; step 1 skips it: a path the TraceGraph lacks
    t = run_both(branchy, [(X, k) for k in range(7)])
    assert t.fallback_reasons == ["a new path"]
    assert t.stats == {"traced_steps": 2, "coexec_steps": 5, "fallbacks": 1, "compiles": 2,
                       "python_wait_s": t.stats["python_wait_s"]}
    assert t.source == """fn main() -> i32 {
    while feed<bool>("go") {
        var q5_0: f32[?, ?] = fill([0, 0], 0.0f32);
        let n2 = feed<f32[?, ?]>("i2_0");
        let n3 = tanh(n2);
        q5_0 = n3;
        let c1 = feed<i32>("c1");
        if c1 == 0 {
            let n4 = (n3 * feed<f32>("i4_1"));
            q5_0 = n4;
        }
        let n5 = fetch("o5", reduce_sum(q5_0, [1], keepdims = false));
    }
    0
}
"""


def grows(x, k):
    h = np.tanh(x)
    if k % 2:
        h = np.exp(h)                               # first seen at step 1
    return h.mean(axis=0)


def test_fallback_new_operation():
    t = run_both(grows, [(X, k) for k in range(5)])
    assert t.fallback_reasons == ["a new operation"]


def flows(x, k):
    a, b = np.tanh(x), np.exp(x)
    return (a if k < 2 else b) * 3.0       # the multiply reads another producer


def test_fallback_new_data_flow():
    t = run_both(flows, [(X, k) for k in range(4)])
    assert t.fallback_reasons == ["a new data flow"]


def peeks(x, k):
    h = np.tanh(x)
    s = h.sum()
    total = float(s) if k >= 2 else 0.0         # materialized from step 2 on
    return h * 2.0, total


def test_fallback_new_fetch():
    t = run_both(peeks, [(X, k) for k in range(4)])
    assert t.fallback_reasons == ["a new fetch"]


def stops(x, k):
    h = np.tanh(x)
    if k < 2:
        h = h + 1.0
    return h


def test_fallback_new_end():
    # the trace of step 0 ends after the add; step 2's after the tanh
    t = run_both(stops, [(X, k) for k in range(4)])
    assert t.fallback_reasons == ["a new end"]


def test_fallback_keeps_python_effects_single():
    seen = []

    def effects(x, k, rng):
        h = np.tanh(x)
        seen.append(rng.random())                  # a Python effect before the divergence
        if k == 3:
            h = np.exp(h)                           # new at step 3
        return float(h.sum())
    t = tfvm.terra(effects)
    r1, r2 = random.Random(5), random.Random(5)
    try:
        got = [t(X, k, r1) for k in range(5)]
    finally:
        t.close()
    assert t.fallback_reasons == ["a new operation"]
    mine, seen[:] = list(seen), []
    same(got, [effects(X, k, r2) for k in range(5)])
    assert mine == seen                            # each step drew exactly once


def helper(h):
    return np.tanh(h)


def two_sites(x):
    return helper(x) + helper(x * 2.0)


def test_call_ids_tell_call_sites_apart():
    t = run_both(two_sites, [(X,)] * 3)
    tanhs = [n for n in t.graph.nodes.values() if n.op == "tanh"]
    assert len(tanhs) == 2
    (calls_a, _), (calls_b, _) = sorted((n.key[5], n.key[6]) for n in tanhs)
    # the call of helper (np.tanh in it, a callee written in C, is called
    # without a push of its own): the sites differ
    assert len(calls_a) == len(calls_b) == 1 and calls_a != calls_b


class Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, h):
        for _ in range(2):
            h = np.tanh(h) * self.k
        return h


def layered(x, layers):
    for layer in layers:
        x = layer(x)
    return x


def test_callable_objects_are_rewritten():
    # the loop inside Scale.__call__ is seen: each tanh has both loops on its loop-id stack
    t = run_both(layered, [(X, [Scale(0.5), Scale(2.0)])] * 3, fold_loops=False)
    stacks = sorted(n.key[6] for n in t.graph.nodes.values() if n.op == "tanh")
    assert [[c for _, c in st] for st in stacks] == [[1, 1], [1, 2], [2, 1], [2, 2]]
    assert t.stats["coexec_steps"] == 2


def looped(x, n):
    h = x
    for _ in range(n):
        h = np.tanh(h)
    return h


def test_loop_ids_count_iterations():
    t = run_both(looped, [(X, 3)] * 3, fold_loops=False)
    loops = sorted(n.key[6] for n in t.graph.nodes.values() if n.op == "tanh")
    assert [[c for _, c in stack] for stack in loops] == [[1], [2], [3]]
    assert len({lid for stack in loops for lid, _ in stack}) == 1


def rnn(x, W, n):
    h, hs = x, x
    for _ in range(n):
        h = np.tanh(h @ W)                          # carried from one iteration to the next
        hs = np.concatenate([hs, h], axis=0)        # and a sequence that grows
        if float(h.sum()) > 1e9:                    # a fetch per iteration
            break
    return hs.mean(axis=1)


W44 = np.linspace(-0.5, 0.5, 16, dtype=np.float32).reshape(4, 4)


def test_loop_is_folded_into_a_tagged_loop():
    # once traced with 3 iterations, every trip count runs on the same graph
    t = run_both(rnn, [(X[:1], W44, n) for n in (3, 1, 5, 2, 7, 0, 4)])
    assert t.fallback_reasons == ["a new path"]         # 0 iterations: the loop is skipped
    assert t.stats["traced_steps"] == 2 and t.stats["compiles"] == 2
    assert 'while feed<bool>("l' in t.source
    loop = next(n for n in t.graph.by_id[2:] if n.op == "loop")
    assert [e[0] for e in loop.attrs.entries] == ["matmul", "tanh", "concatenate", "sum"]


def drift(x, n, k):
    h = x
    for _ in range(n):
        h = np.tanh(h if k < 2 else x) * 0.5        # from step 2 on, no longer carried
    return h


def test_loop_new_data_flow_inside_the_body():
    t = run_both(drift, [(X, 3, k) for k in range(5)])
    assert t.fallback_reasons == ["a new data flow"]
    assert sum(n.op == "loop" for n in t.graph.by_id[2:]) == 2   # one per data flow


def switches(x, n, k):
    h = x
    for i in range(n):
        h = np.tanh(h) if i < 2 or k < 2 else np.exp(h) * 0.1    # from step 2 on, iteration 3 changes operation
    return h


def test_loop_body_that_changes_mid_loop_falls_back():
    # step 2 leaves the tagged loop's body at its third iteration: the step
    # is finished by NumPy, the loop unrolls as a second case, and steps 3
    # and 4 co-execute on it
    t = run_both(switches, [(X, 4, k) for k in range(5)])
    assert t.fallback_reasons == ["a new path"]
    assert (t.stats["traced_steps"], t.stats["coexec_steps"]) == (2, 3)
    assert 'while feed<bool>("l' in t.source and "exp(" in t.source


def test_loop_unrolled_without_folding():
    t = tfvm.terra(rnn, fold_loops=False)
    try:
        for n in (3, 1, 5, 3):
            same(t(X[:1], W44, n), rnn(X[:1], W44, n))
    finally:
        t.close()
    # 3 is traced; 1 leaves the loop early (a new edge), 5 goes on (new nodes); the second 3 co-executes
    assert t.fallback_reasons == ["a new path", "a new operation"]
    assert "while feed<bool>(\"l" not in t.source


def test_merge_and_case_assignment_of_the_supplements_example():
    # the TraceGraph of Terra's supplement (Figure 2): 1 branches to the
    # chains 2-3, 4-5 and 6; 3 and 5 join at 7; 6 and 7 join at 8; 8-9 ends
    g = tg.TraceGraph()
    S, E = tg.START, tg.END

    def trace(*ops):
        return [(op, "op%d" % op, (), ("n",), np.float32, 1, None, []) for op in ops], {}
    for t in ([1, 2, 3, 7, 8, 9], [1, 4, 5, 7, 8, 9], [1, 6, 8, 9]):
        assert g.merge(*trace(*t)) is True
    assert g.merge(*trace(1, 2, 3, 7, 8, 9)) is False      # nothing new
    ids = {n.op: n.id for n in g.by_id[2:]}
    assert g.traces == 4 and len(g.nodes) == 9 and len(g.edges) == 12
    cases = tg.assign_cases([n.id for n in g.by_id[2:]], g.edges)

    def named(v):
        return next(op for op, i in ids.items() if i == v)
    got = [[([named(v) for v in block], sorted((named(u) if u != S else "start", named(v)) for u, v in ctl))
            for block, ctl in sc] for sc in cases]
    assert got == [
        [(["op1"], [("start", "op1")])],
        [(["op2", "op3"], [("op1", "op2")]), (["op4", "op5"], [("op1", "op4")]), (["op6"], [("op1", "op6")])],
        [(["op7"], [("op3", "op7"), ("op5", "op7")]), ([], [("op6", "op8")])],
        [(["op8", "op9"], [("op6", "op8"), ("op7", "op8")])],
    ]
    assert (ids["op9"], E) in g.edges


def test_case_assignment_refuses_a_cycle():
    with pytest.raises(tg.GraphError, match="the TraceGraph has a cycle"):
        tg.assign_cases([2, 3], {(0, 2), (2, 3), (3, 2), (3, 1)})


def protocols(x, w, k):
    y = x @ w + 1.0                                  # operators with a Python scalar
    z = np.maximum(y, 0.5) - abs(-y) / 2.0
    parts = np.concatenate([z[:, :2], z[:, 2:], z[1:2, :].T[:3].reshape(3, 1)], axis=1)
    m = np.where(parts > 1.0, parts, -parts)
    info = (m.shape, str(m.dtype), m.ndim, len(m))
    r = m.sum(axis=0, keepdims=True) + m.mean() + m.max(axis=1).reshape(3, 1)
    s = np.sort(np.asarray(r), axis=1)              # a NumPy call tfvm does not trace: fetched
    return info, np.exp(r).astype(np.float64), s, r[k % 3, 1:].sum() * 1.0


def test_proxy_protocols():
    w = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    t = run_both(protocols, [(X, w, k) for k in range(4)])
    assert t.fallback_reasons == [] and t.stats["coexec_steps"] == 3


def joins(a, b):
    return np.concatenate([np.tanh(a), b], axis=0).sum()


def test_shapes_numpy_refuses_raise_numpys_error_in_the_step():
    t = tfvm.terra(joins)
    try:
        assert t(X, X) == pytest.approx(joins(X, X), rel=1e-5)
        with pytest.raises(ValueError, match="all the input array dimensions except for the concatenation axis"):
            t(X, X[:, :3])                  # NumPy's rule, checked before the graph sees it: NumPy runs it
    finally:
        t.close()
    assert t.fallback_reasons == ["a new fetch"]        # the concatenation's input, for NumPy


def powers(a, b):
    return (np.power(a, b) * 0.5).sum()


I = np.arange(1, 7, dtype=np.int32).reshape(2, 3)


def test_graph_failure_falls_back_and_numpy_raises():
    t = tfvm.terra(powers)
    try:
        assert t(I, I) == pytest.approx(powers(I, I), rel=1e-5)
        assert t(I, I - 1) == pytest.approx(powers(I, I - 1), rel=1e-5)        # co-executed
        with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
            t(I, I - 3)                     # tfvm's pow fails; the fallback's NumPy raises NumPy's error
    finally:
        t.close()
    assert t.fallback_reasons == ["the graph failed: n4 (POW) at [main_while1#1]: integer power with a negative exponent"]
    assert t.stats["coexec_steps"] == 1


def keeps(x, state):
    state["h"] = np.tanh(x + state["h"]) * 0.5       # the previous step's value, still in the graph


def test_values_that_outlive_a_step_stay_in_the_graph():
    state, ref = {"h": X}, {"h": X}
    t = tfvm.terra(keeps)
    try:
        seen = []
        for k in range(5):
            t(X * k, state)
            keeps(X * k, ref)
            seen.append(state["h"])
            # the graph runs on: a co-executed step's value is taken at the end of the next step
            assert [h._val is None for h in seen] == [False] * (len(seen) - 1) + [k > 0]
        same(np.asarray(state["h"]), ref["h"])     # read now: taken from the graph
        assert t.stats["coexec_steps"] == 4 and t.fallback_reasons == []
    finally:
        t.close()


def keeps_powers(a, b, state):
    state["p"] = np.power(a, b)


def feeds_after_a_fetch(x, queued):
    h = np.tanh(x)
    total = float(h.sum())                        # Python waits for the graph here
    y = h * 3.0                                   # 3.0 is a Python value to feed
    queued.append(len(getattr(_terra._current, "pending", ())))   # feeds not yet handed to the graph
    return y + total


@pytest.mark.parametrize("caught_up_s,queued", [(-1.0, [0, 0]), (float("inf"), [1, 1])],
                         ids=["fetch-waited", "fetch-did-not-wait"])
def test_after_a_fetch_that_waited_the_next_operation_is_fed_at_once(monkeypatch, caught_up_s, queued):
    # a fetch that waited longer than CAUGHT_UP_S means the graph has run out
    # of work: the next operation's feeds go to it at once, not at the next
    # fetch or the step's end (the MLP's graph waited 0.4 ms a step for them)
    monkeypatch.setattr(_terra, "CAUGHT_UP_S", caught_up_s)
    t, seen = tfvm.terra(feeds_after_a_fetch), []
    try:
        for _ in range(3):
            same(t(X, seen), feeds_after_a_fetch(X, []))
    finally:
        t.close()
    assert t.stats["coexec_steps"] == 2 and seen[1:] == queued     # step 0 traced


def test_graph_failure_in_a_step_that_has_ended():
    state = {}
    t = tfvm.terra(keeps_powers)
    try:
        t(I, I, state)
        t(I, I - 1, state)
        same(np.asarray(state["p"]), np.power(I, I - 1))
        t(I, I - 3, state)                  # returns: the graph fails later
        with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
            np.asarray(state["p"])          # NumPy's error where the value is read
        t(I, I, state)                      # a new session
        same(np.asarray(state["p"]), np.power(I, I))
    finally:
        t.close()
    assert t.fallback_reasons == ["the graph failed: n4 (POW) at [main_while1#1]: integer power with a negative exponent"]
    assert t.stats["coexec_steps"] == 3


def test_proxy_refuses_assignment():
    def assigns(x):
        x[0] = 1.0
    t = tfvm.terra(assigns)
    with pytest.raises(TypeError, match="tfvm.terra arrays cannot be assigned to"):
        t(X)
    t.close()


def test_default_workers_follow_the_traced_steps_and_the_free_cores(monkeypatch):
    from tfvm import _terra
    monkeypatch.setattr(_terra, "_cores", lambda: 4)
    free = [3.8]
    monkeypatch.setattr(_terra, "_free_cores", lambda cores: free[0])
    f = tfvm.terra(branchy)
    try:
        f(X, 1)                                   # a traced step: its array work and its whole time are measured
        assert 0 < f.traced_work_s <= f.traced_step_s
    finally:
        f.close()
    f.traced_work_s, f.traced_step_s = 3.0, 4.0   # the graph is the critical path: every free core
    assert f.workers() == 4
    free[0] = 2.2                                 # other processes hold nearly two
    assert f.workers() == 2
    free[0] = 0.1
    assert f.workers() == 1
    free[0], f.traced_work_s = 3.8, 1.0           # Python's own work is the critical path: one core for it
    assert f.workers() == 3
    monkeypatch.setattr(_terra, "_cores", lambda: 1)
    assert f.workers() == 1
    assert tfvm.terra(branchy, threads=2).workers() == 2


def test_free_cores_reads_the_machines_idle_time():
    from tfvm import _terra
    free = _terra._free_cores(2, window_s=0.02)
    assert 0.0 <= free <= 2.0

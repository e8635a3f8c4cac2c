"""Terra's TraceGraph, its case assignment and the .tfg program made from it
(docs/terra.md).

A trace is the list of array operations one call of a ``@tfvm.terra``
function made, each with a *key*: (operation, attributes, what each input is,
result dtype and rank, call-id stack, loop-id stack, program site, occurrence).
Merging traces unites operations with equal keys into one node and the
consecutive pairs of every trace into edges (with a START and an END node), so
the TraceGraph is the union of all paths seen. ``assign_cases`` is the
switch-case assignment that covers every path with an ordered list of
switch-cases (sets of mutually exclusive basic blocks), and ``generate`` writes
the graph that runs one call per iteration of a host-driven loop.
"""
import numpy as np

START, END = 0, 1

TFG_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.int32): "i32",
              np.dtype(np.int64): "i64", np.dtype(np.bool_): "bool"}
_ZERO = {"f32": "0.0f32", "f64": "0.0f64", "i32": "0i32", "i64": "0i64", "bool": "false"}


class GraphError(Exception):
    """The TraceGraph cannot be made into a program (a cycle, a slot whose
    producers differ in type); the caller keeps running imperatively."""


def tfg_type(dtype, ndim, length=None):
    """The .tfg type of a value: `f32` for a scalar, `f32[?, ?]` for a matrix,
    `i64[3]` for a vector of known length."""
    name = TFG_DTYPES[np.dtype(dtype)]
    if length is not None:
        return "%s[%d]" % (name, length)
    return name if ndim == 0 else "%s[%s]" % (name, ", ".join(["?"] * ndim))


def _dummy(dtype, ndim):
    """An initial value of a var of that type (never read on a valid path)."""
    name = TFG_DTYPES[np.dtype(dtype)]
    if ndim == 0:
        return _ZERO[name]
    return "fill([%s], %s)" % (", ".join(["0"] * ndim), _ZERO[name])


class Node:
    __slots__ = ("id", "key", "op", "attrs", "sig", "dtype", "ndim", "emit")

    def __init__(self, nid, key, op, attrs, sig, dtype, ndim, emit):
        self.id, self.key, self.op, self.attrs, self.sig = nid, key, op, attrs, sig
        self.dtype, self.ndim, self.emit = np.dtype(dtype), ndim, emit


class TraceGraph:
    """Traces merged by key. ``producers[(v, j)]`` is the set of nodes whose
    result was input j of node v in some trace; ``fetched`` the nodes whose
    values Python read (materialized, or kept after the call)."""

    def __init__(self):
        self.nodes = {}          # key -> Node
        self.by_id = [None, None]
        self.edges = set()
        self.producers = {}
        self.fetched = set()
        self.traces = 0

    def node(self, key):
        return self.nodes.get(key)

    def merge(self, events, fetched_events):
        """Adds one trace: events are (key, op, attrs, sig, dtype, ndim, emit,
        inputs) with inputs ('n', event index) or ('v', value). Returns True
        when the graph changed."""
        size = (len(self.nodes), len(self.edges), sum(len(p) for p in self.producers.values()),
                len(self.fetched))
        ids = []
        prev = START
        for key, op, attrs, sig, dtype, ndim, emit, inputs in (e[:8] for e in events):
            n = self.nodes.get(key)
            if n is None:
                n = Node(len(self.by_id), key, op, attrs, sig, dtype, ndim, emit)
                self.nodes[key] = n
                self.by_id.append(n)
            ids.append(n.id)
            for j, (kind, ref) in enumerate(inputs):
                if kind == "n":
                    self.producers.setdefault((n.id, j), set()).add(ids[ref])
            self.edges.add((prev, n.id))
            prev = n.id
        self.edges.add((prev, END))
        self.fetched.update(ids[e] for e in fetched_events)
        self.traces += 1
        return size != (len(self.nodes), len(self.edges), sum(len(p) for p in self.producers.values()),
                        len(self.fetched))


def assign_cases(node_ids, edges):
    """The switch-case assignment of Terra's supplement (Algorithm 1): walks
    the TraceGraph in topological order, making each basic block as long a
    linear chain as possible. Returns the ordered list of switch-cases, each a
    list of (basic block: list of node ids, control edges: frozenset)."""
    succ = {v: [] for v in list(node_ids) + [START, END]}
    pred = {v: [] for v in succ}
    for u, v in sorted(edges):
        succ[u].append(v)
        pred[v].append(u)
    cases = []
    next_edges = {(START, y) for y in succ[START] if y != END}
    rounds = 0
    while next_edges:
        rounds += 1
        if rounds > len(succ) + 1:
            raise GraphError("the TraceGraph has a cycle")
        switch_case, new_next = [], set()
        for v in sorted({y for _, y in next_edges}):
            control = frozenset(e for e in next_edges if e[1] == v)
            block = []
            if all((u, v) in next_edges for u in pred[v]):
                block.append(v)
                while len(succ[v]) == 1 and succ[v][0] != END and len(pred[succ[v][0]]) == 1:
                    v = succ[v][0]
                    block.append(v)
                new_next.update((v, y) for y in succ[v] if y != END)
            else:
                new_next.update(control)
            switch_case.append((block, control))
        cases.append(switch_case)
        next_edges = new_next
    return cases


class Plan:
    """What the Python side needs to drive a generated program: for each
    edge, the case channels it selects, and the switch-cases that need a
    case every call (-1 when the call ended before them)."""

    def __init__(self, select, conditional, source):
        self.select = select            # edge -> [(channel, case index)]
        self.conditional = conditional  # channel names, in order
        self.source = source


def generate(g):
    """The .tfg program of TraceGraph g: one loop iteration per call, driven
    by the host's `go` feed; a switch-case with several cases (or one that a
    path may skip) becomes an if chain on a fed case number."""
    cases = assign_cases([n.id for n in g.by_id[2:]], g.edges)
    block_of, conditional_sc = {}, []
    processed, ended = {START}, {u for u, v in g.edges if v == END}
    for i, sc in enumerate(cases):
        # one case that every path reaches needs no case select
        conditional_sc.append(len(sc) > 1 or not sc[0][0] or bool(ended & processed))
        for c, (block, _) in enumerate(sc):
            block_of.update((v, (i, c)) for v in block)
            processed.update(block)
    phis, phi_of, read_elsewhere = {}, {}, set()
    for (v, j), prods in g.producers.items():
        if len(prods) > 1:
            if len({(g.by_id[p].dtype, g.by_id[p].ndim) for p in prods}) != 1:
                raise GraphError("input %d of node %d comes from values of different types" % (j, v))
            phis[(v, j)] = prods
            for p in prods:
                phi_of.setdefault(p, []).append("q%d_%d" % (v, j))
        else:
            read_elsewhere.update(p for p in prods if block_of[p] != block_of[v])
    var_nodes = {v for v in read_elsewhere if conditional_sc[block_of[v][0]]}
    decls = ["var n%d: %s = %s;" % (v, tfg_type(g.by_id[v].dtype, g.by_id[v].ndim),
                                    _dummy(g.by_id[v].dtype, g.by_id[v].ndim)) for v in sorted(var_nodes)]
    for (v, j), prods in sorted(phis.items()):
        p = g.by_id[min(prods)]
        decls.append("var q%d_%d: %s = %s;" % (v, j, tfg_type(p.dtype, p.ndim), _dummy(p.dtype, p.ndim)))
    select, conditional, body = {}, [], []
    for i, sc in enumerate(cases):
        if not conditional_sc[i]:
            body.extend(_block_lines(g, sc[0][0], phis, phi_of, var_nodes))
            continue
        ch = "c%d" % i
        conditional.append(ch)
        body.append("let %s = feed<i32>(\"%s\");" % (ch, ch))
        arms = []
        for c, (block, control) in enumerate(sc):
            for e in control:
                select.setdefault(e, []).append((ch, c))
            if block:
                stmts = _block_lines(g, block, phis, phi_of, var_nodes)
                arms.append("if %s == %d {\n%s\n}" % (ch, c, "\n".join("    " + s for s in stmts)))
        if arms:
            body.append(" else ".join(arms))
    lines = ["fn main() -> i32 {", "    while feed<bool>(\"go\") {"]
    lines += ["        " + ln for stmt in decls + body for ln in stmt.split("\n")]
    lines += ["    }", "    0", "}", ""]
    return Plan(select, conditional, "\n".join(lines))


def _block_lines(g, block, phis, phi_of, var_nodes):
    """The statements of one basic block: each node's value (fetched when
    Python reads it), then the phi vars it assigns."""
    out = []
    for v in block:
        n = g.by_id[v]
        args = []
        for j, s in enumerate(n.sig):
            if s == "n":
                if (v, j) in phis:
                    args.append(("q%d_%d" % (v, j), g.by_id[min(phis[(v, j)])].dtype))
                else:
                    (p,) = g.producers[(v, j)]
                    args.append(("n%d" % p, g.by_id[p].dtype))
            else:
                args.append(("feed<%s>(\"i%d_%d\")" % (tfg_type(*s), v, j), np.dtype(s[0])))
        expr = n.emit(n.attrs, args)
        if v in g.fetched:
            expr = "fetch(\"o%d\", %s)" % (v, expr)
        out.append(("n%d = %s;" if v in var_nodes else "let n%d = %s;") % (v, expr))
        out.extend("%s = n%d;" % (q, v) for q in phi_of.get(v, ()))
    return out

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


class LoopSpec:
    """The body of a folded loop: one entry per operation of an iteration,
    (op, attrs, sig, dtype, ndim, emit, pattern), where pattern says for each
    input: ('in', q) the iteration's q-th result, ('carry', q, j) the previous
    iteration's q-th result (input j of the loop node the first time),
    ('ext', j) input j of the loop node, ('v',) a value fed each iteration."""

    __slots__ = ("lid", "entries", "keys")

    def __init__(self, lid, entries, keys):
        self.lid, self.entries, self.keys = lid, entries, keys


def norm_key(key):
    """key with its innermost loop counter replaced by '*': the same for
    every iteration of that loop."""
    loops = key[6]
    return key[:6] + (loops[:-1] + ((loops[-1][0], "*"),),) + key[7:]


def _loop_run(events, i):
    """The end of the loop instance starting at events[i] (its first
    iteration's first operation of an innermost loop), or None."""
    loops = events[i][0][6]
    if not loops or loops[-1][1] != 1:
        return None
    outer, lid, d = loops[:-1], loops[-1][0], len(loops) - 1
    j = i
    while j < len(events):
        lj = events[j][0][6]
        if len(lj) <= d or lj[:d] != outer or lj[d][0] != lid:
            break
        if len(lj) != d + 1:
            return None                      # a nested loop: left unrolled
        j += 1
    return j


def _fold_one(events, i, j, later_refs):
    """(LoopSpec key, spec, ext sources, outputs) for events[i:j] when every
    iteration runs the same operations with the same data flow, else None."""
    its, it_of, pos_of = [], {}, {}
    for e in range(i, j):
        c = events[e][0][6][-1][1]
        if c == len(its) + 1:
            its.append([])
        elif c != len(its):
            return None
        it_of[e], pos_of[e] = len(its), len(its[-1])
        its[-1].append(e)
    keys = tuple(norm_key(events[e][0]) for e in its[0])
    if any(tuple(norm_key(events[e][0]) for e in it) != keys for it in its):
        return None
    ext = []

    def slot_of(src):
        if src not in ext:
            ext.append(src)
        return ext.index(src)

    def pattern(it, e):
        k = it_of[e]
        out = []
        for ref in events[e][7]:
            if ref[0] == "v":
                out.append(("v",))
            elif ref[1] < i:
                out.append(("ext", slot_of(ref[1])))
            elif it_of.get(ref[1]) == k:
                out.append(("in", pos_of[ref[1]]))
            elif it_of.get(ref[1]) == k - 1:
                out.append(("carry", pos_of[ref[1]]))
            else:
                return None
        return tuple(out)
    first = [pattern(0, e) for e in its[0]]
    rest = [[pattern(k, e) for e in it] for k, it in enumerate(its[1:], 1)]
    if None in first or any(None in r for r in rest) or any(r != rest[0] for r in rest):
        return None
    pats = []
    for p, f in enumerate(first):
        general = rest[0][p] if rest else f
        pat = []
        for s1, sg in zip(f, general):
            if sg[0] == "carry":
                if s1[0] != "ext":
                    return None
                pat.append(("carry", sg[1], s1[1]))
            elif s1 != sg:
                return None
            else:
                pat.append(sg)
        pats.append(tuple(pat))
    last = set(its[-1])
    outputs = set()
    for src in later_refs:
        if i <= src < j:
            if src not in last:
                return None
            outputs.add(src)
    spec = LoopSpec(events[i][0][6][-1][0],
                    [events[e][1:7] + (pats[p],) for p, e in enumerate(its[0])], keys)
    key = ("loop", keys, tuple(pats), len(ext))
    return key, spec, ext, {e: (e, pos_of[e]) for e in range(i, j)}, last


def fold_loops(events, fetched):
    """The trace with each innermost loop whose iterations repeat one body
    made one loop event (key, 'loop', LoopSpec, sig, ..., refs); refs to its
    last iteration's values become ('n', loop event, position). Returns the
    new events and fetched set (event indices, or (event, position))."""
    later = {}
    for e, ev in enumerate(events):
        for ref in ev[7]:
            if ref[0] == "n":
                later.setdefault(ref[1], []).append(e)
    out, where, fetched_out = [], {}, set()
    i = 0
    while i < len(events):
        j = _loop_run(events, i)
        folded = None
        if j is not None:
            folded = _fold_one(events, i, j, [src for src in range(i, j) for e in later.get(src, ()) if e >= j])
        if folded is None:
            ev = events[i]
            out.append(ev[:7] + ([_remap(r, where) for r in ev[7]],) + ev[8:])
            where[i] = (len(out) - 1,)
            if i in fetched:
                fetched_out.add(len(out) - 1)
            i += 1
            continue
        key, spec, ext, pos, _ = folded
        idx = len(out)
        out.append((key, "loop", spec, ("n",) * len(ext), np.float64, 0, None,
                    [_remap(("n", src), where) for src in ext], None))
        for e in range(i, j):
            where[e] = (idx, pos[e][1])
            if e in fetched:
                fetched_out.add((idx, pos[e][1]))
        i = j
    return out, fetched_out


def _remap(ref, where):
    return ref if ref[0] == "v" else ("n",) + where[ref[1]]


class TraceGraph:
    """Traces merged by key. ``producers[(v, j)]`` is the set of nodes whose
    result was input j of node v in some trace; ``fetched`` the nodes whose
    values Python read (materialized, or kept after the call)."""

    def __init__(self):
        self.nodes = {}          # key -> Node
        self.by_id = [None, None]
        self.edges = set()
        self.producers = {}
        self.fetched = set()      # node ids, and (loop node, body position)
        self.loop_entries = {}    # normalized key of a loop body's first operation -> loop nodes
        self.traces = 0

    def dtype_of(self, p):
        """dtype and rank of producer p: a node, or (loop node, position)."""
        if isinstance(p, tuple):
            e = self.by_id[p[0]].attrs.entries[p[1]]
            return np.dtype(e[3]), e[4]
        return self.by_id[p].dtype, self.by_id[p].ndim

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
                if op == "loop":
                    self.loop_entries.setdefault(attrs.keys[0], []).append(n.id)
            ids.append(n.id)
            for j, ref in enumerate(inputs):
                if ref[0] == "n":
                    p = ids[ref[1]] if len(ref) == 2 else (ids[ref[1]], ref[2])
                    self.producers.setdefault((n.id, j), set()).add(p)
            self.edges.add((prev, n.id))
            prev = n.id
        self.edges.add((prev, END))
        self.fetched.update(ids[e] if isinstance(e, int) else (ids[e[0]], e[1]) for e in fetched_events)
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
    phis, phi_of, read_elsewhere, loop_outputs = {}, {}, set(), set()
    for (v, j), prods in g.producers.items():
        loop_outputs.update(p for p in prods if isinstance(p, tuple))
        if len(prods) > 1:
            if len({g.dtype_of(p) for p in prods}) != 1:
                raise GraphError("input %d of node %d comes from values of different types" % (j, v))
            phis[(v, j)] = prods
            for p in prods:
                phi_of.setdefault(p, []).append("q%d_%d" % (v, j))
        else:
            read_elsewhere.update(p for p in prods if isinstance(p, int) and block_of[p] != block_of[v])
    var_nodes = {v for v in read_elsewhere if conditional_sc[block_of[v][0]]}
    decls = ["var %s: %s = %s;" % (_name(p), tfg_type(*g.dtype_of(p)), _dummy(*g.dtype_of(p)))
             for p in sorted(var_nodes | loop_outputs, key=_order)]
    for (v, j), prods in sorted(phis.items()):
        p = min(prods, key=_order)
        decls.append("var q%d_%d: %s = %s;" % (v, j, tfg_type(*g.dtype_of(p)), _dummy(*g.dtype_of(p))))
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
        args = [_arg(g, v, j, s, phis) for j, s in enumerate(n.sig)]
        if n.op == "loop":
            out.extend(_loop_lines(g, n, args, phi_of))
            continue
        expr = n.emit(n.attrs, args)
        if v in g.fetched:
            expr = "fetch(\"o%d\", %s)" % (v, expr)
        out.append(("n%d = %s;" if v in var_nodes else "let n%d = %s;") % (v, expr))
        out.extend("%s = n%d;" % (q, v) for q in phi_of.get(v, ()))
    return out


def _name(p):
    return "n%d" % p if isinstance(p, int) else "n%d_%d" % p


def _order(p):
    return p if isinstance(p, tuple) else (p, -1)


def _arg(g, v, j, s, phis, feed_name=None):
    """(expression, dtype) of input j of node v, whose sig entry is s."""
    if s != "n":
        return "feed<%s>(\"%s\")" % (tfg_type(*s), feed_name or "i%d_%d" % (v, j)), np.dtype(s[0])
    if (v, j) in phis:
        return "q%d_%d" % (v, j), g.dtype_of(min(phis[(v, j)], key=_order))[0]
    (p,) = g.producers[(v, j)]
    return _name(p), g.dtype_of(p)[0]


def _loop_lines(g, n, args, phi_of):
    """A folded loop: a tagged loop the host drives with channel lL (true
    before each iteration, false after the last)."""
    L, spec = n.id, n.attrs
    out = ["let x%d_%d = %s;" % (L, j, a[0]) for j, a in enumerate(args)]
    carries = sorted({(pat[1], pat[2]) for e in spec.entries for pat in e[6] if pat[0] == "carry"})
    out += ["var c%d_%d_%d: %s = x%d_%d;" % (L, q, j, tfg_type(spec.entries[q][3], spec.entries[q][4]), L, j)
            for q, j in carries]
    body = []
    for p, (op, attrs, sig, dtype, ndim, emit, pats) in enumerate(spec.entries):
        a = []
        for k, (s, pat) in enumerate(zip(sig, pats)):
            if pat[0] == "v":
                a.append(_arg(g, L, k, s, {}, "i%d_%d_%d" % (L, p, k)))
            elif pat[0] == "in":
                a.append(("b%d_%d" % (L, pat[1]), np.dtype(spec.entries[pat[1]][3])))
            elif pat[0] == "carry":
                a.append(("c%d_%d_%d" % (L, pat[1], pat[2]), np.dtype(spec.entries[pat[1]][3])))
            else:
                a.append(("x%d_%d" % (L, pat[1]), args[pat[1]][1]))
        expr = emit(attrs, a)
        if (L, p) in g.fetched:
            expr = "fetch(\"o%d_%d\", %s)" % (L, p, expr)
        body.append("let b%d_%d = %s;" % (L, p, expr))
    body += ["c%d_%d_%d = b%d_%d;" % (L, q, j, L, q) for q, j in carries]
    outputs = sorted({p[1] for prods in g.producers.values() for p in prods if isinstance(p, tuple) and p[0] == L})
    body += ["n%d_%d = b%d_%d;" % (L, b, L, b) for b in outputs]
    out.append("while feed<bool>(\"l%d\") {" % L)
    out += ["    " + ln for ln in body]
    out.append("}")
    for b in outputs:
        out.extend("%s = n%d_%d;" % (q, L, b) for q in phi_of.get((L, b), ()))
    return out

#!/usr/bin/env python3
"""test/e2e/trace_check.py TRACE.json WORKERS — checks a `tfvm profile --trace`
file against the Trace Event Format that Perfetto and chrome://tracing load
(the JSON object form): a schema of the fields each event kind needs, then
what tfvm promises on top (a named thread per worker, each firing's args).
Prints one line per problem and exits 1 when there is any."""
import json
import sys

# The fields (and their JSON types) each phase needs, per the format's
# specification; "X" is a complete event, "M" metadata.
NUMBER = (int, float)
SCHEMA = {
    "X": {"name": str, "ph": str, "pid": int, "tid": int, "ts": NUMBER, "dur": NUMBER},
    "M": {"name": str, "ph": str, "pid": int, "args": dict},
}
OPTIONAL = {"cat": str, "args": dict, "tid": int}
FIRING_ARGS = ("instruction", "op", "source", "tag", "inputs")


def problems(trace, workers):
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        yield "not an object with a traceEvents array"
        return
    if trace.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        yield "displayTimeUnit %r is neither ms nor ns" % trace["displayTimeUnit"]
    named, used, firings = set(), set(), 0
    for i, ev in enumerate(trace["traceEvents"]):
        where = "event %d" % i
        if not isinstance(ev, dict) or ev.get("ph") not in SCHEMA:
            yield "%s: no known phase: %r" % (where, ev)
            continue
        for key, kind in dict(OPTIONAL, **SCHEMA[ev["ph"]]).items():
            required = key in SCHEMA[ev["ph"]]
            if key not in ev:
                if required:
                    yield "%s: no %r" % (where, key)
            elif isinstance(ev[key], bool) or not isinstance(ev[key], kind):
                yield "%s: %r is %r" % (where, key, ev[key])
        if ev["ph"] == "M":
            if ev.get("name") not in ("process_name", "thread_name") or not isinstance(
                ev.get("args", {}).get("name"), str
            ):
                yield "%s: metadata without a name: %r" % (where, ev)
            if ev.get("name") == "thread_name":
                named.add(ev.get("tid"))
            continue
        firings += 1
        used.add(ev.get("tid"))
        if isinstance(ev.get("dur"), NUMBER) and ev["dur"] < 0:
            yield "%s: negative dur" % where
        if isinstance(ev.get("ts"), NUMBER) and ev["ts"] < 0:
            yield "%s: negative ts" % where
        args = ev.get("args", {})
        for key in FIRING_ARGS:
            if not isinstance(args.get(key), str):
                yield "%s: args.%s missing or not a string" % (where, key)
    if firings == 0:
        yield "no firings"
    if named != set(range(workers)):
        yield "thread names for workers %s, want 0..%d" % (sorted(named), workers - 1)
    if not used <= named:
        yield "firings on unnamed threads %s" % sorted(used - named)


def main():
    with open(sys.argv[1]) as f:
        trace = json.load(f)
    bad = list(problems(trace, int(sys.argv[2])))
    for p in bad:
        print("%s: %s" % (sys.argv[1], p))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

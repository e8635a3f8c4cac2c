#!/usr/bin/env bash
# test/debug/dot_html.sh TFVM TMP — `tfvm dot --html`: the page for fib (a
# fixed .tfasm: its node data word for word), primes and an ONNX model is
# self-contained (nothing fetched), holds every instruction as an SVG node
# and in its data; with Chromium installed, the page runs in headless
# Chromium: it finds every node, shows one, folds a cluster, and leaves a
# screenshot in build/artifacts/ (not committed). Needs Graphviz's dot.
set -u
TFVM=$1 TMP=$2
status=0
no() { echo "FAIL (dot --html): $*"; status=1; }
ART=build/artifacts
mkdir -p "$ART"

# check FILE.html N: a page of N nodes, nothing outside it
check() {
    python3 - "$1" "$2" <<'PY' || no "$1: $(cat "$1.why" 2>/dev/null)"
import json, re, sys
path, n = sys.argv[1], int(sys.argv[2])
page = open(path).read()
m = re.search(r'<script id="tfvm-data" type="application/json">(.*?)</script>', page, re.S)
why = []
if not page.startswith("<!DOCTYPE html>"):
    why.append("no doctype")
if not m:
    why.append("no data")
else:
    d = json.loads(m.group(1))
    if sorted(d["nodes"]) != sorted("i%d" % i for i in range(n)):
        why.append("data for %d nodes, want %d" % (len(d["nodes"]), n))
if page.count('class="node"') != n:
    why.append("%d SVG nodes, want %d" % (page.count('class="node"'), n))
for outside in ("<link", " src=", "href=\"http", "@import", "url("):
    if outside in page:
        why.append("refers outside: " + outside)
open(path + ".why", "w").write("; ".join(why))
sys.exit(1 if why else 0)
PY
}
insts() { "$TFVM" info "$@" | sed -n 's/^instructions: \([0-9]*\) .*/\1/p'; }

"$TFVM" dot --html "$TMP/fib.html" test/debug/fib.tfasm || no "dot --html fib.tfasm failed"
check "$TMP/fib.html" "$(insts test/debug/fib.tfasm)"
got=$(python3 -c "import json, re, sys
page = open('$TMP/fib.html').read()
d = json.loads(re.search(r'<script id=\"tfvm-data\" type=\"application/json\">(.*?)</script>', page, re.S).group(1))
print(json.dumps(d['nodes']['i6'], sort_keys=True)); print(json.dumps(d['regions']))")
want='{"consumers": ["fib.sub_12_34 (output 0, to its port 0)", "fib.sub_12_47 (output 0, to its port 0)", "fib.c1 (output 1, to its port 0)"], "facts": "i32; i32", "inputs": ["main.fib_2_n (its output 0, to port 0)", "fib.fib_0_n (its output 0, to port 0)", "fib.fib_1_n (its output 0, to port 0)", "fib.less_equal_12_10 (its output 0, to port 1)"], "kind": "func", "name": "n_sw", "op": "SWITCH", "r": 1, "region": "fib", "source": "12:5", "synopsis": "(data, pred) -> data live on output pred, dead on the other", "text": "n_sw = SWITCH prune_false prune_true (main.fib_2_n | fib_0_n | fib_1_n, less_equal_12_10) @12:5"}
[{"name": "main", "kind": "entry", "parent": -1}, {"name": "fib", "kind": "func", "parent": -1}]'
[ "$got" = "$want" ] || no "fib's node n_sw: '$got', want '$want'"

"$TFVM" dot --html "$TMP/primes.html" examples/primes.tfg || no "dot --html primes failed"
check "$TMP/primes.html" "$(insts examples/primes.tfg)"
M=test/onnx/models/nested_loop.onnx
"$TFVM" dot --html "$TMP/onnx.html" "$M" || no "dot --html $M failed"
check "$TMP/onnx.html" "$(insts "$M")"
out=$("$TFVM" dot --html /no/such/dir/x.html examples/fib.tfg 2>&1)
[ "$out" = "tfvm: /no/such/dir/x.html: cannot create the file" ] || no "dot --html to a bad path: '$out'"

# In a browser: the script ran over the real SVG.
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$browser" ] && [ -z "${SAN:-}" ]; then
    run() { timeout 120 "$browser" --headless --no-sandbox --disable-gpu --user-data-dir="$TMP/chrome" "$@" 2>/dev/null; }
    n=$(insts examples/primes.tfg)
    run --dump-dom "file://$TMP/primes.html#node=i1&fold=4" >"$TMP/dom.html"
    body=$(grep -o '<body[^>]*>' "$TMP/dom.html")
    case "$body" in *"data-nodes=\"$n\""*'data-folded="4"'* | *'data-folded="4"'*"data-nodes=\"$n\""*) ;;
    *) no "primes.html in Chromium: '$body'" ;; esac
    grep -q '<div id="node"><h2>main\.' "$TMP/dom.html" || no "primes.html in Chromium shows no node"
    run --window-size=1400,900 --screenshot="$PWD/$ART/dot_html_primes.png" "file://$TMP/primes.html#node=i1" >/dev/null
    run --window-size=1400,900 --screenshot="$PWD/$ART/dot_html_onnx.png" "file://$TMP/onnx.html" >/dev/null
    [ -s "$ART/dot_html_primes.png" ] && [ -s "$ART/dot_html_onnx.png" ] || no "no screenshots in $ART"
else
    echo "debug: SKIP dot --html in Chromium (not installed: apt-get install chromium)"
fi
exit $status

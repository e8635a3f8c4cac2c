#!/usr/bin/env bash
# test/e2e/profile.sh TFVM TMP — `tfvm profile` beyond one command: the
# --trace timeline checked against the Trace Event Format (trace_check.py)
# for an ONNX model and for primes on two workers, each firing's recorded
# tag and input types, the --json report's fields, and columns that widen
# for long instruction names.
set -u
TFVM=$1 TMP=$2
status=0
no() { echo "FAIL (profile): $*"; status=1; }
py() { python3 -c "$@"; }

# An ONNX model's timeline: valid, and each firing says what it took.
py "import struct
# x: f32[2, 4] as .npy, version 1.0, by hand (no numpy in make test)
hdr = \"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }\"
hdr += ' ' * (63 - len(hdr) - 10) + '\n'
open('$TMP/x24.npy', 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode() + struct.pack('<8f', *range(8)))"
M=test/onnx/models/mlp.onnx
"$TFVM" profile --threads 2 --runs 2 --warmup 1 --trace "$TMP/mlp.json" "$M" "x=@$TMP/x24.npy" >"$TMP/mlp.out" 2>&1 ||
    no "profile --trace $M: $(cat "$TMP/mlp.out")"
python3 test/e2e/trace_check.py "$TMP/mlp.json" 2 || no "$M: the trace is not in the Trace Event Format"
got=$(py "import json
for e in json.load(open('$TMP/mlp.json'))['traceEvents']:
    if e['ph'] == 'X' and e['name'] == 'main.fused_matmul_0_0':
        a = e['args']
        print(e['cat'], '|', a['op'], '|', a['tag'], '|', a['inputs'], '|', a['instruction'][:38])")
want="FUSED_MATMUL | FUSED_MATMUL | [] | f32[2, 4], f32[4, 3], f32[3] | fused_matmul_0_0 = FUSED_MATMUL relu ("
[ "$got" = "$want" ] || no "$M: the first MatMul's firing: '$got', want '$want'"

# primes(30) on two workers: recursion in the tags (both ends of a deep one:
# '[primes@8, prime_minus@0, ... 26 more ..., test@1]'), positions as sources.
"$TFVM" profile --threads 2 --runs 2 --warmup 0 --trace "$TMP/primes.json" examples/primes.tfg 30 >"$TMP/p.out" 2>&1 ||
    no "profile --trace primes: $(cat "$TMP/p.out")"
python3 test/e2e/trace_check.py "$TMP/primes.json" 2 || no "primes: the trace is not in the Trace Event Format"
got=$(py "import json
ev = [e for e in json.load(open('$TMP/primes.json'))['traceEvents'] if e['ph'] == 'X']
deep = [e for e in ev if e['args']['tag'].startswith('[primes@8, prime_minus@0, ') and ' more ..., test@' in e['args']['tag'] and
        e['name'] == 'test.mod_39_17' and 'dead' not in e['args']['inputs']]
print(len(ev) > 1000, bool(deep), deep and deep[0]['args']['source'], deep and deep[0]['args']['inputs'])")
[ "$got" = "True True 39:17 i32, i32" ] || no "primes trace: '$got'"

# --json: one object; shares add up to 1; percentiles ordered.
"$TFVM" profile --json --threads 1 --runs 3 --warmup 0 examples/primes.tfg 20 >"$TMP/p.json" 2>&1 ||
    no "profile --json: $(cat "$TMP/p.json")"
got=$(py "import json
r = json.load(open('$TMP/p.json'))
ops = r['opcodes']
share = sum(o['share'] for o in ops)
ordered = all(o['ns']['p50'] <= o['ns']['p90'] <= o['ns']['p99'] for o in ops)
real = r['real_s']
print(r['file'], r['args'], r['entry'], r['workers'], r['runs'], r['one_run']['firings'],
      abs(share - 1) < 1e-3, ordered, real['p50'] == real['median'] <= real['p90'] <= real['p99'],
      len(r['instructions']), sorted(r['instructions'][0]))")
want="examples/primes.tfg ['20'] main 1 3 $("$TFVM" run --stats examples/primes.tfg 20 2>&1 >/dev/null |
    sed -n 's/^stats: fired \([0-9]*\),.*/\1/p') True True True 10 ['firings_per_run', 'instruction', 'ns_per_firing', 'opcode', 'share', 'source']"
[ "$got" = "$want" ] || no "profile --json: '$got', want '$want'"

# Text: percentile lines and columns that fit the longest name.
sed -n '4s/[0-9.]\{11\}/T/gp' "$TMP/mlp.out" >"$TMP/p4"
[ "$(cat "$TMP/p4")" = "  real p50 T s, p90 T s, p99 T s (of all 2 measured runs)" ] ||
    no "profile: the percentile line: '$(cat "$TMP/p4")'"
name=a_name_longer_than_the_column_of_twenty_eight
printf 'entry main(n: i32) -> (r: i32) {\n    %s = ARG 0\n    RESULT 0 (%s)\n}\n' $name $name >"$TMP/long.tfasm"
"$TFVM" profile --threads 1 --runs 1 --warmup 0 "$TMP/long.tfasm" 1 >"$TMP/long.out" 2>&1
# (the two instructions' order is their shares', which one run's timing decides)
got=$(grep -A3 '^top 2 instructions:' "$TMP/long.out" | tail -3)
hdr=$(echo "$got" | head -1) line=$(echo "$got" | grep "^  main\.$name ")
want_head="  instruction                                        opcode          firings/run   share  ns/firing  source"
want_line="  main.$name ARG                       1 "
[ "$hdr" = "$want_head" ] && [ "${line:0:${#want_line}}" = "$want_line" ] ||
    no "profile columns for a long name: '$got'"
exit $status

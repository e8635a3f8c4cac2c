#!/usr/bin/env bash
# test/layers.sh — make layers: the library's layers only point down
# (docs/architecture.md). Reads every #include "..." of the library and the
# tools and fails when a file includes a header of a layer that its own layer
# may not use, unless test/layers.allow lists that include (with its reason).
# An allowlist line that no longer matches an include fails too, so the list
# only shrinks.
#   bash test/layers.sh            check (exit 1 on a violation or a stale line)
#   bash test/layers.sh --list     print every violation, allowed or not
set -euo pipefail
cd "$(dirname "$0")/.."

# layer: the layers it may include besides itself and include/ (the public
# headers, which every layer may use). Lowest first.
declare -A MAY=(
    [util]=""
    [isa]="util"
    [devices]="util isa"
    [scheduler]="util isa devices"
    [loader]="util isa"
    [analysis]="util isa devices loader"
    [vm]="util isa devices scheduler loader"
    [compiler]="util isa devices loader analysis"
    [import]="util isa loader analysis compiler gen"
    [front]="util isa loader analysis compiler import"
    [tools]=""
)

layer_of() { # a path relative to the repository root -> its layer (or "")
    case $1 in
    include/*) echo public ;;
    util/*) echo util ;;
    isa/*) echo isa ;;
    devices/*) echo devices ;;
    scheduler/*) echo scheduler ;;
    loader/*) echo loader ;;
    analysis/*) echo analysis ;;
    vm/*) echo vm ;;
    compiler/*) echo compiler ;;
    import/*) echo import ;;
    front/*) echo front ;;
    tools/*) echo tools ;;
    *.pb-c.h) echo gen ;; # protoc-c's output, under $(BUILD)/gen
    *) echo "" ;;
    esac
}

# Where #include "name" in file resolves: the file's own directory first,
# then the -I paths of the Makefile (., include).
resolve() {
    local dir=$(dirname "$1") name=$2
    if [ -e "$dir/$name" ]; then
        realpath -m --relative-to=. "$dir/$name"
    elif [ -e "$name" ]; then
        echo "$name"
    elif [ -e "include/$name" ]; then
        echo "include/$name"
    else
        echo "$name"
    fi
}

violations=()
for f in $(find util isa devices scheduler loader vm compiler import front tools \
    -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.def' | sort); do
    from=$(layer_of "$f")
    while IFS= read -r name; do
        to_path=$(resolve "$f" "$name")
        to=$(layer_of "$to_path")
        [ -z "$to" ] || [ "$to" = public ] || [ "$to" = "$from" ] && continue
        case " ${MAY[$from]} " in *" $to "*) continue ;; esac
        violations+=("$f $to_path")
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

if [ "${1:-}" = --list ]; then
    printf '%s\n' "${violations[@]}"
    exit 0
fi

# test/layers.allow: "file included-header  # why" per line
mapfile -t allowed < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' test/layers.allow | awk '{print $1" "$2}')
status=0
for v in "${violations[@]}"; do
    ok=0
    for a in "${allowed[@]}"; do [ "$v" = "$a" ] && ok=1 && break; done
    if [ $ok = 0 ]; then
        set -- $v
        echo "layers: $1 ($(layer_of "$1")) includes $2 ($(layer_of "$2")): $(layer_of "$1") may use only: include ${MAY[$(layer_of "$1")]}" >&2
        status=1
    fi
done
for a in "${allowed[@]}"; do
    ok=0
    for v in "${violations[@]}"; do [ "$v" = "$a" ] && ok=1 && break; done
    if [ $ok = 0 ]; then
        echo "layers: test/layers.allow: '$a' is no longer included: delete the line" >&2
        status=1
    fi
done
[ $status = 0 ] && echo "layers: ${#violations[@]} known exceptions (test/layers.allow), no new ones"
exit $status

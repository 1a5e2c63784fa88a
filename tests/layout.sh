#!/usr/bin/env bash
# layout.sh - the structure rules of docs/architecture.md, checked on the tree
# (run by tests/run.sh; `tests/layout.sh` alone prints what breaks them):
#   layers   an internal header of src/<layer>/ is included only from its own
#            layer or one above it (os < demux < net < pool < model < server.c);
#   shipped  nothing under src/, include/, apps/, tools/ or examples/ includes
#            a file of tests/;
#   length   a .c or .h of src/ or apps/ over 800 lines says in its opening
#            comment why its length is one role ("Over 800 lines as one role");
#   map      every file path and every identifier that docs/architecture.md
#            names in backquotes exists in the tree.
# Prints one line per breach and exits 1 if there is any.
set -u
cd "$(dirname "$0")/.."

bad=0
breach() {
    echo "layout: $*"
    bad=1
}

# layers: rank of each layer; a file may include a layer of rank <= its own.
declare -A rank=([os]=0 [demux]=1 [net]=2 [pool]=3 [model]=4)
for f in src/*/*.[ch]; do
    layer=${f#src/}
    layer=${layer%%/*}
    mine=${rank[$layer]:-}
    if [ -z "$mine" ]; then
        breach "$f: src/$layer/ is not a layer of docs/architecture.md"
        continue
    fi
    while IFS= read -r inc; do
        to=${inc%%/*}
        theirs=${rank[$to]:-}
        [ -n "$theirs" ] || continue
        [ "$theirs" -le "$mine" ] || breach "$f includes $inc: $layer/ may not depend on $to/"
    done < <(sed -n 's/^#include "\([a-z]*\/[^"]*\)".*/\1/p' "$f")
done

# shipped: test code stays in tests/.
while IFS= read -r hit; do
    breach "shipped code includes test code: $hit"
done < <(grep -rnE '^#include "([^"]*/)?(tests/[^"]*|support/[^"]*|support\.h|services\.h|httpd_client\.h|guard\.h)"' \
    src include apps tools examples 2>/dev/null)

# length
for f in $(find src apps -name '*.[ch]' | sort); do
    n=$(wc -l <"$f")
    [ "$n" -le 800 ] && continue
    head -n 30 "$f" | grep -q 'Over 800 lines as one role' ||
        breach "$f: $n lines, and its header does not say why its length is one role"
done

# map: backquoted paths and identifiers of docs/architecture.md.
map=docs/architecture.md
tree=(src include apps tests examples tools bench fuzz Makefile mk scripts)
while IFS= read -r tok; do
    case $tok in
    */* | *.c | *.h | *.md)
        # A path, or a bare file name of src/ or apps/ ("handle_set_poll.c").
        path=${tok%%[ (]*}
        path=${path//\"/}
        if [[ $path == */* ]]; then
            [ -e "${path#/}" ] || [ -e "docs/${path#/}" ] || [ -e "src/${path#/}" ] || breach "$map names $path, which does not exist"
        else
            [ -n "$(find src apps include tests examples -name "$path" -print -quit)" ] ||
                breach "$map names $path, which no folder holds"
        fi
        ;;
    *)
        # An identifier: a function, type, test or field name.
        [[ $tok =~ ^[A-Za-z_][A-Za-z0-9_]*(\(\))?$ ]] || continue
        id=${tok%()}
        [[ $id == *_* ]] || continue
        grep -rqw -- "$id" "${tree[@]}" 2>/dev/null || breach "$map names $id, found nowhere in the code"
        ;;
    esac
done < <(grep -o '`[^`]*`' "$map" | tr -d '`' | sort -u)

exit $bad

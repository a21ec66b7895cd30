#!/bin/sh
# test_demo_paths -- every build/... path that scripts/demo (README's first
# command) runs or prints exists in the build: moving a binary (tpfsd went to
# build/fsd/fuse/ with the layer folders) once left the demo pointing at a
# file that was no longer built.  Arguments: SOURCE_ROOT BUILD_ROOT.
set -u
src=$1 bld=$2
fail=0 n=0
for p in $(grep -o 'build/[A-Za-z0-9_./-]*[A-Za-z0-9_]' "$src/scripts/demo" | sort -u); do
    n=$((n + 1))
    if [ ! -e "$bld/${p#build/}" ]; then
        echo "FAIL: scripts/demo names $p, which $bld does not have"
        fail=1
    fi
done
# The PATH line it prints must reach tpfsd and the tx tools.
dirs=$(grep -o 'export PATH=[^ ]*' "$src/scripts/demo" | sed 's/export PATH=//; s/\\\$PATH//; s/\$PATH//; s#\$root/build#'"$bld"'#g' | tr ':' ' ')
for cmd in tpfsd tpfs txbegin txcommit txabort txrun txstatus; do
    found=0
    for d in $dirs; do [ -x "$d/$cmd" ] && found=1; done
    [ $found -eq 1 ] || { echo "FAIL: the PATH scripts/demo prints ($dirs) has no $cmd"; fail=1; }
done
[ $n -gt 0 ] || { echo "FAIL: no build/ path found in scripts/demo"; fail=1; }
[ $fail -eq 0 ] && echo "demo_paths: $n build paths of scripts/demo exist; its PATH reaches tpfsd and the tools"
exit $fail

#!/bin/sh
# test_setup -- scripts/setup waits for another apt-get's lock instead of
# failing (issue 25, 11): with a package reported missing, every apt-get it
# runs carries DPkg::Lock::Timeout.  apt-get, dpkg-query and modprobe are
# stand-ins on PATH that only record their arguments: nothing is installed.
# Argument: the source tree.
set -u
src=$1
d=$(mktemp -d /tmp/tpfs-setup-XXXXXX)
trap 'rm -rf "$d"' EXIT
cat > "$d/dpkg-query" <<'S'
#!/bin/sh
case "$*" in *rcs*) exit 1 ;; esac   # rcs: missing
printf 'install ok installed'
S
cat > "$d/apt-get" <<'S'
#!/bin/sh
echo "apt-get $*" >> "$(dirname "$0")/log"
S
printf '#!/bin/sh\nexit 0\n' > "$d/modprobe"
chmod +x "$d/dpkg-query" "$d/apt-get" "$d/modprobe"
out=$(PATH="$d:$PATH" bash "$src/scripts/setup" 2>&1) || { echo "FAIL: scripts/setup exited $?: $out"; exit 1; }
[ -f "$d/log" ] || { echo "FAIL: apt-get was not run for the missing package: $out"; exit 1; }
n=$(wc -l < "$d/log")
w=$(grep -c -- '-o DPkg::Lock::Timeout=[1-9]' "$d/log")
grep -q 'apt-get .*install .*rcs' "$d/log" || { echo "FAIL: rcs not installed: $(cat "$d/log")"; exit 1; }
[ "$n" -ge 2 ] && [ "$w" -eq "$n" ] || { echo "FAIL: $w of $n apt-get runs wait for the lock: $(cat "$d/log")"; exit 1; }
echo "setup: $n apt-get runs, each waits for the dpkg lock"

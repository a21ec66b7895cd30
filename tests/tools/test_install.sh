#!/bin/sh
# test_install -- `meson install` puts everything where a user needs it
# (issue 25, 1), checked in a temporary DESTDIR: the system is not touched.
#
#   test_install.sh BUILDDIR
#
# Asserts that these exist under DESTDIR, at the paths the build's options
# give (prefix, bindir, libdir, includedir, mandir, mount_helper_dir):
#   bin/tpfs bin/tpfsd bin/txbegin bin/txcommit bin/txabort bin/txrun
#   bin/txstatus (executable); the mount helper (executable, /sbin by
#   default, with the install's bindir written into it, and finding an
#   installed tpfsd); lib/libtpfs_tx.so -> .so.0 -> .so.0.x.y and the
#   static library; include/tpfs/tpfs_tx.h; pkgconfig/tpfs_tx.pc (with the
#   prefix); man1 (the five tx tools), man3 (libtpfs_tx), man8 (tpfs,
#   tpfsd).  Then a small client program that includes the installed header
#   is compiled with the .pc file's flags, linked dynamically against the
#   installed library, and run: it must load libtpfs_tx.so.0 from DESTDIR.
set -u
build=$(cd "$1" && pwd)
fail=0
say() { echo "FAIL: $*"; fail=1; }

d=$(mktemp -d) || exit 1
log=$build/meson-logs/install-log.txt
[ -f "$log" ] && cp "$log" "$d.install-log"
trap 'rm -rf "$d"; [ -f "$d.install-log" ] && mv "$d.install-log" "$log"' EXIT

# The build's directories, as meson was configured.
opt() {
	meson introspect "$build" --buildoptions |
		python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}
prefix=$(opt prefix); bindir=$(opt bindir); libdir=$(opt libdir)
incdir=$(opt includedir); mandir=$(opt mandir); helperdir=$(opt mount_helper_dir)
[ -n "$helperdir" ] || helperdir=$(opt sbindir)
abs() { case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }
B=$d$(abs "$bindir"); L=$d$(abs "$libdir"); I=$d$(abs "$incdir"); M=$d$(abs "$mandir"); H=$d$(abs "$helperdir")

out=$(meson install -C "$build" --no-rebuild --destdir "$d" 2>&1) || { echo "$out"; say "meson install --destdir failed"; exit 1; }

for t in tpfs tpfsd txbegin txcommit txabort txrun txstatus; do
	[ -f "$B/$t" ] && [ -x "$B/$t" ] || say "$B/$t: not installed (or not executable)"
done
[ -x "$H/mount.fuse.tpfs" ] || say "$H/mount.fuse.tpfs: not installed (or not executable)"
grep -q "^	bindir='$(abs "$bindir")'" "$H/mount.fuse.tpfs" 2>/dev/null ||
	say "$H/mount.fuse.tpfs: the install's bindir $(abs "$bindir") is not written into it"
# Run as mount(8) would in fake mode, with the installed tpfsd on the PATH.
found=$(PATH=$B:/usr/bin:/bin "$H/mount.fuse.tpfs" -f /srv/s /mnt/m -o defaults,sync 2>&1)
case $found in
*"tpfsd /srv/s /mnt/m -o sync") ;;
*) say "mount.fuse.tpfs -f: $found" ;;
esac
ver=$(meson introspect "$build" --projectinfo | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
[ -L "$L/libtpfs_tx.so" ] || say "$L/libtpfs_tx.so: not a symbolic link"
[ -L "$L/libtpfs_tx.so.0" ] || say "$L/libtpfs_tx.so.0: not a symbolic link"
[ -f "$L/libtpfs_tx.so.$ver" ] || say "$L/libtpfs_tx.so.$ver: not installed"
[ "$(readlink -f "$L/libtpfs_tx.so")" = "$(readlink -f "$L/libtpfs_tx.so.$ver")" ] || say "libtpfs_tx.so does not lead to .so.$ver"
[ -f "$L/libtpfs_tx.a" ] || say "$L/libtpfs_tx.a: not installed"
[ -f "$I/tpfs/tpfs_tx.h" ] || say "$I/tpfs/tpfs_tx.h: not installed"
pc=$L/pkgconfig/tpfs_tx.pc
if [ -f "$pc" ]; then
	grep -qx "prefix=$prefix" "$pc" || say "$pc: prefix is not $prefix"
else
	say "$pc: not installed"
fi
for p in man1/txbegin.1 man1/txcommit.1 man1/txabort.1 man1/txrun.1 man1/txstatus.1 man3/libtpfs_tx.3 \
	 man8/tpfs.8 man8/tpfsd.8; do
	[ -f "$M/$p" ] || say "$M/$p: not installed"
done
grep -q '@VERSION@' "$M"/man*/* && say "a man page still says @VERSION@"

# A client program, built the way libtpfs_tx(3) says, against DESTDIR.
if [ -f "$pc" ] && command -v cc >/dev/null && command -v pkg-config >/dev/null; then
	cat > "$d/client.c" <<'C'
#include <stdio.h>
#include <tpfs_tx.h>
int main(void)
{
	tpfs_tx_mounts *m = NULL;
	char msg[TPFS_TX_MSG_MAX];
	int rc = tpfs_tx_mounts_read(NULL, &m, msg, sizeof msg);
	if (rc) { fprintf(stderr, "%s\n", msg); return 1; }
	printf("tpfs mounts: %zu\n", tpfs_tx_mounts_count(m));
	tpfs_tx_mounts_free(m);
	return 0;
}
C
	flags=$(PKG_CONFIG_LIBDIR=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=$d pkg-config --cflags --libs tpfs_tx) ||
		say "pkg-config --cflags --libs tpfs_tx failed"
	if cc -o "$d/client" "$d/client.c" $flags 2>"$d/cc.err"; then
		ldd=$(LD_LIBRARY_PATH=$L ldd "$d/client")
		printf '%s\n' "$ldd" | grep -q "libtpfs_tx.so.0 => $L/libtpfs_tx.so.0" ||
			say "the client does not load $L/libtpfs_tx.so.0: $ldd"
		run=$(LD_LIBRARY_PATH=$L "$d/client" 2>&1) || say "the client failed: $run"
	else
		say "the client does not build with $flags: $(cat "$d/cc.err")"
	fi
else
	say "no .pc file, cc or pkg-config: the client was not built"
fi

[ $fail -eq 0 ] && echo "install: every file in $(abs "$bindir"), $helperdir, $(abs "$libdir"), $(abs "$incdir"), $(abs "$mandir"); a client links and runs"
exit $fail

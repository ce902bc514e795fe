#!/usr/bin/env bash
# The fieldprof package in a throwaway Debian 12 root, with real dpkg and
# apt (issue #16): built by deploy/package.sh, installed into a debootstrap
# chroot (minbase, from this machine's own Debian mirror), never into this
# machine. In that root:
#   1. installed non-interactively, not preseeded: the answer is no, a user
#      who consents is still not measured, and fieldprof optin refuses;
#   2. answered yes (dpkg-reconfigure): the user opts in, a login shell's
#      programs leave records, a setuid program is not measured, and the
#      agent uploads the records to the aggregator installed from the other
#      package (an older build of it), run as its unit runs it, on loopback
#      in a network namespace of the test's own;
#   2b. the aggregator package upgraded to this build: its data is kept;
#   3. the user opts out: their spool and agent state are gone and the next
#      program leaves nothing;
#   4. purge of both: the root's file list equals the one before install,
#      apart from apt's and dpkg's own logs and caches and the user's home;
#   5. a fresh install preseeded yes: the user opts in and is measured;
#      purged again, the root is as before.
# Prints each step; exits non-zero at the first that fails. The bare root is
# cached in /var/cache/fieldprof-test (remove it to start afresh).
#
#   deploy/test-package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# Not root: skipped (77, as ctest's SKIP_RETURN_CODE says).
[[ $(id -u) -eq 0 ]] || { echo "test-package: needs root (chroot, mounts): skipped"; exit 77; }
work="$(mktemp -d /tmp/fieldprof-pkgtest-XXXXXX)"
# An older aggregator package (for the upgrade), then this build's packages.
. deploy/test-packages-built.sh
./deploy/build.sh fieldprof >/dev/null

step() { printf '\n== %s\n' "$*"; }
fail() { echo "test-package: FAILED: $*"; exit 1; }

root="$work/root"
mounted=()
cleanup() {
  set +e
  # Every process in the test's network namespace (the aggregator), then it.
  if [[ -n "${ns_pid:-}" ]]; then
    local ns p
    ns="$(readlink "/proc/$ns_pid/ns/net" 2>/dev/null || true)"
    for p in /proc/[0-9]*; do
      [[ -n "$ns" && "$(readlink "$p/ns/net" 2>/dev/null)" == "$ns" ]] && kill -KILL "${p#/proc/}" 2>/dev/null
    done
    kill -KILL "$ns_pid" 2>/dev/null
  fi
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

step "a bare Debian 12 root (debootstrap minbase, cached)"
mirror="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
mirror="${mirror:-http://deb.debian.org/debian}"
cache=/var/cache/fieldprof-test/bookworm-minbase.tar
if [[ ! -s "$cache" ]]; then
  mkdir -p "$(dirname "$cache")" "$work/fresh"
  debootstrap --variant=minbase bookworm "$work/fresh" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
  tar -C "$work/fresh" -cf "$cache.tmp" . && mv "$cache.tmp" "$cache"
  rm -rf "$work/fresh"
fi
mkdir -p "$root" && tar -C "$root" -xf "$cache"
# The same suites as this machine (updates and security: the package was
# built against their library versions).
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
  cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/"
  rm -f "$root/etc/apt/sources.list"
fi
for m in proc dev sys; do
  mount --bind "/$m" "$root/$m"
  mounted+=("$root/$m")
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
in_root apt-get update -qq >/dev/null
useradd_out="$(in_root useradd -m -s /bin/bash vol 2>&1)" || fail "useradd: $useradd_out"
# The user's own settings: every run measured, as a test wants (the package
# leaves a volunteer's runs to the fleet's sampling).
as_vol() { chroot "$root" su - vol -c "$1"; }
as_vol 'mkdir -p ~/.config/fieldprof && printf "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\nmax_load_per_cpu = 1000\n" > ~/.config/fieldprof/runtime.conf'
listing() {  # the root's files, less what apt, dpkg and users keep for themselves
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp \
    -o -path ./home -o -path ./var/log -o -path ./var/cache -o -path ./var/lib/apt \
    -o -path ./var/lib/dpkg -o -path ./var/lib/systemd -o -path ./var/lib/ucf \
    -o -path ./run \) -prune -o -print | sort)
}
listing > "$work/before.txt"
echo "root ready: $(wc -l < "$work/before.txt") files"

step "install, non-interactive: the answer is no by default"
cp "$deb" "$root/tmp/fieldprof.deb"
in_root apt-get install -y -qq /tmp/fieldprof.deb > "$work/install.log" 2>&1 ||
  { tail -20 "$work/install.log"; fail "apt-get install"; }
in_root dpkg -L fieldprof | grep -qx /usr/include/fieldprof/points.h ||
  fail "the points SDK header is not installed"
grep -q '^participate = no$' "$root/etc/fieldprof/volunteer.conf" || fail "volunteer.conf: $(cat "$root/etc/fieldprof/volunteer.conf")"
as_vol 'ls /usr/lib > /dev/null; echo "LD_PRELOAD=[$LD_PRELOAD]"' | grep -qx 'LD_PRELOAD=\[\]' ||
  fail "the login hook set LD_PRELOAD on a machine that said no"
[[ ! -d "$root/home/vol/.local/state/fieldprof/spool" ]] || fail "a record on a machine that said no"
if as_vol 'fieldprof optin' > "$work/optin.txt" 2>&1; then fail "optin accepted on a machine that said no"; fi
grep -q "does not take part" "$work/optin.txt" || fail "optin's message: $(cat "$work/optin.txt")"
echo "nothing measured; fieldprof optin: $(head -1 "$work/optin.txt")"

step "dpkg-reconfigure: yes; the user opts in"
# The question, answered at a terminal (debconf's teletype frontend reads
# the answer from stdin); the file on disk is the default it offers.
printf 'yes\n' | chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
  dpkg-reconfigure -fteletype fieldprof > "$work/reconfigure.txt" 2>&1 ||
  { cat "$work/reconfigure.txt"; fail "dpkg-reconfigure"; }
grep -q '^participate = yes$' "$root/etc/fieldprof/volunteer.conf" || fail "volunteer.conf after reconfigure"
as_vol 'fieldprof optin' > "$work/optin.txt" 2>&1 || fail "optin: $(cat "$work/optin.txt")"
head -1 "$work/optin.txt"
as_vol 'echo "LD_PRELOAD=[$LD_PRELOAD]"; for i in 1 2 3; do ls /usr/lib > /dev/null; sort /etc/passwd > /dev/null; done'
spool="$root/home/vol/.local/state/fieldprof/spool"
records() { find "$spool" -name '*.fpr' 2>/dev/null | wc -l; }  # counted from outside the root
n="$(records)"
[[ "$n" -ge 1 ]] || fail "no record after opting in"
echo "records in the user's spool: $n"
# A setuid program: the dynamic linker ignores the preload in secure mode.
# (exec: the login shell itself was started before the hook ran.)
as_vol 'exec chfn --help > /dev/null 2>&1' || true
n2="$(records)"
[[ "$n2" == "$n" ]] || fail "a setuid program left a record ($n -> $n2)"
echo "setuid chfn: no record (still $n2)"

step "the aggregator package (an older build), its service on loopback"
# A network namespace of this test's own: the packaged aggregator listens on
# 127.0.0.1:8443 as installed, and nothing else on this machine is in the way.
unshare --net --fork --kill-child sleep 3600 > /dev/null 2>&1 &
ns_pid=$!
disown "$ns_pid"
sleep 0.2
in_ns() { nsenter --target "$ns_pid" --net "$@"; }
in_ns ip link set lo up
cp "$work/aggregator-old.deb" "$root/tmp/aggregator.deb"
in_root apt-get install -y -qq /tmp/aggregator.deb > "$work/install-agg.log" 2>&1 ||
  { tail -20 "$work/install-agg.log"; fail "apt-get install fieldprof-aggregator"; }
getent_out="$(in_root getent passwd fieldprof)" || fail "no system user fieldprof"
[[ -s "$root/etc/fieldprof/tls/cert.pem" && -s "$root/etc/fieldprof/snapshot-signing.key" ]] ||
  fail "no certificate or signing key made at install"
echo "installed $(in_root dpkg-query -W -f='${Version}' fieldprof-aggregator); user: ${getent_out%%:*}"
# Started as its unit starts it (User=fieldprof, ExecStart=...): there is no
# systemd in a chroot.
start_aggregator() {
  in_ns chroot "$root" su -s /bin/sh fieldprof -c \
    'exec /usr/sbin/fieldprof-aggregator --config /etc/fieldprof/aggregator.conf --k_anonymity 1' \
    > "$work/agg.log" 2>&1 &
  agg_pid=$!
  for _ in $(seq 100); do
    grep -q 'listening on https://127.0.0.1:8443' "$work/agg.log" && return 0
    kill -0 "$agg_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/agg.log"
  fail "the packaged aggregator did not start"
}
stop_aggregator() {  # SIGTERM to the server, as systemd stops it; it exits 0
  local ns p
  ns="$(readlink "/proc/$ns_pid/ns/net")"
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/ns/net" 2>/dev/null)" == "$ns" &&
      "$(cat "$p/comm" 2>/dev/null)" == fieldprof-aggre* ]] && kill -TERM "${p#/proc/}"
  done
  wait "$agg_pid" || { cat "$work/agg.log"; fail "the aggregator did not stop cleanly"; }
}
top() {
  in_ns ./build/tools/fieldprof top --port 8443 --ca "$root/etc/fieldprof/tls/cert.pem" --limit 5
}
start_aggregator

step "the agent uploads to it"
printf 'server = 127.0.0.1\nport = 8443\nca_file = /etc/fieldprof/tls/cert.pem\n' \
  > "$root/etc/fieldprof/agent.conf"
in_ns chroot "$root" su - vol -c 'fieldprof-agent --config /etc/fieldprof/agent.conf --once --flush' \
  > "$work/agent.txt" 2>&1 || { cat "$work/agent.txt"; fail "fieldprof-agent"; }
cat "$work/agent.txt"
sleep 1
top > "$work/top.txt" || fail "fieldprof top"
[[ "$(grep -c '^[0-9]' "$work/top.txt")" -ge 1 ]] || { cat "$work/top.txt"; fail "nothing on the aggregator"; }
head -4 "$work/top.txt"

step "upgrade the aggregator package: the data stays"
stop_aggregator
cp "$aggdeb" "$root/tmp/aggregator.deb"
in_root apt-get install -y -qq /tmp/aggregator.deb > "$work/upgrade-agg.log" 2>&1 ||
  { tail -20 "$work/upgrade-agg.log"; fail "upgrade"; }
echo "now $(in_root dpkg-query -W -f='${Version}' fieldprof-aggregator)"
start_aggregator
top > "$work/top-after.txt" || fail "fieldprof top after the upgrade"
diff "$work/top.txt" "$work/top-after.txt" || fail "the aggregator's answers changed across the upgrade"
echo "the same $(grep -c '^[0-9]' "$work/top-after.txt") APIs, the same figures"
stop_aggregator

step "the user opts out"
as_vol 'fieldprof optout' | sed 's/^/  /'
[[ ! -e "$root/home/vol/.local/state/fieldprof" ]] || fail "the agent's state is still there"
[[ ! -e "$root/home/vol/.local/state/fieldprof/spool" ]] || fail "the spool is still there"
as_vol 'ls /usr/lib > /dev/null'
[[ ! -e "$root/home/vol/.local/state/fieldprof/spool" ]] || fail "a program left a record after optout"
echo "the user's local data is gone; a program run leaves nothing"

step "purge"
in_root apt-get purge -y -qq --autoremove fieldprof fieldprof-aggregator > "$work/purge.log" 2>&1 ||
  { tail -20 "$work/purge.log"; fail "apt-get purge"; }
rm -f "$root/tmp/fieldprof.deb" "$root/tmp/aggregator.deb"
listing > "$work/after.txt"
if ! diff "$work/before.txt" "$work/after.txt" > "$work/diff.txt"; then
  cat "$work/diff.txt"
  fail "the root differs after purge"
fi
echo "the file list equals the one before install ($(wc -l < "$work/after.txt") files)"

step "a fresh install preseeded yes"
echo "fieldprof fieldprof/participate boolean true" | in_root debconf-set-selections
cp "$deb" "$root/tmp/fieldprof.deb"
in_root apt-get install -y -qq /tmp/fieldprof.deb > "$work/install2.log" 2>&1 ||
  { tail -20 "$work/install2.log"; fail "apt-get install (preseeded yes)"; }
grep -q '^participate = yes$' "$root/etc/fieldprof/volunteer.conf" || fail "preseeded yes not taken"
as_vol 'fieldprof optin' > "$work/optin.txt" 2>&1 || fail "optin: $(cat "$work/optin.txt")"
# The agent brought the fleet's sampling (1 run in 16) into the user's file:
# every run measured again, for the test.
as_vol 'sed -i -e "s/^sample_fraction = .*/sample_fraction = 1/" -e "s/^max_runs_per_minute = .*/max_runs_per_minute = 0/" -e "s/^max_load_per_cpu = .*/max_load_per_cpu = 1000/" ~/.config/fieldprof/runtime.conf'
# (A run whose chosen APIs are never called leaves only a count: several.)
as_vol 'for i in 1 2 3 4 5; do ls /usr/lib > /dev/null; sort /etc/passwd > /dev/null; done'
[[ "$(records)" -ge 1 ]] || fail "no record after opting in on a machine preseeded yes"
as_vol 'fieldprof optout' > /dev/null
in_root apt-get purge -y -qq --autoremove fieldprof > "$work/purge2.log" 2>&1 || fail "purge"
rm -f "$root/tmp/fieldprof.deb"
listing > "$work/after2.txt"
diff "$work/before.txt" "$work/after2.txt" || fail "the root differs after the second purge"
echo "preseeded yes: the user opted in and was measured; purged again, the root as before"
echo
echo "test-package: all steps passed"

#!/usr/bin/env bash
# The fieldprof package in a throwaway Debian 12 root, with real dpkg and
# apt: built by deploy/package.sh, installed into a debootstrap
# chroot (minbase, from this machine's own Debian mirror), never into this
# machine. In that root:
#   1. installed non-interactively, not preseeded: the answer is no, a user
#      who consents is still not measured, and fieldprof optin refuses;
#   2. answered yes (dpkg-reconfigure): the user opts in, a login shell's
#      programs leave records, a setuid program is not measured;
#   2a. the aggregator package (an older build) installs without a warning;
#      with it stopped, the user's programs run and the agent seals what
#      they left; the aggregator started as its unit starts it (its
#      packaged config, upload tokens on, k 5; on loopback in a network
#      namespace of the test's own); the agent again, with nothing but the
#      packages' settings: every record is counted once, nothing is set
#      aside; fieldprof top (no --ca) says what is held back until k;
#   2b. the aggregator package upgraded to this build: its data is kept;
#   2c. the same as 2a for a second user with upload tokens turned off in
#      the aggregator's config;
#   3. the user opts out: their spool and agent state are gone and the next
#      program leaves nothing;
#   4. purge of both: the root's file list equals the one before install,
#      apart from apt's and dpkg's own logs and caches and the user's home;
#   5. a fresh install preseeded yes and another aggregator: the agent's
#      config names it, the user opts in and is measured; purged again,
#      the root is as before.
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
if grep -i 'warn' "$work/install.log"; then fail "installing fieldprof warned"; fi
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
printf 'yes\n\n' | chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
  dpkg-reconfigure -fteletype fieldprof > "$work/reconfigure.txt" 2>&1 ||
  { cat "$work/reconfigure.txt"; fail "dpkg-reconfigure"; }
grep -q '^participate = yes$' "$root/etc/fieldprof/volunteer.conf" || fail "volunteer.conf after reconfigure"
grep -q 'fieldprof aggregator to upload to' "$work/reconfigure.txt" || fail "the aggregator was not asked"
grep -qx 'server = 127.0.0.1:8443' "$root/etc/fieldprof/agent.conf" ||
  fail "agent.conf: $(cat "$root/etc/fieldprof/agent.conf")"
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

step "the aggregator package (an older build): installed without a warning"
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
if grep -i 'warn' "$work/install-agg.log"; then fail "installing the aggregator warned"; fi
getent_out="$(in_root getent passwd fieldprof)" || fail "no system user fieldprof"
[[ -s "$root/etc/fieldprof/tls/cert.pem" && -s "$root/etc/fieldprof/snapshot-signing.key" ]] ||
  fail "no certificate or signing key made at install"
echo "installed $(in_root dpkg-query -W -f='${Version}' fieldprof-aggregator); user: ${getent_out%%:*}; no warning"
# Started as its unit starts it (User=fieldprof, ExecStart=...): there is no
# systemd in a chroot. Arguments after the config: for the upgrade's
# comparison only, never in the scenario of 2a and 2c.
start_aggregator() {
  # Emptied here, before the start: the background shell's own truncation
  # may come after the first look below, which then found the last
  # start's "listening" line and a fieldprof top was refused (a loaded
  # machine, the cluster tests beside it).
  : > "$work/agg.log"
  in_ns chroot "$root" su -s /bin/sh fieldprof -c \
    "exec /usr/sbin/fieldprof-aggregator --config /etc/fieldprof/aggregator.conf $*" \
    >> "$work/agg.log" 2>&1 &
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
# An aggregator's answer on its loopback, with its own certificate:
#   read_agg metric NAME    one /metrics counter
#   read_agg series         how many series /v1/apis lists
#   read_agg withheld       the series /v1/apis says are held back
read_agg() {
  in_ns python3 -c '
import json, ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[1])
get = lambda p: urllib.request.urlopen("https://127.0.0.1:8443" + p, context=ctx).read().decode()
if sys.argv[2] == "metric":
    body = get("/metrics")
    print(next(l.split()[1] for l in body.splitlines() if l.startswith(sys.argv[3] + " ")))
elif sys.argv[2] == "series":
    print(len(json.loads(get("/v1/apis?limit=100000"))["apis"]))
else:
    print(json.loads(get("/v1/apis?limit=1"))["withheld"]["series"])
' "$root/etc/fieldprof/tls/cert.pem" "$@"
}
metric() { read_agg metric "$1"; }
# The agent as the user's systemd unit runs it: the package's settings
# only, outside a login shell, so without the preload (nothing here leaves
# a record of its own while the test counts them). The same for the
# user's fieldprof commands below.
no_login() { in_ns chroot "$root" env -i PATH=/usr/bin:/bin su "$1" -c "$2"; }
agent_as() { no_login "$1" 'fieldprof-agent --config /etc/fieldprof/agent.conf --once --flush'; }
top() { no_login vol 'fieldprof top --limit 5'; }  # inside the root, as a user there: no --ca

# 2a and 2c: records made while the aggregator is down, sealed by a first
# pass, uploaded by a second once it is up; each counted once.
offline_then_online() {
  local user=$1 label=$2
  as_user "$user" 'for i in 1 2 3 4 5 6; do ls /usr/lib > /dev/null; sort /etc/passwd > /dev/null; done'
  local st=0
  agent_as "$user" > "$work/agent-$label-down.txt" 2>&1 || st=$?
  [[ $st -eq 3 ]] || { cat "$work/agent-$label-down.txt"; fail "$label: the agent with the aggregator down exited $st, not 3 (batches waiting)"; }
  local state="$root/home/$user/.local/state/fieldprof"
  local sealed records
  sealed="$(find "$state/outbox" -name '*.batch' | wc -l)"
  [[ "$sealed" -ge 1 ]] || fail "$label: nothing sealed while the aggregator was down"
  [[ "$(find "$root/home/$user/.local/state/fieldprof/spool" -name '*.fpr' 2>/dev/null | wc -l)" -eq 0 ]] ||
    fail "$label: records left in the spool after --flush"
  records="$(no_login "$user" 'fieldprof status --pending' |
    awk '/^  outbox batch / {for (i = 2; i <= NF; i++) if ($i == "records,") n += $(i - 1)} END {print n + 0}')"
  [[ "$records" -ge 1 ]] || fail "$label: no records in the sealed batches"
  echo "$label: aggregator down: $sealed batch(es) of $records records sealed, waiting"
  start_aggregator
  agent_as "$user" > "$work/agent-$label-up.txt" 2>&1 ||
    { cat "$work/agent-$label-up.txt"; fail "$label: the agent did not upload"; }
  sed 's/^/  /' "$work/agent-$label-up.txt"
  [[ -z "$(find "$state/quarantine" -type f 2>/dev/null)" ]] ||
    fail "$label: set aside: $(cat "$state"/quarantine/*.reason)"
  [[ -z "$(find "$state/outbox" -name '*.batch')" ]] || fail "$label: batches still wait"
  local merged accepted dups
  merged="$(metric fieldprof_records_merged_total)"
  accepted="$(metric fieldprof_batches_accepted_total)"
  dups="$(metric fieldprof_batches_duplicate_total)"
  [[ "$merged" == "$records" && "$accepted" == "$sealed" && "$dups" == 0 ]] ||
    fail "$label: the aggregator merged $merged records of $accepted batches ($dups duplicates); sent $records in $sealed"
  echo "$label: aggregator up: $accepted batch(es), $merged records merged, each once; none set aside"
}
as_user() { chroot "$root" su - "$1" -c "$2"; }

step "the aggregator stopped: the user's runs wait; started: counted once (tokens on)"
grep -q '^token_secret_file' "$root/etc/fieldprof/aggregator.conf" || fail "the package's config asks no tokens"
offline_then_online vol tokens
grep -q 'got a fresh one' "$work/agent-tokens-up.txt" ||
  fail "the batch sealed with no token was not given one"
top > "$work/top-k.txt" || { cat "$work/top-k.txt"; fail "fieldprof top (no --ca) on the packaged aggregator"; }
grep -q '^held back: .* sent from 1 machine so far: a series is published once 5 machines' "$work/top-k.txt" ||
  { cat "$work/top-k.txt"; fail "fieldprof top does not say what is held back until k"; }
grep '^held back' "$work/top-k.txt"
held="$(read_agg withheld)"
no_login vol 'fieldprof status' > "$work/status.txt"
grep -q '^aggregator:     127.0.0.1:8443, on this machine.*(set in /etc/fieldprof/agent.conf; dpkg-reconfigure fieldprof changes it)' "$work/status.txt" ||
  { cat "$work/status.txt"; fail "fieldprof status does not name the aggregator"; }
if grep -q 'set aside' "$work/status.txt"; then cat "$work/status.txt"; fail "status: set aside"; fi
grep '^aggregator:' "$work/status.txt"
stop_aggregator
# The figures, for the upgrade: published whatever k (a flag for this
# comparison only).
start_aggregator --k_anonymity 1
listed="$(read_agg series)"
[[ "$listed" == "$held" ]] || fail "$held series said held back at k 5, $listed listed at k 1"
echo "at k 1 the aggregator lists the $listed series it said it held back at k 5"
top > "$work/top.txt" || fail "fieldprof top"
[[ "$(grep -c '^[0-9]' "$work/top.txt")" -ge 1 ]] || { cat "$work/top.txt"; fail "nothing on the aggregator"; }
head -4 "$work/top.txt"

step "upgrade the aggregator package: the data stays"
stop_aggregator
cp "$aggdeb" "$root/tmp/aggregator.deb"
in_root apt-get install -y -qq /tmp/aggregator.deb > "$work/upgrade-agg.log" 2>&1 ||
  { tail -20 "$work/upgrade-agg.log"; fail "upgrade"; }
if grep -i 'warn' "$work/upgrade-agg.log"; then fail "upgrading the aggregator warned"; fi
echo "now $(in_root dpkg-query -W -f='${Version}' fieldprof-aggregator)"
start_aggregator --k_anonymity 1
top > "$work/top-after.txt" || fail "fieldprof top after the upgrade"
diff "$work/top.txt" "$work/top-after.txt" || fail "the aggregator's answers changed across the upgrade"
echo "the same $(grep -c '^[0-9]' "$work/top-after.txt") APIs, the same figures"
stop_aggregator

step "upload tokens off (the config's closed fleet): a second user, the same"
sed -i 's/^token_secret_file/# token_secret_file/' "$root/etc/fieldprof/aggregator.conf"
useradd_out="$(in_root useradd -m -s /bin/bash vol2 2>&1)" || fail "useradd vol2: $useradd_out"
as_user vol2 'mkdir -p ~/.config/fieldprof && printf "consent = yes\nsample_fraction = 1\nmax_runs_per_minute = 0\nmax_load_per_cpu = 1000\n" > ~/.config/fieldprof/runtime.conf'
as_user vol2 'fieldprof optin' > /dev/null || fail "vol2: optin"
offline_then_online vol2 no-tokens
if grep -q 'got a fresh one' "$work/agent-no-tokens-up.txt"; then fail "a token was asked with tokens off"; fi
stop_aggregator
as_user vol2 'fieldprof optout' > /dev/null
in_root userdel -r vol2 2>/dev/null || true
sed -i 's/^# token_secret_file/token_secret_file/' "$root/etc/fieldprof/aggregator.conf"

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
printf 'fieldprof fieldprof/participate boolean true\nfieldprof fieldprof/server string agg.example:9443\n' |
  in_root debconf-set-selections
cp "$deb" "$root/tmp/fieldprof.deb"
in_root apt-get install -y -qq /tmp/fieldprof.deb > "$work/install2.log" 2>&1 ||
  { tail -20 "$work/install2.log"; fail "apt-get install (preseeded yes)"; }
grep -q '^participate = yes$' "$root/etc/fieldprof/volunteer.conf" || fail "preseeded yes not taken"
grep -qx 'server = agg.example:9443' "$root/etc/fieldprof/agent.conf" ||
  fail "the preseeded aggregator is not in agent.conf: $(cat "$root/etc/fieldprof/agent.conf")"
if grep -i 'warn' "$work/install2.log"; then fail "installing fieldprof warned"; fi
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

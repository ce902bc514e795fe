#!/usr/bin/env bash
# Both packages under a real systemd: a Debian 12 root with
# systemd, booted with systemd-nspawn in a network namespace of its own,
# so the units run as a volunteer's and an operator's machines run them:
#   1. fieldprof-aggregator (an older build) installed: its system unit
#      starts by itself and listens on loopback;
#   2. upgraded to this build: stopped and started again by the package
#      scripts, its data kept;
#   3. fieldprof installed preseeded yes; a user logs in (a logind session)
#      and opts in: the agent runs as that user's systemd service, and
#      the records of the user's programs reach the aggregator;
#   4. the user opts out: the service stops and is disabled, nothing more
#      is uploaded;
#   5. another user opted in; the fieldprof package upgraded: that user's
#      agent restarts on the new binary; removed: it is stopped by the
#      package, not left behind, and a program started in that user's
#      session from before the removal loads no missing library;
#   6. the aggregator package removed: its service stops cleanly (SIGTERM,
#      exit 0), and the machine shuts down cleanly.
# Prints each step; exits non-zero at the first that fails. The root (a
# debootstrap minbase with systemd) is cached in /var/cache/fieldprof-test.
# The packages are copied into /srv (the booted machine has /tmp of its own).
#
#   deploy/test-systemd.sh
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) -eq 0 ]] || { echo "test-systemd: needs root (systemd-nspawn): skipped"; exit 77; }
command -v systemd-nspawn > /dev/null ||
  { echo "test-systemd: no systemd-nspawn (deploy/install-deps.sh installs it): skipped"; exit 77; }
work="$(mktemp -d /tmp/fieldprof-systemd-XXXXXX)"
root="$work/root"

step() { printf '\n== %s\n' "$*"; }
fail() {
  echo "test-systemd: FAILED: $*"
  if [[ -n "${leader:-}" ]]; then
    echo "--- the container's journal, last lines:"
    box journalctl --no-pager -n 40 2>/dev/null || true
  fi
  exit 1
}
cleanup() {
  set +e
  if [[ -n "${nspawn_pid:-}" ]] && kill -0 "$nspawn_pid" 2>/dev/null; then
    kill -TERM "$nspawn_pid"  # systemd-nspawn asks the container to power off
    for _ in $(seq 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$nspawn_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# An older aggregator package (for the upgrade), then this build's packages.
. deploy/test-packages-built.sh

step "a Debian 12 root with systemd (debootstrap minbase + systemd, cached)"
mirror="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
mirror="${mirror:-http://deb.debian.org/debian}"
base=/var/cache/fieldprof-test/bookworm-minbase.tar
cache=/var/cache/fieldprof-test/bookworm-systemd.tar
mkdir -p /var/cache/fieldprof-test "$root"
in_chroot() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
with_mounts() {  # with_mounts COMMAND...: the chroot's /proc, /dev, /sys for one command
  local m rc=0
  for m in proc dev sys; do mount --bind "/$m" "$root/$m"; done
  "$@" || rc=$?
  for m in sys dev proc; do umount -l "$root/$m"; done
  return "$rc"
}
if [[ ! -s "$cache" ]]; then
  if [[ ! -s "$base" ]]; then
    debootstrap --variant=minbase bookworm "$root" "$mirror" > "$work/debootstrap.log" 2>&1 ||
      { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
  else
    tar -C "$root" -xf "$base"
  fi
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/"
    rm -f "$root/etc/apt/sources.list"
  fi
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  with_mounts in_chroot sh -c 'apt-get update -qq && apt-get install -y -qq systemd systemd-sysv dbus libpam-systemd' \
    > "$work/systemd-install.log" 2>&1 || { tail -20 "$work/systemd-install.log"; fail "installing systemd"; }
  tar -C "$root" -cf "$cache.tmp" . && mv "$cache.tmp" "$cache"
else
  tar -C "$root" -xf "$cache"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The packages' dependencies come from the mirror now; the booted machine
# has no network but its own loopback, and installs them from apt's cache.
cp "$deb" "$root/srv/fieldprof.deb"
cp "$aggdeb" "$root/srv/aggregator.deb"
cp "$work/aggregator-old.deb" "$root/srv/aggregator-old.deb"
with_mounts in_chroot sh -c 'apt-get update -qq && apt-get install -y -qq --download-only /srv/fieldprof.deb /srv/aggregator.deb /srv/aggregator-old.deb' \
  > "$work/download.log" 2>&1 || { tail -20 "$work/download.log"; fail "downloading the dependencies"; }
in_chroot useradd -m -s /bin/bash vol
in_chroot useradd -m -s /bin/bash vol2
echo "root ready ($(du -sm "$root" | cut -f1) MiB)"

step "boot it (systemd-nspawn, a network namespace of its own)"
systemd-nspawn --quiet -D "$root" -b --private-network --register=no --keep-unit \
  -M "fieldprof-test-$$" --console=pipe > "$work/boot.log" 2>&1 < /dev/null &
nspawn_pid=$!
leader=""
for _ in $(seq 300); do
  leader="$(pgrep -P "$nspawn_pid" -x systemd || true)"
  [[ -n "$leader" ]] && break
  kill -0 "$nspawn_pid" 2>/dev/null || { cat "$work/boot.log"; fail "systemd-nspawn exited"; }
  sleep 0.1
done
[[ -n "$leader" ]] || fail "no systemd in the container"
# A command inside the booted machine (all its namespaces, a clean
# environment).
box() { nsenter --target "$leader" --all env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }
state=""
for _ in $(seq 600); do  # starting, then running (or degraded: a unit failed)
  state="$(box systemctl is-system-running 2>/dev/null || true)"
  [[ "$state" == running || "$state" == degraded ]] && break
  sleep 0.2
done
[[ "$state" == running ]] || { box systemctl --failed --no-pager; fail "the machine is $state"; }
echo "systemd $(box systemctl --version | awk 'NR==1 {print $2}') is $state"
# A login shell of a user, as a login makes it: PAM opens a logind
# session, which starts that user's systemd instance.
as_user() { box su - "$1" -c "$2"; }

wait_listening() {  # the aggregator's journal says it listens (since $1, a cursor time)
  for _ in $(seq 150); do
    box journalctl -u fieldprof-aggregator --since "$1" --no-pager -o cat 2>/dev/null |
      grep -q 'listening on https://127.0.0.1:8443' && return 0
    sleep 0.2
  done
  box journalctl -u fieldprof-aggregator --no-pager -n 20
  fail "the aggregator's service does not listen"
}
top() { box fieldprof top --port 8443 --ca /etc/fieldprof/tls/cert.pem --limit 5; }

step "fieldprof-aggregator 0.0.9-1: its unit starts at install"
# One machine sends here, so its aggregator publishes what one machine
# sends (k-anonymity 1, the default being 5): a drop-in, as an operator
# would add one.
box sh -c 'mkdir -p /etc/systemd/system/fieldprof-aggregator.service.d &&
  printf "[Service]\nExecStart=\nExecStart=/usr/sbin/fieldprof-aggregator --config /etc/fieldprof/aggregator.conf --k_anonymity 1\n" \
    > /etc/systemd/system/fieldprof-aggregator.service.d/one-machine.conf'
since="$(box date '+%F %T')"
box apt-get install -y -qq /srv/aggregator-old.deb > "$work/install-agg.log" 2>&1 ||
  { tail -20 "$work/install-agg.log"; fail "apt-get install fieldprof-aggregator"; }
[[ "$(box systemctl is-enabled fieldprof-aggregator)" == enabled ]] || fail "the unit is not enabled"
[[ "$(box systemctl is-active fieldprof-aggregator)" == active ]] || fail "the unit is not active"
wait_listening "$since"
agg_pid="$(box systemctl show -p MainPID --value fieldprof-aggregator)"
agg_user="$(box stat -c %U "/proc/$agg_pid")"
[[ "$agg_user" == fieldprof ]] || fail "the service runs as $agg_user"
echo "active, enabled, listening on 127.0.0.1:8443, as user $agg_user"

step "fieldprof installed preseeded yes; a user logs in and opts in"
echo "fieldprof fieldprof/participate boolean true" | box debconf-set-selections
box apt-get install -y -qq /srv/fieldprof.deb > "$work/install.log" 2>&1 ||
  { tail -20 "$work/install.log"; fail "apt-get install fieldprof"; }
# The aggregator on this machine, with its certificate; batches sealed
# within seconds (the test cannot wait a day).
printf 'server = 127.0.0.1\nport = 8443\nca_file = /etc/fieldprof/tls/cert.pem\nmax_age_s = 2\n' \
  > "$root/etc/fieldprof/agent.conf"
as_user vol 'fieldprof optin' > "$work/optin.txt" 2>&1 || fail "optin: $(cat "$work/optin.txt")"
sed 's/^/  /' "$work/optin.txt"
grep -q 'The agent started' "$work/optin.txt" || fail "optin did not start the agent's service"
user_unit() { as_user "$1" "systemctl --user $2 fieldprof-agent.service"; }
[[ "$(user_unit vol is-active)" == active ]] || fail "the agent's user service is not active"
[[ "$(user_unit vol is-enabled)" == enabled ]] || fail "the agent's user service is not enabled"
agent_pid="$(user_unit vol 'show -p MainPID --value')"
echo "the agent runs as vol's user service (pid $agent_pid in the machine)"

step "the user's programs are measured; the agent uploads them"
# Every run measured, as a test wants (the agent brings the fleet's
# sampling into this file: set again after it did).
measure_all() {
  as_user "$1" 'mkdir -p ~/.config/fieldprof && f=~/.config/fieldprof/runtime.conf && touch $f && sed -i -e "/^sample_fraction/d" -e "/^max_runs_per_minute/d" -e "/^max_load_per_cpu/d" $f && printf "sample_fraction = 1\nmax_runs_per_minute = 0\nmax_load_per_cpu = 1000\n" >> $f'
}
measure_all vol
as_user vol 'for i in 1 2 3 4 5; do ls /usr/lib > /dev/null; sort /etc/passwd > /dev/null; done'
found=""
for _ in $(seq 60); do
  if top > "$work/top.txt" 2>&1 && [[ "$(grep -c '^[0-9]' "$work/top.txt")" -ge 1 ]]; then
    found=1
    break
  fi
  sleep 0.5
done
[[ -n "$found" ]] || { cat "$work/top.txt"; as_user vol 'journalctl --user -u fieldprof-agent --no-pager -n 20'; fail "nothing reached the aggregator"; }
head -4 "$work/top.txt"

step "the aggregator upgraded to this build: restarted by the package, its data kept"
since="$(box date '+%F %T')"
box apt-get install -y -qq /srv/aggregator.deb > "$work/upgrade.log" 2>&1 ||
  { tail -20 "$work/upgrade.log"; fail "upgrade"; }
[[ "$(box systemctl is-active fieldprof-aggregator)" == active ]] || fail "not active after the upgrade"
wait_listening "$since"
new_pid="$(box systemctl show -p MainPID --value fieldprof-aggregator)"
[[ "$new_pid" != "$agg_pid" ]] || fail "the old server still runs after the upgrade"
box journalctl -u fieldprof-aggregator --since "$since" --no-pager -o cat | grep -qi 'fail' &&
  fail "the service failed around the upgrade"
top > "$work/top-after.txt" || fail "fieldprof top after the upgrade"
diff "$work/top.txt" "$work/top-after.txt" || fail "the aggregator's answers changed across the upgrade"
echo "now $(box dpkg-query -W -f='${Version}' fieldprof-aggregator), pid $agg_pid -> $new_pid, the same $(grep -c '^[0-9]' "$work/top-after.txt") APIs"

step "the user opts out: the service stops, nothing more is sent"
as_user vol 'fieldprof optout' > "$work/optout.txt" 2>&1 || fail "optout: $(cat "$work/optout.txt")"
sed 's/^/  /' "$work/optout.txt"
[[ "$(user_unit vol is-active || true)" != active ]] || fail "the agent still runs after optout"
[[ "$(user_unit vol is-enabled || true)" != enabled ]] || fail "the agent is still enabled after optout"
as_user vol 'ls /usr/lib > /dev/null; sort /etc/passwd > /dev/null'
[[ ! -e "$root/home/vol/.local/state/fieldprof/spool" ]] || fail "a program left a record after optout"
echo "the agent's service is $(user_unit vol is-active || true); no record after optout"

step "another user opted in; fieldprof upgraded, then removed"
as_user vol2 'fieldprof optin' > /dev/null 2>&1 || fail "optin (vol2)"
# vol2 stays logged in: a login shell started now, before the upgrade and
# the removal, holds the environment its login hook made.
box su - vol2 -c 'exec sleep 600' > /dev/null 2>&1 &
session_pid=""
for _ in $(seq 100); do
  session_pid="$(box sh -c 'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = sleep ] && [ "$(stat -c %U $p)" = vol2 ] && echo ${p#/proc/}; done; true')"
  [[ -n "$session_pid" ]] && break
  sleep 0.1
done
[[ -n "$session_pid" ]] || fail "vol2's login session did not start"
old_preload="$(box sh -c "tr '\\0' '\\n' < /proc/$session_pid/environ" | sed -n 's/^LD_PRELOAD=//p')"
[[ "$old_preload" == /run/user/*/fieldprof/libfieldprof.so ]] ||
  fail "the login hook's preload is '$old_preload', not the session's link"
echo "vol2's session preloads $old_preload"
[[ "$(user_unit vol2 is-active)" == active ]] || fail "vol2's agent is not active"
pid_before="$(user_unit vol2 'show -p MainPID --value')"
box apt-get install -y -qq --reinstall /srv/fieldprof.deb > "$work/reinstall.log" 2>&1 ||
  { tail -20 "$work/reinstall.log"; fail "apt-get install --reinstall fieldprof"; }
pid_after="$(user_unit vol2 'show -p MainPID --value')"
[[ "$(user_unit vol2 is-active)" == active && "$pid_after" != "$pid_before" ]] ||
  fail "vol2's agent was not restarted on the new binary (pid $pid_before -> $pid_after)"
[[ "$(user_unit vol is-active || true)" != active ]] || fail "the upgrade started vol's agent, who opted out"
echo "upgraded: vol2's agent restarted (pid $pid_before -> $pid_after); vol's stays stopped"
running() {  # pids of processes named $1 in the machine
  box sh -c 'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"; done; true' sh "$1"
}
[[ -n "$(running fieldprof-agent)" ]] || fail "the process scan finds no agent"
box apt-get remove -y -qq fieldprof > "$work/remove.log" 2>&1 || { tail -20 "$work/remove.log"; fail "apt-get remove fieldprof"; }
left="$(running fieldprof-agent)"
[[ -z "$left" ]] || fail "an agent still runs after the package was removed (pid $left)"
echo "removed: no fieldprof-agent runs"
# A program started in the session from before the removal, with its
# environment: no loader warning, the same output, no record.
box runuser -u vol2 -- env LD_PRELOAD="$old_preload" sh -c 'ls / > /dev/null; echo ok' \
  > "$work/old-session.txt" 2> "$work/old-session.err" || true
[[ "$(cat "$work/old-session.txt")" == ok && ! -s "$work/old-session.err" ]] ||
  { cat "$work/old-session.err"; fail "a program of a session from before the removal is harmed"; }
echo "a program in vol2's session from before the removal: no warning, output unchanged"
# Removed, not purged: the login hook (a conffile) stays and finds no
# library, so a new login sets nothing and says nothing.
[[ -e "$root/etc/profile.d/fieldprof.sh" ]] || fail "the hook went with remove (it is a conffile)"
as_user vol2 'echo "LD_PRELOAD=[${LD_PRELOAD:-}]"' > "$work/login.txt" 2>&1 || true
[[ "$(cat "$work/login.txt")" == 'LD_PRELOAD=[]' ]] ||
  { cat "$work/login.txt"; fail "a login after removal: the hook did something"; }
echo "a new login after removal: the hook finds no library, sets nothing, prints nothing"

step "fieldprof-aggregator removed: its service stops cleanly"
since="$(box date '+%F %T')"
box apt-get purge -y -qq fieldprof-aggregator > "$work/purge-agg.log" 2>&1 ||
  { tail -20 "$work/purge-agg.log"; fail "apt-get purge fieldprof-aggregator"; }
box journalctl -u fieldprof-aggregator --since "$since" --no-pager -o cat > "$work/stop.txt"
sed 's/^/  /' "$work/stop.txt" | tail -4
grep -qi 'fail' "$work/stop.txt" && fail "the service did not stop cleanly"
[[ -z "$(running fieldprof-aggre)" ]] || fail "the server still runs after purge"
[[ ! -e "$root/lib/systemd/system/fieldprof-aggregator.service" ]] || fail "the unit file is still there"

step "the machine shuts down"
box systemctl poweroff > /dev/null 2>&1 || true
for _ in $(seq 300); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$nspawn_pid" 2>/dev/null; then fail "the container did not power off"; fi
wait "$nspawn_pid" || true
nspawn_pid=""
echo "powered off"
echo
echo "test-systemd: all steps passed"

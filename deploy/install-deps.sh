#!/usr/bin/env bash
# Installs the Debian 12 packages fieldprof needs, by profile: what building
# and the quickstart need, and what each kind of test and benchmark adds.
# Idempotent and non-interactive: packages already present are left alone,
# and apt is only asked when something is missing.
#
#   ./deploy/install-deps.sh              # every profile (the test command)
#   ./deploy/install-deps.sh build        # build + the quickstart's programs
#   ./deploy/install-deps.sh build unit process   # any list of profiles
#   ./deploy/install-deps.sh --list       # the profiles and their packages
#   FIELDPROF_SKIP_APT=1 ./deploy/...     # skip (e.g. a machine managed elsewhere)
set -euo pipefail

# build: the toolchain, the libraries every binary links (the test and
# benchmark libraries too: CMake configures them with the rest), and the
# programs the quickstart runs under the runtime and calls.
PROFILE_build=(
  build-essential cmake pkg-config git
  # Ninja schedules the whole build at once; lld links the test and
  # benchmark programs in a sixth of ld's time (README, Development)
  ninja-build lld
  libboost-dev libboost-system-dev libboost-program-options-dev
  librocksdb-dev libprotobuf-dev protobuf-compiler libssl-dev
  # the aggregators' lease in ZooKeeper (its C client)
  libzookeeper-mt-dev
  # JSON (the language server, reports); ELF build ids and symbols
  # (readable versions, fieldprof record); DWARF unwinding (its sampler)
  nlohmann-json3-dev libdw-dev libunwind-dev
  # libclang's C header: the language server loads libclang at run time to
  # tell which C++ function a call is (tools/ide/cxx_calls.h)
  libclang-14-dev
  # USDT probes in the points SDK (fieldprof/points.h)
  systemtap-sdt-dev
  # x86-64 decoding: points placed on a function inside a module move its
  # first instructions (the runtime dlopens libcapstone.so.4 for it)
  libcapstone-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  # gzip streams (record show --pprof)
  zlib1g-dev
  # ristretto255 for the anonymous upload tokens (RFC 9497 VOPRF)
  libsodium-dev
  # certificates, smoke checks; real programs the quickstart measures
  openssl curl procps sqlite3 python3 gzip zstd xz-utils bzip2 coreutils tar perl
)
# unit: the formatting check and the batch fuzzer (libFuzzer ships with
# clang's runtime libraries).
PROFILE_unit=(clang-format clang libclang-rt-14-dev)
# process: Neovim for the language server, scipy as the statistics'
# independent check, valgrind for allocation counts, Chromium driven by
# npm's playwright-core for the dashboard (installed below), Go for
# `go tool pprof`, which reads fieldprof record show --pprof.
PROFILE_process=(neovim python3-scipy valgrind chromium nodejs golang-go)
# package: Debian packages built and checked, installed into a debootstrap
# root and booted under systemd (deploy/test-package.sh, test-systemd.sh).
PROFILE_package=(help2man lintian debootstrap systemd-container)
# cluster: Debian's ClickHouse (an old release, for tests only:
# docs/scale-out.md), ZooKeeper (the server's jars, not the zookeeperd
# service) and haproxy, started on loopback by the cluster tests.
PROFILE_cluster=(clickhouse-server zookeeper haproxy)
# bench: the benchmarks' helpers and peers (GNU time, hyperfine, the nginx
# reference sink, uftrace and ltrace), bc for their arithmetic.
# lttng: the points benchmark's lttng-ust anchor (a tracepoint, and a
# session of the user's own to enable it).
PROFILE_bench=(time hyperfine nginx-light uftrace ltrace bc liblttng-ust-dev lttng-tools)
ALL_PROFILES=(build unit process package cluster bench)

if [[ "${1:-}" == "--list" ]]; then
  for p in "${ALL_PROFILES[@]}"; do
    declare -n list="PROFILE_$p"
    printf '%-8s %s\n' "$p" "${list[*]}"
  done
  exit 0
fi
profiles=("$@")
if [[ ${#profiles[@]} -eq 0 ]]; then profiles=("${ALL_PROFILES[@]}"); fi
PACKAGES=()
want_npm=0
for p in "${profiles[@]}"; do
  if ! declare -p "PROFILE_$p" >/dev/null 2>&1; then
    echo "install-deps: no profile '$p' (profiles: ${ALL_PROFILES[*]})" >&2
    exit 2
  fi
  declare -n list="PROFILE_$p"
  PACKAGES+=("${list[@]}")
  [[ "$p" == "process" ]] && want_npm=1
done
# npm: Debian's, unless the machine's Node.js brings its own (NodeSource's
# nodejs package holds npm, and Debian's npm package conflicts with it).
if [[ $want_npm == 1 ]] && ! command -v npm >/dev/null 2>&1; then PACKAGES+=(npm); fi

if [[ "${FIELDPROF_SKIP_APT:-0}" == "1" ]]; then
  echo "install-deps: FIELDPROF_SKIP_APT=1, not installing anything"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# playwright-core, pinned in tests/aggregator/ui/package.json to the release made for
# Debian's Chromium (156: playwright-core 1.64.1), into tests/aggregator/ui/node_modules.
npm_deps() {
  [[ $want_npm == 1 ]] || return 0
  local ui
  ui="$(cd "$(dirname "$0")/.." && pwd)/tests/aggregator/ui"
  if [[ -d "$ui/node_modules/playwright-core" ]]; then return; fi
  echo "install-deps: npm install in tests/aggregator/ui (playwright-core)"
  (cd "$ui" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
}

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages of ${profiles[*]} present"
  npm_deps
  exit 0
fi

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi

echo "install-deps: ${profiles[*]}: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The downloaded .debs (about 1.5 GB for every profile) are not needed once
# installed, and the test command needs the disk (deploy/test.sh).
$SUDO apt-get clean || true
npm_deps
echo "install-deps: done"

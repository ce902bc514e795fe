#!/usr/bin/env bash
# Installs the Debian 12 packages fieldprof needs to build, test and run.
# Idempotent and non-interactive: packages already present are left alone,
# and apt is only asked when something is missing.
#
#   ./deploy/install-deps.sh           # build + test + run dependencies
#   FIELDPROF_SKIP_APT=1 ./deploy/...  # skip (e.g. a machine managed elsewhere)
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake pkg-config git
  # the formatting check (deploy/test.sh)
  clang-format
  # fuzzing (libFuzzer ships with clang's runtime libraries)
  clang libclang-rt-14-dev
  # libraries
  libboost-dev libboost-system-dev libboost-program-options-dev
  librocksdb-dev libprotobuf-dev protobuf-compiler libssl-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  # run-time helpers: certificates, the nginx reference sink, curl for smoke checks
  openssl nginx-light curl procps bc
  # real programs the runtime is tested and shown on (host-safety suite, quickstart)
  sqlite3 python3 gzip zstd xz-utils bzip2 coreutils tar perl
  # benchmark helpers (GNU time for CPU time and peak memory; valgrind
  # counts a workload's allocations for the runtime benchmark)
  time valgrind
  # whole-process costs, plain against instrumented side by side
  hyperfine
  # peers the runtime benchmark compares with
  uftrace ltrace
  # Debian packages (deploy/package.sh): man pages from --help, the checker;
  # deploy/test-package.sh installs them into a debootstrap root, and
  # deploy/test-systemd.sh boots such a root with systemd-nspawn
  help2man lintian debootstrap systemd-container
  # the language server (fieldprof lsp): JSON; Neovim to test it with
  nlohmann-json3-dev neovim
  # statistics checked against an independent implementation (fieldprof check)
  python3-scipy
  # the dashboard in a real browser: Debian's chromium, driven by npm's
  # playwright-core (tests/aggregator/ui/, installed below)
  chromium nodejs
  # the ClickHouse store (issue #20): its tests start Debian's ClickHouse on
  # loopback (an old release, used for tests only: docs/scale-out.md)
  clickhouse-server
  # scale-out (issue #20): the aggregators' lease in ZooKeeper (its C
  # client); the cluster tests start ZooKeeper (the server's jars, not the
  # zookeeperd service), several ClickHouse servers and aggregator replicas
  # behind Debian's haproxy
  libzookeeper-mt-dev zookeeper haproxy
)
# npm: Debian's, unless the machine's Node.js brings its own (NodeSource's
# nodejs package holds npm, and Debian's npm package conflicts with it).
if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(npm); fi

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
  local ui
  ui="$(cd "$(dirname "$0")/.." && pwd)/tests/aggregator/ui"
  if [[ -d "$ui/node_modules/playwright-core" ]]; then return; fi
  echo "install-deps: npm install in tests/aggregator/ui (playwright-core)"
  (cd "$ui" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
}

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  npm_deps
  exit 0
fi

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_deps
echo "install-deps: done"

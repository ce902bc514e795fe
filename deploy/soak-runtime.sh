#!/usr/bin/env bash
# Host-safety soak: real Debian programs under the runtime with many random
# seeds (k = 4 APIs each), every output and exit code compared with a run
# without fieldprof. Longer than the CTest suite's 10 seeds per program.
# Prints each difference and the count; exits 1 if there was any.
#
#   deploy/soak-runtime.sh [FIRST_SEED] [LAST_SEED]   (default 1 200)
set -euo pipefail
cd "$(dirname "$0")/.."
first="${1:-1}"
last="${2:-200}"
./deploy/install-deps.sh build bench >/dev/null
./deploy/build.sh fieldprof_runtime >/dev/null
lib="$PWD/build/lib/fieldprof"
work="$(mktemp -d /tmp/fieldprof-soak-XXXXXX)"
trap 'rm -rf "$work"' EXIT
cd "$work"
seq 1 30000 | sed 's/$/ some text here/' >data.txt
cmds=(
  "sqlite3 :memory: \"create table t(a,b); with recursive c(x) as (select 1 union all select x+1 from c where x<2000) insert into t select x, x%13 from c; select b, count(*), sum(a) from t group by b;\""
  "gzip -c data.txt | gzip -dc | md5sum"
  "zstd -q -T2 -c data.txt | zstd -q -dc | md5sum"
  "xz -T2 -c data.txt | xz -dc | md5sum"
  "rm -rf r && git init -q r && cd r && cp ../data.txt . && git add . && git -c user.name=a -c user.email=a@b commit -qm x && git log --format=%s && git status --short | wc -l"
  "python3 -c 'import sqlite3,json; c=sqlite3.connect(\":memory:\"); c.execute(\"create table t(x)\"); c.executemany(\"insert into t values(?)\", [(i,) for i in range(3000)]); print(c.execute(\"select sum(x) from t\").fetchone(), len(json.dumps(list(range(999)))))'"
  "perl -e 'my %h; for (1..20000) { \$h{\$_ % 977} .= \"x\" } print scalar(keys %h), \"\\n\"'"
  "tar -cf - data.txt | tar -tvf - | awk '{print \$6}'"
  "ls -la /usr/lib/x86_64-linux-gnu | sort -k5 -n | tail -3 | awk '{print \$9}'"
)
bad=0
runs=0
for c in "${cmds[@]}"; do
  want=$(sh -c "$c" 2>/dev/null; echo "rc=$?")
  for s in $(seq "$first" "$last"); do
    got=$(env FIELDPROF_RUN=1 FIELDPROF_K=4 "FIELDPROF_SEED=$s" "FIELDPROF_SPOOL=$work/spool" \
          "FIELDPROF_SLOT_DIR=$work/slots" FIELDPROF_SLOTS=64 FIELDPROF_MAX_LOAD=1000 \
          "LD_PRELOAD=$lib/libfieldprof.so" \
          sh -c "$c" 2>/dev/null; echo "rc=$?")
    runs=$((runs + 1))
    if [[ "$got" != "$want" ]]; then
      echo "DIFF seed=$s: $c"
      echo "$got" | tail -2
      bad=$((bad + 1))
    fi
  done
  echo "$(echo "$c" | cut -c1-60)...: seeds $first-$last done"
done
echo "soak: $runs runs, $bad differences, $(ls "$work/spool" | wc -l) records left"
[[ "$bad" == 0 ]]

# Sourced by deploy/test-package.sh and deploy/test-systemd.sh (from the
# source tree's root, with $work set): builds an older aggregator package
# for the upgrade step, then this tree's two packages, and sets
#   $work/aggregator-old.deb   fieldprof-aggregator 0.0.9-1
#   deb, aggdeb                this build's fieldprof and fieldprof-aggregator
PACKAGE_VERSION=0.0.9-1 ./deploy/package.sh > "$work/package-old.log" 2>&1 ||
  { cat "$work/package-old.log"; exit 1; }
cp dist/fieldprof-aggregator_0.0.9-1_*.deb "$work/aggregator-old.deb"
./deploy/package.sh > "$work/package.log" 2>&1 || { cat "$work/package.log"; exit 1; }
deb="$(ls -t dist/fieldprof_*.deb | head -1)"
aggdeb="$(ls -t dist/fieldprof-aggregator_*.deb | head -1)"

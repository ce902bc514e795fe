#!/usr/bin/env bash
# Builds fieldprof's two Debian packages from this tree into ./dist, with
# dpkg-deb, and runs lintian on them:
#
#   fieldprof_<version>_amd64.deb             for volunteers and developers
#     /usr/bin/fieldprof, /usr/bin/fieldprof-agent
#     /usr/lib/fieldprof/libfieldprof-front.so   what sessions preload: loads the runtime
#     /usr/lib/fieldprof/libfieldprof.so         the runtime
#     /usr/lib/fieldprof/libfieldprof-inert.so   left in sessions at removal
#     /usr/lib/fieldprof/libfieldprof-sampler.so  fieldprof record's sampler
#     /usr/lib/fieldprof/libfieldprof-points.so  fieldprof points record's recorder
#     /usr/include/fieldprof/points.h            the instrumentation points SDK
#     /usr/share/fieldprof/user-sessions.sh      users' agents and preload
#         links at upgrade and removal (the maintainer scripts)
#     /etc/profile.d/fieldprof.sh                the login hook (puts the
#         runtime into a user's programs only when the machine and the
#         user both said yes, and the library is there)
#     /usr/lib/systemd/user/fieldprof-agent.service   the agent, per user
#     /usr/share/fieldprof/agent.conf            the agent's settings, which
#         postinst puts in /etc/fieldprof/agent.conf with the aggregator
#         the second question names (default 127.0.0.1:8443, this machine)
#     the debconf questions (take part: default no; the aggregator)
#   fieldprof-aggregator_<version>_amd64.deb  for operators
#     /usr/sbin/fieldprof-aggregator and its systemd unit, run as the
#     system user fieldprof; /etc/fieldprof/aggregator.conf (loopback until
#     configured); data in /var/lib/fieldprof; the certificate and
#     signing-key helpers in /usr/share/fieldprof-aggregator, run at install
#   both: man pages made from --help, copyright, changelog.
#
# Maintainer scripts and files: deploy/debian/<package>/. Version: the
# project's, plus the date and commit of the tree (0.1.0~git20261122.abc1234-1);
# PACKAGE_VERSION=... overrides it (tests build an "older" one).
#
#   deploy/package.sh           # -> dist/*.deb, lintian's output on stdout
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh build package >/dev/null
./deploy/build.sh fieldprof fieldprof-agent fieldprof_runtime fieldprof_front fieldprof_inert fieldprof-aggregator >/dev/null

upstream="$(sed -n 's/^project(fieldprof VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
version="${PACKAGE_VERSION:-${upstream}~git$(git log -1 --format=%cd --date=format:%Y%m%d).$(git rev-parse --short=7 HEAD)-1}"
arch="$(dpkg --print-architecture)"
mkdir -p dist
stage="$(mktemp -d /tmp/fieldprof-pkg-XXXXXX)"
trap 'rm -rf "$stage"' EXIT
export FIELDPROF_LIB_DIR="$PWD/build/lib/fieldprof"

# The packages (and versions) that ship the libraries the ELF files under
# ROOT link, as a Depends list.
shlib_depends() {
  local root=$1
  find "$root" -type f \( -perm -u+x -o -name '*.so' \) -print0 |
    xargs -0 -r objdump -p 2>/dev/null | awk '/NEEDED/ {print $2}' | sort -u |
    while read -r so; do
      path="$(ldconfig -p | awk -v so="$so" '$1 == so && /x86-64/ {print $NF; exit}')"
      [[ -n "$path" ]] || continue
      # dpkg knows a file by the path its package ships (/lib or /usr/lib).
      pkg="$( (dpkg -S "$path" || dpkg -S "$(readlink -f "$path")") 2>/dev/null | head -1 | cut -d: -f1)"
      [[ -n "$pkg" ]] || continue
      echo "$pkg (>= $(dpkg-query -W -f='${Version}' "$pkg" | sed 's/-[^-]*$//'))"
    done | sort -u | paste -sd, | sed 's/,/, /g'
}

# copyright, changelog and a man page per PROGRAM:SECTION:SUMMARY.
docs() {
  local root=$1 name=$2
  shift 2
  local doc="$root/usr/share/doc/$name"
  install -d "$doc"
  cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: fieldprof
Source: the fieldprof repository

Files: *
Copyright: 2026 the fieldprof authors
License: Apache-2.0
 On Debian systems, the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF
  printf '%s (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- fieldprof developers <devel@fieldprof.invalid>  %s\n' \
    "$name" "$version" "$(git rev-parse --short=12 HEAD)" "$(date -R -d "@$(git log -1 --format=%ct)")" |
    gzip -9n > "$doc/changelog.Debian.gz"
  local spec prog section summary
  for spec in "$@"; do
    IFS=: read -r prog section summary <<< "$spec"
    install -d "$root/usr/share/man/man$section"
    help2man --no-info --section="$section" --version-string="$version" -n "$summary" "$prog" |
      gzip -9n > "$root/usr/share/man/man$section/$(basename "$prog").$section.gz"
  done
}

# Writes ROOT/DEBIAN/control (the description on stdin), then the .deb.
build_deb() {
  local root=$1 name=$2 depends=$3 section=$4 summary=$5
  install -d "$root/DEBIAN"
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: fieldprof developers <devel@fieldprof.invalid>"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)"
    echo "Depends: $depends"
    # What a feature loads only when asked (the runtime dlopens capstone to
    # place points inside a module: docs/points.md).
    [[ -n "${RECOMMENDS:-}" ]] && echo "Recommends: $RECOMMENDS"
    echo "Section: $section"
    echo "Priority: optional"
    echo "Homepage: https://fieldprof.invalid/"
    echo "Description: $summary"
    cat
  } > "$root/DEBIAN/control"
  local deb="dist/${name}_${version}_${arch}.deb"
  rm -f "dist/${name}_"*.deb
  dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
  echo "package.sh: $deb ($(du -h "$deb" | cut -f1))"
}

# ---------------------------------------------------------------- fieldprof
src=deploy/debian/fieldprof
root="$stage/fieldprof"
install -D -m 0755 build/tools/fieldprof "$root/usr/bin/fieldprof"
install -D -m 0755 build/agent/daemon/fieldprof-agent "$root/usr/bin/fieldprof-agent"
install -D -m 0644 build/lib/fieldprof/libfieldprof.so "$root/usr/lib/fieldprof/libfieldprof.so"
install -D -m 0644 build/lib/fieldprof/libfieldprof-front.so "$root/usr/lib/fieldprof/libfieldprof-front.so"
install -D -m 0644 build/lib/fieldprof/libfieldprof-inert.so "$root/usr/lib/fieldprof/libfieldprof-inert.so"
install -D -m 0644 build/lib/fieldprof/libfieldprof-points.so \
  "$root/usr/lib/fieldprof/libfieldprof-points.so"
install -D -m 0644 build/lib/fieldprof/libfieldprof-sampler.so \
  "$root/usr/lib/fieldprof/libfieldprof-sampler.so"
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$root/usr/bin/fieldprof" "$root/usr/bin/fieldprof-agent"
# The runtime keeps its .note.gnu.build-id and its loaded layout (tests/agent/preload/runtime
# checks which page .data shares): only sections that are not loaded go.
strip --strip-unneeded --remove-section=.comment "$root/usr/lib/fieldprof/libfieldprof.so" \
  "$root/usr/lib/fieldprof/libfieldprof-front.so" \
  "$root/usr/lib/fieldprof/libfieldprof-inert.so" "$root/usr/lib/fieldprof/libfieldprof-sampler.so" \
  "$root/usr/lib/fieldprof/libfieldprof-points.so"
# The points SDK: programs include <fieldprof/points.h> (and systemtap's <sys/sdt.h>).
install -D -m 0644 agent/include/fieldprof/points.h "$root/usr/include/fieldprof/points.h"
install -D -m 0644 "$src/fieldprof.sh" "$root/etc/profile.d/fieldprof.sh"
install -D -m 0755 "$src/user-sessions.sh" "$root/usr/share/fieldprof/user-sessions.sh"
# The agent's settings: a template; postinst makes /etc/fieldprof/agent.conf
# from it and the debconf answer (not a conffile: the answer is written in).
install -D -m 0644 "$src/agent.conf" "$root/usr/share/fieldprof/agent.conf"
install -D -m 0644 "$src/fieldprof-agent.service" \
  "$root/usr/lib/systemd/user/fieldprof-agent.service"
docs "$root" fieldprof \
  "build/tools/fieldprof:1:field profiling: measure library APIs, see their field cost" \
  "build/agent/daemon/fieldprof-agent:1:uploads the runtime's records, exactly once"
install -d "$root/DEBIAN"
printf '/etc/profile.d/fieldprof.sh\n' > "$root/DEBIAN/conffiles"
install -m 0755 "$src/config" "$src/postinst" "$src/prerm" "$src/postrm" "$root/DEBIAN/"
install -m 0644 "$src/templates" "$root/DEBIAN/templates"
RECOMMENDS="libcapstone4, libclang1-14" build_deb "$root" fieldprof "$(shlib_depends "$root"), debconf (>= 0.5) | debconf-2.0" devel \
  "field profiling of shared-library APIs (volunteer side)" <<'EOF'
 fieldprof measures what library APIs such as sqlite3_prepare_v2, deflate or
 getaddrinfo cost on real machines. This package holds the runtime that
 times a few randomly chosen APIs in the programs of users who opt in, the
 agent that uploads the sums, and the fieldprof command (run, status,
 optin, optout, cost).
 .
 Installing asks whether users of this machine may take part (default no);
 each user then decides with fieldprof optin and fieldprof optout.
EOF

# ----------------------------------------------------- fieldprof-aggregator
src=deploy/debian/fieldprof-aggregator
root="$stage/fieldprof-aggregator"
install -D -m 0755 build/aggregator/fieldprof-aggregator "$root/usr/sbin/fieldprof-aggregator"
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$root/usr/sbin/fieldprof-aggregator"
for helper in make-cert.sh make-signing-key.sh; do
  install -D -m 0755 "deploy/$helper" "$root/usr/share/fieldprof-aggregator/$helper"
  sed -i '1s|^#!/usr/bin/env bash$|#!/bin/bash|' "$root/usr/share/fieldprof-aggregator/$helper"
done
install -D -m 0644 "$src/aggregator.conf" "$root/etc/fieldprof/aggregator.conf"
install -D -m 0644 "$src/fieldprof-aggregator.service" \
  "$root/lib/systemd/system/fieldprof-aggregator.service"
docs "$root" fieldprof-aggregator \
  "build/aggregator/fieldprof-aggregator:8:sums agents' batches exactly once and publishes signed snapshots"
install -d "$root/DEBIAN"
printf '/etc/fieldprof/aggregator.conf\n' > "$root/DEBIAN/conffiles"
install -m 0755 "$src/postinst" "$src/prerm" "$src/postrm" "$root/DEBIAN/"
build_deb "$root" fieldprof-aggregator "$(shlib_depends "$root"), adduser, openssl" net \
  "field profiling of shared-library APIs (aggregator)" <<'EOF'
 fieldprof measures what library APIs cost on real machines. This package
 holds the aggregator: an HTTPS service that sums the batches volunteers'
 agents upload, exactly once, into an embedded RocksDB, answers queries and
 publishes signed snapshot fragments.
 .
 Installed, it serves loopback only with a self-signed certificate until
 configured in /etc/fieldprof/aggregator.conf; its data is in
 /var/lib/fieldprof and kept across upgrades.
EOF

echo "== lintian (deploy/debian/lintian-exceptions.md says why what remains is left)"
lintian --tag-display-limit 0 "dist/fieldprof_${version}_${arch}.deb" \
  "dist/fieldprof-aggregator_${version}_${arch}.deb" || true

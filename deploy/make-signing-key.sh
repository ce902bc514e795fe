#!/usr/bin/env bash
# Makes the Ed25519 key pair the aggregator signs snapshot manifests with:
#   DIR/snapshot-signing.key  private key (PKCS#8 PEM, mode 0600): the aggregator's
#   DIR/snapshot-signing.pub  public key (SPKI PEM): ships with every agent's configuration
# An existing key is kept: clients trust it, and a new one would make them
# refuse every manifest until they get the new public key.
#
#   deploy/make-signing-key.sh DIR
set -euo pipefail
dir="${1:?usage: make-signing-key.sh DIR}"
mkdir -p "$dir"
key="$dir/snapshot-signing.key" pub="$dir/snapshot-signing.pub"
if [[ -e "$key" ]]; then
  echo "make-signing-key: $key exists, keeping it"
else
  (umask 077 && openssl genpkey -algorithm ed25519 -out "$key")
  echo "make-signing-key: wrote $key"
fi
openssl pkey -in "$key" -pubout -out "$pub"
chmod 0644 "$pub"
echo "make-signing-key: public key $pub"

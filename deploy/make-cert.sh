#!/usr/bin/env bash
# Makes a self-signed TLS certificate for a local aggregator.
#   deploy/make-cert.sh DIR [ec|rsa]
# writes DIR/cert.pem and DIR/key.pem, valid for localhost, 127.0.0.1 and ::1.
# ECDSA P-256 by default; "rsa" for RSA-2048. Existing files are kept.
set -euo pipefail
dir="${1:?usage: make-cert.sh DIR [ec|rsa]}"
kind="${2:-ec}"
mkdir -p "$dir"
if [[ -s "$dir/cert.pem" && -s "$dir/key.pem" ]]; then
  echo "make-cert: $dir/cert.pem exists, keeping it"
  exit 0
fi
case "$kind" in
  ec) newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) ;;
  rsa) newkey=(-newkey rsa:2048) ;;
  *) echo "make-cert: kind must be ec or rsa" >&2; exit 2 ;;
esac
openssl req -x509 "${newkey[@]}" -nodes -days 825 -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" \
  -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
chmod 600 "$dir/key.pem"
echo "make-cert: wrote $dir/cert.pem and $dir/key.pem ($kind)"

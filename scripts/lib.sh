# Shared by the project's shell scripts: the cache location and logging.
# Everything downloaded or built lives under $KRAFTY_CACHE, outside the work
# tree, so a fresh clone reuses it and a rerun costs seconds.
KRAFTY_CACHE="${KRAFTY_CACHE:-$HOME/.cache/krafty}"
KRAFTY_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KRAFTY_CACHE KRAFTY_ROOT

log() { printf '%s %s\n' "[$(date +%H:%M:%S)]" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# A short content hash of the given files: a cache key that changes when they do.
files_hash() { cat "$@" | sha256sum | cut -c1-16; }

# note_first_build SECONDS WHAT: a first build (a cache miss) this make run waited for, noted where
# $KRAFTY_RUN_BUILDS says (the Makefile sets it), so that the e2e tier's time budget leaves it out.
note_first_build() { [[ -z "${KRAFTY_RUN_BUILDS:-}" ]] || echo "$1 $2" >> "$KRAFTY_RUN_BUILDS"; }

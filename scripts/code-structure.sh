#!/usr/bin/env bash
# Prints the shape of the source tree: the include graph by folder (which module
# includes which) and the largest functions. Used to check the one-way layer order
# of docs/ARCHITECTURE.md and to compare a restructuring before and after.
#   scripts/code-structure.sh [TOP_N]      (needs universal-ctags for the function list)
set -euo pipefail
cd "$(dirname "$0")/.."
top=${1:-15}

echo "## include graph by folder (module -> modules it includes)"
for dir in src/*/; do
  mod=$(basename "$dir")
  deps=$(grep -ho '#include "[a-z_]*/[a-z_]*\.h"' "$dir"*.[ch] 2>/dev/null |
         sed 's/#include "\([a-z_]*\)\/.*/\1/' | { grep -vx "$mod" || true; } | sort -u | tr '\n' ' ')
  printf '%-8s -> %s\n' "$mod" "${deps:-(none)}"
done

echo
echo "## largest functions (lines, file:line, name)"
if command -v ctags >/dev/null; then
  ctags --sort=no --c-kinds=f --fields=+ne --output-format=u-ctags -f - src/*/*.c 2>/dev/null |
    awk -F'\t' '{ name=$1; file=$2; line=""; end="";
                  for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) line=substr($i,6); if ($i ~ /^end:/) end=substr($i,5) }
                  if (line != "" && end != "") printf "%5d  %s:%s  %s\n", end-line+1, file, line, name }' |
    sort -rn | head -n "$top"
else
  echo "(universal-ctags not installed)"
fi

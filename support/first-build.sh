#!/usr/bin/env bash
# What the first build costs a reader: builds, in a target directory of its
# own that starts empty, what `cargo run` builds, then what each command of the
# README's chapter table builds, in the table's order, and prints for each the
# seconds it took, the crates cargo compiled, and how many of those were
# crates.io crates that an earlier command had already compiled in the same
# profile (0 is the point of support/workspace-hack). A workspace crate shows
# up again when a command builds its binary after another built its library.
# Crates are fetched before the clock starts: downloads depend on the network.
#
#   support/first-build.sh                      # prints the table
#   support/first-build.sh > book/src/results/first-build.txt   # the book's copy
#
# It takes as long as its table's total and as much disk as its last line
# says (on 2 cores, about ten minutes and a few GB); the directory is removed
# at the end. Run it on a quiet machine: the times
# are the machine's.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d "${TMPDIR:-/tmp}/first-build.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export CARGO_TARGET_DIR=$dir/target
export CARGO_TERM_COLOR=never
cargo fetch --locked -q

# The commands as the README's table gives them (the lines `cargo xtask
# readme` draws it between), each once and reduced to its build: `cargo run
# ARGS -- ...` builds what `cargo build ARGS` does. Debug builds first, then
# the release ones, which compile an optimised copy of the dependencies.
mapfile -t runs < <(sed -n '/^<!-- chapters:/,/^<!-- end of chapters/p' README.md |
    grep -o '`cargo run[^`]*`' | tr -d '`' | sed 's/ -- .*//' | awk '!seen[$0]++')
builds=()
for release in no yes; do
    for run in "${runs[@]}"; do
        [[ " $run " == *" --release "* ]] && is=yes || is=no
        [ "$is" = "$release" ] && builds+=("$run|${run#cargo run}")
    done
done
builds=("${builds[@]/|/|build}")

mib() { du -sm "$1" 2>/dev/null | cut -f1; }

echo "$(nproc) cores, $(uname -m), $(cargo --version | cut -d' ' -f1-2); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-52s %8s %7s %6s\n' command seconds crates again
seen=$dir/seen
: > "$seen"
total=0
total_again=0
for entry in "${builds[@]}"; do
    shown=${entry%%|*}
    read -ra args <<< "${entry#*|}"
    start=$(date +%s%N)
    cargo "${args[@]}" --locked > "$dir/log" 2>&1 || { cat "$dir/log" >&2; exit 1; }
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    # "   Compiling tokio v1.48.0" and "   Compiling proto v0.1.0 (/path)":
    # a crate is its name and version; the profile tells debug from release.
    profile=debug
    [[ " ${args[*]} " == *" --release "* ]] && profile=release
    grep -E '^ +Compiling ' "$dir/log" > "$dir/now" || true
    crates=$(wc -l < "$dir/now")
    # A workspace crate's line ends with its path; a crates.io crate's does not.
    grep -vF '(' "$dir/now" | awk -v p=$profile '{print p, $2, $3}' > "$dir/registry" || true
    again=$(grep -cxFf "$seen" "$dir/registry" || true)
    cat "$dir/registry" >> "$seen"
    total_again=$((total_again + again))
    total=$((total + ms))
    printf '%-52s %8d %7d %6d\n' "$shown" $(( (ms + 500) / 1000 )) "$crates" "$again"
    if [ "$shown" = "cargo run" ]; then
        first_mib=$(mib "$CARGO_TARGET_DIR")
    fi
done
echo
echo "crates.io crates compiled again by a later command: $total_again"
echo "all of it: $(( (total + 500) / 1000 )) s"
echo "target/ after \`cargo run\`: $first_mib MiB; after every command: $(mib "$CARGO_TARGET_DIR") MiB" \
    "(debug $(mib "$CARGO_TARGET_DIR/debug") MiB, release $(mib "$CARGO_TARGET_DIR/release") MiB)"

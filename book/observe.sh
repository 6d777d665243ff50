#!/usr/bin/env bash
# Regenerates every "Observed" output the book includes, from real runs on this
# machine, into book/src/observed/. Run it from anywhere: bash book/observe.sh
#
# Each `observe NAME 'COMMAND'` runs COMMAND exactly as the book prints it (cargo's
# own build chatter is silenced with -q) and writes "$ COMMAND" and its output,
# stdout and stderr interleaved, to observed/NAME.txt. Timings in these files are
# illustrative: they are what one run on the machine in observed/machine.txt
# printed, nothing more.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/book/src/observed
mkdir -p "$out"

observe() {
    local name=$1 command=$2
    echo "observe: $name" >&2
    {
        echo "\$ $command"
        (cd "$root" && bash -c "${command//cargo run /cargo run -q }" 2>&1) || echo "(exit status $?)"
    } | sed -e "s#$root/##g" > "$out/$name.txt"
}

# Starts the stack in the background with its log in observed/NAME.txt.
start_stack() {
    local name=$1
    shift
    RUST_LOG=info "$root/target/debug/workshop" "$@" > "$out/$name.banner.txt" 2> "$out/$name.txt" &
    stack_pid=$!
    for _ in $(seq 100); do
        grep -q "REST server listening" "$out/$name.txt" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "the stack did not start; its log:" >&2
    cat "$out/$name.txt" >&2
    exit 1
}

stop_stack() {
    kill -TERM "$stack_pid"
    wait "$stack_pid" || true
    sed -i -e "s#$root/##g" "$out"/*.txt
}

cargo build -q --workspace --all-targets
{
    echo "$(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -sm), kernel $(uname -r)"
    echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    echo "$(rustc --version)"
    echo "observed on $(date -u +%Y-%m-%d)"
} > "$out/machine.txt"

# --- chapter 2: Protocol Buffers ---------------------------------------------

# --- chapter 3: development TLS ----------------------------------------------

# --- chapter 4: the gRPC greeter ---------------------------------------------

# --- chapter 5: the REST greeter ---------------------------------------------

# --- chapter 9: the stack -----------------------------------------------------

echo "observed outputs written to $out" >&2

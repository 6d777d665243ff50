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
# OBSERVED_DIR lets CI rerun every command into a scratch folder and compare
# (cargo xtask observe --check) without touching the book's files.
out=${OBSERVED_DIR:-$root/book/src/observed}
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

# --- chapter 1: getting started ----------------------------------------------
start_stack ch01-stack
observe ch01-curl "curl -sS --cacert certs/ca.pem -H 'content-type: application/json' -d '{\"name\":\"Ada\"}' https://localhost:8443/v1/greetings"
stop_stack

# --- chapter 2: Protocol Buffers ---------------------------------------------
observe ch02-no-protoc 'command -v protoc || echo "no protoc on PATH"'
observe ch02-wire-size 'cargo run -p proto --bin wire_size'
observe ch02-wire-size-zero 'cargo run -p proto --bin wire_size -- --delay-ms 0'
observe ch02-wire-size-long "cargo run -p proto --bin wire_size -- --name 'Ada Lovelace, Countess of Lovelace'"
observe ch02-wire-size-big 'cargo run -p proto --bin wire_size -- --delay-ms 60000'
observe ch02-grpc-frame 'cargo run -p proto --bin grpc_frame | od -An -tx1'
observe ch02-plot 'cargo run -p proto --bin wire_size -- --plot sizes.svg'
mv "$root/sizes.svg" "$out/ch02-sizes.svg"

# --- chapter 3: development TLS ----------------------------------------------
# The first run is made in an empty temporary folder, so the repository's certs/
# stays as it is; the folder is then printed as "certs", as the reader's run prints it.
ch03_tmp=$(mktemp -d)
CERTS_DIR=$ch03_tmp/certs observe ch03-create 'cargo run -p certs'
sed -i -e "s#$ch03_tmp/##g" "$out/ch03-create.txt"
rm -rf "$ch03_tmp"
cargo run -q -p certs > /dev/null # the PKI every later step (and chapter) uses
observe ch03-keep 'cargo run -p certs'
observe ch03-modes 'ls -l certs/'
observe ch03-show 'cargo run -p certs -- --show'
observe ch03-openssl 'openssl x509 -noout -subject -issuer -ext subjectAltName,extendedKeyUsage -in certs/server.pem'
observe ch03-verify 'openssl verify -CAfile certs/ca.pem certs/server.pem'

# Like observe, and keeps what the running stack logged meanwhile in NAME.server.txt.
ch03_observe_logged() {
    local name=$1 log=$2 command=$3 before
    before=$(wc -l < "$out/$log.txt")
    observe "$name" "$command"
    sleep 0.5
    tail -n +"$((before + 1))" "$out/$log.txt" > "$out/$name.server.txt"
}
# Tests and other chapters' runs may hold the default ports for a moment: wait
# for them to be free rather than fail.
ch03_wait_for_ports() {
    for _ in $(seq 120); do
        ss -Htln '( sport = :50051 or sport = :8443 )' | grep -q . || return 0
        sleep 1
    done
}
ch03_wait_for_ports
start_stack ch03-stack
observe ch03-trusted 'curl -sS --cacert certs/ca.pem https://localhost:8443/healthz'
ch03_observe_logged ch03-no-cacert ch03-stack 'curl -sS https://localhost:8443/healthz'
observe ch03-hostname 'curl -sS --cacert certs/ca.pem --resolve "$(hostname):8443:127.0.0.1" "https://$(hostname):8443/healthz"'
ch03_observe_logged ch03-plaintext ch03-stack 'curl -sS http://localhost:8443/'
observe ch03-plaintext-bytes 'curl -sS --http0.9 http://localhost:8443/ | od -An -tx1'
stop_stack
ch03_wait_for_ports
start_stack ch03-mtls --mtls
ch03_observe_logged ch03-mtls-none ch03-mtls 'curl -sS --http1.1 --cacert certs/ca.pem https://localhost:8443/healthz'
observe ch03-mtls-client 'curl -sS --cacert certs/ca.pem --cert certs/client.pem --key certs/client.key https://localhost:8443/healthz'
ch03_observe_logged ch03-mtls-wrong-cert ch03-mtls 'curl -sS --http1.1 --cacert certs/ca.pem --cert certs/server.pem --key certs/server.key https://localhost:8443/healthz'
stop_stack

# --- chapter 4: the gRPC greeter ---------------------------------------------
# These helpers serve chapter 5 as well.

# observe, with COMMAND read verbatim from a here-document, so that it can hold
# both kinds of quotes exactly as the book shows them.
observe_here() { observe "$1" "$(cat)"; }

# Starts one server as the reader does (`cargo run -p PACKAGE -- ARGS`; run here
# from its binary, which that command would run, so that a busy cargo lock cannot
# delay it) and writes that command line and the startup log to observed/NAME.txt.
# Retries while another run holds the port.
start_server() {
    local name=$1 package=$2
    shift 2
    server_full_log=$(mktemp)
    for _ in $(seq 60); do
        RUST_LOG=info "$root/target/debug/$package" "$@" > "$server_full_log" 2>&1 &
        server_pid=$!
        for _ in $(seq 100); do
            if grep -q "server listening" "$server_full_log"; then
                echo "\$ cargo run -p $package${*:+ -- $*}" > "$out/$name.txt"
                cat "$server_full_log" >> "$out/$name.txt"
                server_seen=$(wc -l < "$server_full_log")
                # If this script stops early, stop the server too: left running,
                # it would hold the port against the next run.
                trap 'kill -INT "$server_pid" 2> /dev/null || true' EXIT
                return 0
            fi
            kill -0 "$server_pid" 2> /dev/null || break
            sleep 0.1
        done
        kill -0 "$server_pid" 2> /dev/null && kill -INT "$server_pid"
        wait "$server_pid" || true
        grep -q "in use" "$server_full_log" || break
        echo "$package: port in use; waiting" >&2
        sleep 2
    done
    echo "$package did not start; its log:" >&2
    cat "$server_full_log" >&2
    exit 1
}

# Writes what the server logged since the last call to observed/NAME.txt.
server_log() {
    sleep 0.5 # a server logs a moment after its client has given up
    tail -n +"$((server_seen + 1))" "$server_full_log" | sed -e "s#$root/##g" > "$out/$1.txt"
    server_seen=$(wc -l < "$server_full_log")
}

# Stops the server as the reader does, with Ctrl-C (SIGINT), and writes what it
# logged since the last server_log to observed/NAME.txt.
stop_server() {
    kill -INT "$server_pid" 2> /dev/null || true
    wait "$server_pid" || true
    trap - EXIT
    server_log "$1"
    rm -f "$server_full_log"
}

# Returns once a client holds a connection to PORT, and half a second more: by
# then its call is in the server's slow part, however long cargo took to start it.
wait_for_call() {
    for _ in $(seq 3600); do # up to 3 minutes: cargo may be waiting for its lock
        if [ -n "$(ss -Htn state established "( sport = :$1 )")" ]; then
            sleep 0.5
            return 0
        fi
        sleep 0.05
    done
    echo "no client connected to port $1" >&2
    exit 1
}

start_server ch04-server grpc-server
observe_here ch04-hello <<'EOF'
cargo run -p proto --bin grpc_frame -- --name Ada | curl -sS --http2 --cacert certs/ca.pem -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -o - | od -An -c
EOF
observe_here ch04-trailers <<'EOF'
cargo run -p proto --bin grpc_frame -- --name Ada | curl -sS --http2 --cacert certs/ca.pem -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -D - -o /dev/null
EOF
observe_here ch04-empty-name <<'EOF'
cargo run -p proto --bin grpc_frame -- --name '' | curl -sS --http2 --cacert certs/ca.pem -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -D - -o /dev/null
EOF
observe_here ch04-too-large <<'EOF'
printf '\0\0\x01\x11\x70' | curl -sS --http2 --cacert certs/ca.pem -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -D - -o /dev/null
EOF
observe_here ch04-deadline <<'EOF'
cargo run -p proto --bin grpc_frame -- --name Ada --delay-ms 3000 | curl -sS --http2 --cacert certs/ca.pem -H 'content-type: application/grpc' -H 'te: trailers' -H 'grpc-timeout: 300m' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -D - -o /dev/null -w 'curl: %{time_total} s\n'
EOF
server_log ch04-log-deadline
observe_here ch04-give-up <<'EOF'
cargo run -p proto --bin grpc_frame -- --name Ada --delay-ms 3000 | curl -sS --http2 --cacert certs/ca.pem --max-time 0.5 -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -o /dev/null
EOF
server_log ch04-log-give-up
observe_here ch04-give-up-early <<'EOF'
cargo run -p proto --bin grpc_frame -- --name Ada --delay-ms 3000 | curl -sS --http2 --cacert certs/ca.pem --max-time 0.5 -H 'content-type: application/grpc' -H 'te: trailers' -H 'grpc-timeout: 10S' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -o /dev/null
EOF
server_log ch04-log-give-up-early
observe_here ch04-health <<'EOF'
printf '\0\0\0\0\0' | curl -sS --http2 --cacert certs/ca.pem -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/grpc.health.v1.Health/Check -o - | od -An -tx1
EOF
observe_here ch04-reflection <<'EOF'
printf '\0\0\0\0\x02\x3a\x00' | curl -sS --http2 --cacert certs/ca.pem -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/grpc.reflection.v1.ServerReflection/ServerReflectionInfo -o - | od -An -c
EOF
# Ctrl-C while a 3-second call is in flight.
observe_here ch04-drain-call <<'EOF' &
cargo run -p proto --bin grpc_frame -- --name Ada --delay-ms 3000 | curl -sS --http2 --cacert certs/ca.pem -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -o - | od -An -c
EOF
drain_call=$!
wait_for_call 50051
stop_server ch04-log-drain
wait "$drain_call"

start_server ch04-mtls grpc-server --mtls
observe_here ch04-mtls-anonymous <<'EOF'
cargo run -p proto --bin grpc_frame -- --name Ada | curl -sS --http2 --cacert certs/ca.pem -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -o - | od -An -c
EOF
server_log ch04-log-mtls-anonymous
observe_here ch04-mtls-client <<'EOF'
cargo run -p proto --bin grpc_frame -- --name Ada | curl -sS --http2 --cacert certs/ca.pem --cert certs/client.pem --key certs/client.key -H 'content-type: application/grpc' -H 'te: trailers' --data-binary @- https://localhost:50051/greeter.v1.Greeter/SayHello -o - | od -An -c
EOF
stop_server ch04-log-mtls-stop
sed -i -e 's/\r$//' "$out"/ch04-*.txt # curl -D writes CRLF header lines

# --- chapter 5: the REST greeter ---------------------------------------------
start_server ch05-server rest-server
observe_here ch05-hello-h2 <<'EOF'
curl -sS --cacert certs/ca.pem -H 'content-type: application/json' -d '{"name":"Ada","delay_ms":800}' https://localhost:8443/v1/greetings -w '\nHTTP/%{http_version}, %{time_total} s\n'
EOF
observe_here ch05-hello-h1 <<'EOF'
curl -sS --http1.1 --cacert certs/ca.pem -H 'content-type: application/json' -d '{"name":"Ada","delay_ms":800}' https://localhost:8443/v1/greetings -w '\nHTTP/%{http_version}, %{time_total} s\n'
EOF
observe_here ch05-alpn <<'EOF'
for v in --http2 --http1.1; do curl -sv $v --cacert certs/ca.pem https://localhost:8443/healthz -o /dev/null 2>&1 | grep ALPN; done
EOF
observe_here ch05-no-content-type <<'EOF'
curl -sS -i --cacert certs/ca.pem -d '{"name":"Ada"}' https://localhost:8443/v1/greetings -w '\n'
EOF
observe_here ch05-too-large <<'EOF'
printf '{"name":"%s"}' "$(head -c 20000 /dev/zero | tr '\0' x)" | curl -sS -i --cacert certs/ca.pem -H 'content-type: application/json' --data-binary @- https://localhost:8443/v1/greetings -w '\n'
EOF
observe_here ch05-bad-bodies <<'EOF'
for body in '{"name":' '{"delay_ms":5}' '{"name":"Ada","delay_ms":"soon"}' '{"name":"Ada","delayms":5}' '{"name":" "}' '{"name":"Ada","delay_ms":90000}'; do echo "sent $body"; curl -sS --cacert certs/ca.pem -H 'content-type: application/json' -d "$body" https://localhost:8443/v1/greetings -w '\n\n'; done
EOF
observe_here ch05-wrong-method <<'EOF'
curl -sS -i --cacert certs/ca.pem https://localhost:8443/v1/greetings -w '\n'
EOF
observe_here ch05-wrong-path <<'EOF'
curl -sS --cacert certs/ca.pem https://localhost:8443/v1/greeting -w '\n'
EOF
observe_here ch05-give-up <<'EOF'
for v in --http2 --http1.1; do curl -sS $v --max-time 0.5 --cacert certs/ca.pem -H 'content-type: application/json' -d '{"name":"Ada","delay_ms":3000}' https://localhost:8443/v1/greetings; done
EOF
server_log ch05-log-give-up
observe_here ch05-healthz <<'EOF'
curl -sS --cacert certs/ca.pem https://localhost:8443/healthz -w '\n'
EOF
# Ctrl-C while a 3-second request is in flight.
observe_here ch05-drain-call <<'EOF' &
curl -sS --cacert certs/ca.pem -H 'content-type: application/json' -d '{"name":"Ada","delay_ms":3000}' https://localhost:8443/v1/greetings -w '\nHTTP/%{http_version}, %{time_total} s\n'
EOF
drain_call=$!
wait_for_call 8443
stop_server ch05-log-drain
wait "$drain_call"
sed -i -e 's/\r$//' "$out"/ch05-*.txt # curl -i writes CRLF header lines

# --- chapter 6: clients --------------------------------------------------------
# Tests and other runs may hold the default ports for a moment: wait for them.
ch06_wait_for_ports() {
    for _ in $(seq 120); do
        ss -Htln '( sport = :50051 or sport = :8443 )' | grep -q . || return 0
        sleep 1
    done
}
# Like observe, and keeps what the stack (logging to observed/LOG.txt) logged
# meanwhile in observed/NAME.server.txt.
ch06_observe_logged() {
    local name=$1 log=$2 command=$3 before
    before=$(wc -l < "$out/$log.txt")
    observe "$name" "$command"
    sleep 0.5 # a server logs a moment after its client has given up
    tail -n +"$((before + 1))" "$out/$log.txt" | sed -e "s#$root/##g" > "$out/$name.server.txt"
}

ch06_wait_for_ports
start_stack ch06-stack
observe ch06-hello 'cargo run -p grpc-client -- hello --name Ada'
observe ch06-repeat 'cargo run -p grpc-client -- hello --name Ada --repeat 5'
observe ch06-eager 'cargo run -p grpc-client -- --connect eager hello --name Ada --repeat 5'
observe ch06-fresh 'cargo run -p grpc-client -- hello --name Ada --repeat 5 --fresh-channel'
# Two terminals: a burst of slow calls, and `ss` listing connections meanwhile.
observe ch06-burst 'cargo run -p grpc-client -- burst --calls 20 --delay-ms 2000' &
ch06_calls=$!
wait_for_call 50051
observe ch06-burst-ss "ss -Htn state established '( dport = :50051 )'"
wait "$ch06_calls"
ch06_observe_logged ch06-deadline ch06-stack 'cargo run -p grpc-client -- --deadline 0.5 hello --name Ada --delay-ms 800'
observe ch06-deadline-ok 'cargo run -p grpc-client -- --deadline 2 hello --name Ada --delay-ms 800'
observe ch06-rest 'cargo run --example rest_client -- https://localhost:8443/v1/greetings --name Ada --repeat 5'
observe ch06-rest-http1 'cargo run --example rest_client -- https://localhost:8443/v1/greetings --name Ada --repeat 5 --http1'
for ch06_flag in '' ' --http1'; do
    observe "ch06-rest-parallel${ch06_flag/ --/-}" "cargo run --example rest_client -- https://localhost:8443/v1/greetings --delay-ms 2000 --repeat 4 --parallel$ch06_flag" &
    ch06_calls=$!
    wait_for_call 8443
    observe "ch06-rest-parallel${ch06_flag/ --/-}-ss" "ss -Htn state established '( dport = :8443 )'"
    wait "$ch06_calls"
done
ch06_observe_logged ch06-rest-timeout ch06-stack 'cargo run --example rest_client -- https://localhost:8443/v1/greetings --name Ada --delay-ms 800 --timeout 0.5'
stop_stack

# --- chapter 7: errors and status codes ----------------------------------------
observe ch07-table 'cargo run -p proto --bin status_table'
ch06_wait_for_ports
start_stack ch07-stack
observe ch07-invalid "cargo run -p grpc-client -- hello --name ''"
observe ch07-invalid-rest "cargo run --example rest_client -- https://localhost:8443/v1/greetings --name ''"
ch06_observe_logged ch07-deadline ch07-stack 'cargo run -p grpc-client -- --deadline 0.5 hello --name Ada --delay-ms 800'
ch06_observe_logged ch07-raw ch07-stack 'cargo run -p grpc-client -- --raw-status --deadline 0.5 hello --name Ada --delay-ms 800'
ch06_observe_logged ch07-cancel ch07-stack 'cargo run -p grpc-client -- --deadline 10 hello --name Ada --delay-ms 3000 --cancel-after 0.3'
ch06_observe_logged ch07-stream-deadline ch07-stack 'cargo run -p grpc-client -- --deadline 0.5 countdown --count 10 --interval-ms 200'
stop_stack
ch06_wait_for_ports
observe ch07-unavailable 'cargo run -p grpc-client -- hello --name Ada'
observe ch07-unavailable-rest 'cargo run --example rest_client -- https://localhost:8443/v1/greetings --name Ada'
start_server ch07-limit grpc-server --concurrency-limit 2
observe ch07-burst 'cargo run -p grpc-client -- burst --calls 10 --delay-ms 500'
observe ch07-too-large 'cargo run -p grpc-client -- hello --name-bytes 100000'
observe ch07-unimplemented 'cargo run -p grpc-client -- countdown'
stop_server ch07-limit-log
start_server ch07-mtls grpc-server --mtls
observe ch07-mtls-none 'cargo run -p grpc-client -- hello --name Ada'
server_log ch07-mtls-none-log
observe ch07-mtls-none-eager 'cargo run -p grpc-client -- --connect eager hello --name Ada'
server_log ch07-mtls-none-eager-log
observe ch07-mtls-cert 'cargo run -p grpc-client -- --cert certs/client.pem --key certs/client.key hello --name Ada'
stop_server ch07-mtls-stop

# --- chapter 8: streaming -------------------------------------------------------
ch06_wait_for_ports
start_stack ch08-stack
ch06_observe_logged ch08-countdown ch08-stack 'cargo run -p grpc-client -- countdown --count 5 --interval-ms 200 --payload-bytes 100'
observe ch08-upload 'cargo run -p grpc-client -- upload --chunks 64 --chunk-bytes 16384'
observe ch08-echo 'cargo run -p grpc-client -- echo --chunks 5 --chunk-bytes 16'
ch06_observe_logged ch08-deadline ch08-stack 'cargo run -p grpc-client -- --deadline 0.5 countdown --count 20 --interval-ms 100'
stop_stack
grep -h ' stopped ' "$out/ch08-stack.txt" | grep streams_ > "$out/ch08-stack-stopped.txt" || true
observe ch08-cancel-tests 'cargo test -q -p streaming --test streaming cancel -- --test-threads 1 --format pretty'
observe ch08-flow-help 'cargo run -p streaming --bin flow_control -- --help'
observe ch08-flow-1mib 'cargo run -p streaming --bin flow_control'
observe ch08-flow-64kib 'cargo run -p streaming --bin flow_control -- --window 64KiB'
observe ch08-flow-download 'cargo run -p streaming --bin flow_control -- --direction download --window 64KiB --duration 1s'

# --- chapter 9: the stack -----------------------------------------------------
observe ch09-help 'cargo run -p stack -- --help'
GRPC_ADDR=127.0.0.1:50052 REST_ADDR=127.0.0.1:8444 start_stack ch09-env
observe ch09-healthz 'curl -sS --cacert certs/ca.pem https://localhost:8444/healthz'
observe ch09-port-in-use 'REST_ADDR=127.0.0.1:8444 cargo run -p stack'
stop_stack
observe ch09-missing-certs 'cargo run -p grpc-server -- --certs-dir /tmp/no-such-dir'

# Graceful shutdown: SIGTERM arrives while a 2-second call is in flight.
start_stack ch09-drain
(sleep 0.5 && kill -TERM "$stack_pid") &
observe ch09-drain-curl "curl -sS --cacert certs/ca.pem -H 'content-type: application/json' -d '{\"name\":\"Ada\",\"delay_ms\":2000}' https://localhost:8443/v1/greetings -w ' (HTTP %{http_code})\n'"
wait "$stack_pid" || true
sed -i -e "s#$root/##g" "$out"/ch09-drain.txt

# --- chapter 10: performance, measured ----------------------------------------
# Steps 1-3: against the stack (a debug build of its own code, like `cargo run`),
# then with the servers in the measuring process (--spawn). Kept short.
ch06_wait_for_ports
start_stack ch10-stack
observe ch10-reused 'cargo run --release --example latency_compare -- --calls 200 --warmup 20 --floor --repeat 3'
observe ch10-fresh 'cargo run --release --example latency_compare -- --calls 100 --warmup 5 --fresh-connections --floor'
observe ch10-choose 'cargo run --release -p perf --bin choose_deadline -- --method SayHello REST --concurrency 8 --calls 500'
stop_stack
observe ch10-spawn 'cargo run --release --example latency_compare -- --calls 200 --warmup 20 --spawn --floor --csv target/ch10-samples.csv'
head -4 "$root/target/ch10-samples.csv" > "$out/ch10-csv-head.txt"

# --- chapter 10: deadlines ------------------------------------------------------
# Steps 4-5: one slow call, a deadline too tight and one loose enough, over gRPC;
# then the REST client's timeout over HTTP/2 and HTTP/1.1. The server logs say
# what each server learned, and when.
ch06_wait_for_ports
start_server ch10-deadline-server grpc-server
observe ch10-deadline-exceeded 'cargo run -p grpc-client -- --deadline 0.5 hello --name Ada --delay-ms 800'
server_log ch10-deadline-exceeded-log
observe ch10-deadline-eager 'cargo run -p grpc-client -- --connect eager --deadline 0.5 hello --name Ada --delay-ms 800'
server_log ch10-deadline-eager-log
observe ch10-deadline-ok 'cargo run -p grpc-client -- --deadline 2 hello --name Ada --delay-ms 800 --repeat 2'
server_log ch10-deadline-ok-log

# Step 6: the frontend on 50061 in front of that greeter. Started from its
# binary, as `cargo run -p perf --bin frontend` would, with its own log.
ch10_start_frontend() {
    ch10_frontend_log=$(mktemp)
    RUST_LOG=info "$root/target/debug/frontend" "$@" > "$ch10_frontend_log" 2>&1 &
    ch10_frontend_pid=$!
    for _ in $(seq 100); do
        grep -q "server listening" "$ch10_frontend_log" && break
        sleep 0.1
    done
    if ! grep -q "server listening" "$ch10_frontend_log"; then
        echo "the frontend did not start; its log:" >&2
        cat "$ch10_frontend_log" >&2
        exit 1
    fi
    echo "\$ cargo run -p perf --bin frontend${*:+ -- $*}" > "$out/ch10-propagation-frontend.txt"
    cat "$ch10_frontend_log" >> "$out/ch10-propagation-frontend.txt"
    ch10_frontend_seen=$(wc -l < "$ch10_frontend_log")
}
# What the frontend logged since the last call, in observed/NAME.txt.
ch10_frontend_log() {
    sleep 0.5
    tail -n +"$((ch10_frontend_seen + 1))" "$ch10_frontend_log" | sed -e "s#$root/##g" > "$out/$1.txt"
    ch10_frontend_seen=$(wc -l < "$ch10_frontend_log")
}
ch10_start_frontend
observe ch10-propagation-ok 'cargo run -p grpc-client -- --target https://localhost:50061 --deadline 2 hello --name Ada --delay-ms 800'
ch10_frontend_log ch10-propagation-ok-frontend
server_log ch10-propagation-ok-backend
observe ch10-propagation-deadline 'cargo run -p grpc-client -- --target https://localhost:50061 --deadline 0.5 hello --name Ada --delay-ms 3000'
ch10_frontend_log ch10-propagation-deadline-frontend
server_log ch10-propagation-deadline-backend
observe ch10-propagation-cancel 'cargo run -p grpc-client -- --target https://localhost:50061 --deadline 10 hello --name Ada --delay-ms 3000 --cancel-after 0.3'
ch10_frontend_log ch10-propagation-cancel-frontend
server_log ch10-propagation-cancel-backend
observe ch10-propagation-fail-fast 'cargo run -p grpc-client -- --target https://localhost:50061 --deadline 0.04 hello --name Ada --delay-ms 800'
ch10_frontend_log ch10-propagation-fail-fast-frontend
server_log ch10-propagation-fail-fast-backend
kill -INT "$ch10_frontend_pid" 2> /dev/null || true
wait "$ch10_frontend_pid" || true
rm -f "$ch10_frontend_log"
stop_server ch10-deadline-server-stop

start_server ch10-rest-timeout-server rest-server
observe ch10-rest-timeout-h2 'cargo run --example rest_client -- https://localhost:8443/v1/greetings --name Ada --delay-ms 800 --timeout 0.5'
server_log ch10-rest-timeout-h2-log
observe ch10-rest-timeout-h1 'cargo run --example rest_client -- https://localhost:8443/v1/greetings --name Ada --delay-ms 800 --timeout 0.5 --http1'
server_log ch10-rest-timeout-h1-log
observe ch10-rest-timeout-ok 'cargo run --example rest_client -- https://localhost:8443/v1/greetings --name Ada --delay-ms 800 --timeout 2'
server_log ch10-rest-timeout-ok-log
stop_server ch10-rest-timeout-server-stop

# Step 8: the retry storm, both policies, same settings (in-process; no ports).
observe ch10-retry-naive 'cargo run -p perf --bin retry_storm -- --policy naive'
observe ch10-retry-budgeted 'cargo run -p perf --bin retry_storm -- --policy budgeted'

# --- chapter 11: flow control is not backpressure ------------------------------
# The experiment's quick mode (about 30 s): an unbounded and a reserve-before-
# receive server, each a fresh process on a free port, under the same open-loop
# load. Its table and plots go beside its output.
observe ch11-quick 'cargo run -p ingest -- compare --quick'
cp "$root/target/experiments/ch11/summary.md" "$out/ch11-quick-summary.md"
mv "$root/target/experiments/ch11/queue.svg" "$out/ch11-quick-queue.svg"
mv "$root/target/experiments/ch11/sends.svg" "$out/ch11-quick-sends.svg"

# By hand (about 10 s): a server that stops after one call, started from its
# binary as `cargo run -p ingest -- serve` would; it writes its address to a
# ready file once it listens. Then the load generator against it.
ch11_ready=$(mktemp -u)
echo "\$ cargo run -p ingest -- serve --plan 40ms@0s --calls 1" > "$out/ch11-serve.txt"
"$root/target/debug/ingest" serve --plan 40ms@0s --calls 1 --ready-file "$ch11_ready" >> "$out/ch11-serve.txt" 2>&1 &
ch11_pid=$!
for _ in $(seq 100); do
    [ -s "$ch11_ready" ] && break
    sleep 0.1
done
observe ch11-loadgen 'cargo run -p loadgen -- --step 80/s:3s ingest'
wait "$ch11_pid" || true
rm -f "$ch11_ready"
sed -i -e "s#$root/##g" "$out/ch11-serve.txt"

# --- chapter 12: fixed or adaptive admission? ----------------------------------
# Quick mode (about 40 s, release like the full run): one block of the four
# policies at a quarter of the seed's time scale, each run a fresh server and
# client process. The chapter's tables come from the full run in
# book/src/results/ch12/ (cargo run --release -p admission -- --blocks 5).
observe ch12-quick 'cargo run --release -p admission -- --quick'
mv "$root/target/experiments/ch12/p95.svg" "$out/ch12-quick-p95.svg"
mv "$root/target/experiments/ch12/budget.svg" "$out/ch12-quick-budget.svg"
mv "$root/target/experiments/ch12/sends.svg" "$out/ch12-quick-sends.svg"
observe ch12-bad-scale 'cargo run --release -p admission -- --quick --scale 0'

# --- chapter 13: wait, reject, retry or drop -----------------------------------
# Quick mode (about 40 s, a debug build like the reader's first run): every
# policy at 0.5, 1, 2 and 3x capacity, 1.5 s each, on an in-process server.
# The chapter's table and charts come from the full run in book/src/results/ch13/.
observe ch13-quick 'cargo run -p overload -- --quick'
mv "$root/target/experiments/ch13/goodput.svg" "$out/ch13-quick-goodput.svg"
mv "$root/target/experiments/ch13/wasted.svg" "$out/ch13-quick-wasted.svg"
mv "$root/target/experiments/ch13/amplification.svg" "$out/ch13-quick-amplification.svg"
observe ch13-bad-load 'cargo run -p overload -- --loads 0.5,zero'
observe ch13-bad-warmup 'cargo run -p overload -- --step 1s --warmup 2s'

# --- chapter 14: the per-call price --------------------------------------------
# Quick mode (about 20 s, release: a debug build prices the compiler's settings):
# two arms, one repeat, unary and streaming ramps against a server pinned to
# CPU 0. The chapter's tables come from the full run in book/src/results/ch14/.
observe ch14-quick 'cargo run --release -p per-call --bin per_call -- --quick'
mv "$root/target/experiments/ch14/capacity.svg" "$out/ch14-quick-capacity.svg"
mv "$root/target/experiments/ch14/p99-unary.svg" "$out/ch14-quick-p99-unary.svg"
mv "$root/target/experiments/ch14/p99-stream.svg" "$out/ch14-quick-p99-stream.svg"
observe ch14-bad-arm 'cargo run --release -p per-call --bin per_call -- --arms ct-later'

echo "observed outputs written to $out" >&2

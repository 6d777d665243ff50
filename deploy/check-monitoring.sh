#!/usr/bin/env bash
# Monitoring, run for real: a real Prometheus with deploy/prometheus-host.yml,
# scraping the workshop's own programs on this machine.
#
#   deploy/check-monitoring.sh
#       CI's check. Starts the stack, chapter 11's ingest server and chapter
#       13's experiment with their metrics on the ports the host config
#       scrapes, makes real calls (answered, refused, out of time; gRPC and
#       REST), then asks Prometheus every query of the Grafana dashboard
#       (deploy/grafana/dashboards/workshop.json) and fails, naming the panel
#       and the query, unless each returns at least one series: a renamed
#       metric breaks CI, not a reader's dashboard.
#
#   deploy/check-monitoring.sh --query 'EXPR'
#       Asks a throwaway Prometheus one question about the programs already
#       running (for example `METRICS_ADDR=127.0.0.1:9464 cargo run`): starts
#       it, waits for two scrapes, prints the result and stops it.
#
# Needs prometheus, promtool, jq and curl (Debian: apt-get install prometheus
# jq curl). Every process it starts is stopped however it ends, and every wait
# is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."

CONFIG=deploy/prometheus-host.yml
DASHBOARD=${DASHBOARD:-deploy/grafana/dashboards/workshop.json}
# The metrics ports CONFIG scrapes: the stack, ingest and overload.
STACK_METRICS=127.0.0.1:9464
INGEST_METRICS=127.0.0.1:9466
OVERLOAD_METRICS=127.0.0.1:9467
# What Grafana's own variables ($__rate_interval, ...) stand for here.
WINDOW=1m
# The longest any one wait may take, in seconds.
PATIENCE=30

die() { echo "check-monitoring: $*" >&2; exit 1; }

for tool in prometheus promtool jq curl; do
    command -v "$tool" >/dev/null || die "$tool is missing (Debian: apt-get install prometheus jq curl)"
done

tmp=$(mktemp -d)
pids=()
cleanup() {
    # SIGTERM, not SIGINT: a script's background jobs ignore SIGINT. Each
    # program drains and exits on it; one that has not after 5 s is killed.
    local pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_until WHAT COMMAND...: COMMAND every 0.2 s until it succeeds, at most
# PATIENCE seconds.
wait_until() {
    local what=$1 deadline=$((SECONDS + PATIENCE))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || die "gave up after ${PATIENCE}s waiting for $what"
        sleep 0.2
    done
}

listening() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

# Runs PROGRAM ARGS... in the background, its output in $tmp/NAME.log.
start() {
    local name=$1
    shift
    "$@" >"$tmp/$name.log" 2>&1 &
    pids+=($!)
}

start_prometheus() {
    local port
    for port in $(seq 19090 19190); do
        listening "127.0.0.1:$port" || break
    done
    PROM=http://127.0.0.1:$port
    start prometheus prometheus --config.file="$CONFIG" --storage.tsdb.path="$tmp/prometheus" \
        --web.listen-address="127.0.0.1:$port"
    wait_until "Prometheus at $PROM (log: $(tail -n 3 "$tmp/prometheus.log" 2>/dev/null))" \
        curl -fs -o /dev/null --max-time 1 "$PROM/-/ready"
}

# query EXPR: the result's series, one JSON object a line; a query that
# Prometheus rejects is an error with its reason.
query() {
    local answer
    answer=$(curl -sS --max-time 5 "$PROM/api/v1/query" --data-urlencode "query=$1")
    jq -c 'if .status == "success" then .data.result[] else error(.error) end' <<<"$answer"
}

# Each series as `name{label="value",...} value`, sorted.
show() {
    jq -r '(.metric.__name__ // "") + "{"
        + (.metric | del(.__name__) | to_entries | map("\(.key)=\"\(.value)\"") | join(","))
        + "} " + .value[1]' | sort
}

scraped_twice() { [ -n "$(query 'min(count_over_time(up[1m])) >= 2')" ]; }
is_up() { [ -n "$(query "up{instance=\"$1\"} == 1")" ]; }

if [ "${1:-}" = --query ]; then
    [ $# -eq 2 ] || die "usage: $0 --query 'EXPR'"
    start_prometheus
    wait_until "two scrapes of every target in $CONFIG" scraped_twice
    version=$(curl -sS --max-time 5 "$PROM/api/v1/status/buildinfo" | jq -r .data.version)
    up=$(query 'up == 1' | jq -r .metric.instance | sort | paste -sd ' ' -)
    [ -n "$up" ] || die "no target of $CONFIG answers: start the stack with METRICS_ADDR=$STACK_METRICS cargo run"
    echo "Prometheus $version with $CONFIG: $(query 'up == 1' | wc -l) of $(query up | wc -l) targets up ($up)"
    result=$(query "$2")
    [ -n "$result" ] || die "no series for $2"
    show <<<"$result"
    exit 0
fi
[ $# -eq 0 ] || die "usage: $0 [--query 'EXPR']"

echo "promtool check config: the compose profile's and the host's"
promtool check config deploy/prometheus.yml "$CONFIG"

for addr in "$STACK_METRICS" "$INGEST_METRICS" "$OVERLOAD_METRICS"; do
    ! listening "$addr" || die "$addr is taken (ss -ltnp says by what); $CONFIG scrapes it"
done

# Built as `cargo run -p PACKAGE` builds them (nothing to do after the tests).
for package in workshop grpc-client ingest loadgen overload; do
    cargo build -q --locked -p "$package" --bin "$package"
done
SECONDS=0

# The programs, on any free TLS ports; their metrics on the ports CONFIG names.
start stack target/debug/workshop --grpc-addr 127.0.0.1:0 --rest-addr 127.0.0.1:0 \
    --metrics-addr "$STACK_METRICS" --ready-file "$tmp/stack.ready"
wait_until "the stack's --ready-file (log: $tmp/stack.log)" test -s "$tmp/stack.ready"
grpc=https://localhost:$(sed -n 1p "$tmp/stack.ready" | cut -d: -f2)
rest=https://localhost:$(sed -n 2p "$tmp/stack.ready" | cut -d: -f2)
start ingest target/debug/ingest serve --addr 127.0.0.1:0 --metrics-addr "$INGEST_METRICS" \
    --record "$tmp/ingest" --ready-file "$tmp/ingest.ready"
# One cell, long enough to outlast the check (it is stopped at the end).
start overload target/debug/overload --policies reject --transports grpc --loads 0.5 \
    --step 60s --warmup 1s --out "$tmp/overload" --metrics-addr "$OVERLOAD_METRICS"
wait_until "ingest's --ready-file" test -s "$tmp/ingest.ready"
ingest=https://localhost:$(cut -d: -f2 "$tmp/ingest.ready")

start_prometheus
wait_until "two scrapes of every target in $CONFIG" scraped_twice
for addr in "$STACK_METRICS" "$INGEST_METRICS" "$OVERLOAD_METRICS"; do
    wait_until "Prometheus to find $addr up" is_up "$addr"
done

echo "calls: gRPC and REST, answered, refused and out of time"
client() { target/debug/grpc-client --target "$grpc" --ca certs/ca.pem "$@" >>"$tmp/calls.log" 2>&1; }
greet() {
    curl -sS --cacert certs/ca.pem -H 'content-type: application/json' -d "$1" \
        -o /dev/null -w '%{http_code}' "${@:2}" "$rest/v1/greetings" 2>>"$tmp/calls.log"
}
client hello --name Ada
client countdown --count 3 --interval-ms 50
! client hello --name '' || die "a blank name was accepted over gRPC"
! client --deadline 0.2 hello --delay-ms 1000 || die "a 1 s call met a 0.2 s deadline"
[ "$(greet '{"name":"Ada"}')" = 200 ] || die "REST greeting failed"
[ "$(greet '{"name":""}')" = 400 ] || die "REST accepted a blank name"
! greet '{"name":"Ada","delay_ms":1000}' --max-time 0.3 >/dev/null || die "a 1 s REST call beat curl's 0.3 s"
target/debug/loadgen --target "$ingest" --out "$tmp/loadgen" --step 50/s:2s ingest >>"$tmp/calls.log" 2>&1

echo "every panel query of $DASHBOARD (Grafana's \$__ windows as $WINDOW, template variables as .*):"
# Title and query of every target of every panel, rows' panels included,
# NUL-separated (a query may span lines).
panels() {
    jq -j --arg w "$WINDOW" '
        .. | objects | select(has("targets")) | (.title // "untitled") as $title
        | .targets[] | select(.expr) | .expr
        | gsub("\\$__(rate_interval|interval|range)"; $w)
        | gsub("\\$\\{?[A-Za-z_][A-Za-z0-9_]*(:[a-z]+)?\\}?"; ".*")
        | "\($title)\u0000\(.)\u0000"' "$DASHBOARD"
}
# The labels a query groups by (`by (a, b)`), le apart (histogram_quantile
# consumes it), as a JSON array: a series without one of them means the panel
# groups by a label the metric does not have.
grouped_by() {
    { grep -oE '\bby *\([^)]*\)' <<<"$1" || true; } | sed -E 's/^by *\(//; s/\)$//' | tr ',' '\n' |
        tr -d ' ' | jq -Rsc 'split("\n") | map(select(. != "" and . != "le")) | unique'
}
# series EXPR LABELS: how many series EXPR has that carry every one of LABELS.
series() {
    query "$1" | jq -c --argjson want "$2" 'select(.metric as $m | all($want[]; $m[.] != null))' | wc -l
}
failed=0 checked=0 deadline=$((SECONDS + PATIENCE))
while IFS= read -r -d '' title && IFS= read -r -d '' expr; do
    checked=$((checked + 1))
    labels=$(grouped_by "$expr")
    # A rate() needs two scrapes after the calls: retry until the deadline.
    while n=$(series "$expr" "$labels") && [ "$n" -eq 0 ] && ((SECONDS < deadline)); do
        sleep 0.5
    done
    printf '  %3d series  %s: %s\n' "$n" "$title" "$expr"
    if [ "$n" -eq 0 ]; then
        echo "FAILED: panel \"$title\" asks \`$expr\`, and Prometheus has no series for it" \
            "$([ "$labels" = '[]' ] || echo "that carries each of $labels")" >&2
        failed=$((failed + 1))
    fi
done < <(panels)
[ "$checked" -gt 0 ] || die "no panel query found in $DASHBOARD"
echo "$((checked - failed)) passed, $failed failed (in ${SECONDS}s, builds apart)"
if [ "$failed" -gt 0 ]; then
    echo "targets:" >&2
    query up | show >&2
    die "$failed of $checked panel queries returned nothing"
fi

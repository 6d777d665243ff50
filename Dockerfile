# The workshop's servers as one image (and chapters 14 and 17's `per_call`
# and `cpu_limits`, which deploy/k8s/ runs on a cluster). `docker compose up`
# (see docker-compose.yml) runs them; the Rust toolchain is only in the build
# stage.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p certs -p grpc-server -p rest-server -p stack -p per-call -p cpu-limits

FROM debian:bookworm-slim
COPY --from=build /src/target/release/certs \
                  /src/target/release/grpc-server \
                  /src/target/release/rest-server \
                  /src/target/release/stack \
                  /src/target/release/per_call \
                  /src/target/release/cpu_limits /usr/local/bin/
# The PKI lives in a volume; inside a container the servers must listen on every
# interface for the published ports to reach them.
ENV CERTS_DIR=/certs \
    GRPC_ADDR=0.0.0.0:50051 \
    REST_ADDR=0.0.0.0:8443
EXPOSE 50051 8443
CMD ["stack"]

//! docker-compose.yml and the Dockerfile, checked as text. There is no Docker
//! engine here, and a YAML parser would be a dependency for one test; the
//! compose file is plain enough (two-space indents, one key per line) for a few
//! line rules to read. If it outgrows them, these tests fail and say where.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    net::SocketAddr,
    path::{Path, PathBuf},
};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = repo_root().join(relative);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Each service's lines (trimmed), keyed by name. A service starts at a line
/// indented by two spaces under `services:` and runs until the next one.
fn services(compose: &str) -> BTreeMap<String, Vec<String>> {
    let mut services = BTreeMap::<String, Vec<String>>::new();
    let (mut in_services, mut current) = (false, None::<String>);
    for line in compose.lines() {
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        match line.len() - line.trim_start().len() {
            0 => {
                in_services = text == "services:";
                current = None;
            }
            2 if in_services => {
                let name = text
                    .strip_suffix(':')
                    .expect("a service name line")
                    .to_string();
                services.insert(name.clone(), Vec::new());
                current = Some(name);
            }
            _ => {
                if let Some(name) = &current {
                    services.get_mut(name).unwrap().push(text.to_string());
                }
            }
        }
    }
    services
}

/// The services built from this workspace: all but the monitoring profile's
/// third-party images (Prometheus, Grafana).
fn workshop_services(compose: &str) -> BTreeMap<String, Vec<String>> {
    let mut services = services(compose);
    services.retain(|_, lines| !lines.iter().any(|l| l.starts_with("profiles:")));
    services
}

/// The value of `key: value` in a service (also finds environment entries).
fn value<'a>(service: &'a [String], key: &str) -> Option<&'a str> {
    service.iter().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        Some(rest.trim().trim_matches('"'))
    })
}

/// The words of an exec-form command, `["certs", "--dir", "/certs"]`: the
/// quoted strings, which sit between every other pair of quotes.
fn exec_form(text: &str) -> Vec<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

/// The container ports a service publishes: the last part of each
/// `- "host-ip:host-port:container-port"` entry under `ports:`.
fn published_ports(service: &[String]) -> Vec<u16> {
    service
        .iter()
        .skip_while(|line| *line != "ports:")
        .skip(1)
        .map_while(|line| line.strip_prefix("- "))
        .map(|entry| {
            let port = entry.trim_matches('"').rsplit(':').next().unwrap();
            port.parse()
                .unwrap_or_else(|_| panic!("bad port entry {entry}"))
        })
        .collect()
}

/// The binaries of every workspace member: its package name when it has
/// `src/main.rs`, and one per file in `src/bin/`. (No member declares
/// `[[bin]]` targets; the assertion below would notice if one did.)
fn workspace_binaries() -> BTreeSet<String> {
    let root_manifest = read("Cargo.toml");
    let members = root_manifest
        .lines()
        .skip_while(|line| !line.starts_with("members"))
        .skip(1)
        .take_while(|line| !line.starts_with(']'))
        .map(|line| line.trim().trim_end_matches(',').trim_matches('"'))
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        // `chapters/*`: every folder there that holds a crate (the excluded
        // chapter-11 folder holds three, listed on their own).
        .flat_map(|member| match member.strip_suffix("/*") {
            Some(parent) => {
                let mut crates: Vec<String> = fs::read_dir(repo_root().join(parent))
                    .unwrap_or_else(|e| panic!("cannot list {parent}: {e}"))
                    .map(|entry| entry.unwrap().path())
                    .filter(|dir| dir.join("Cargo.toml").is_file())
                    .map(|dir| format!("{parent}/{}", dir.file_name().unwrap().to_string_lossy()))
                    .collect();
                crates.sort();
                crates
            }
            None => vec![member.to_string()],
        });
    let mut binaries = BTreeSet::new();
    for member in members {
        let dir = repo_root().join(&member);
        let manifest = read(&format!("{member}/Cargo.toml"));
        assert!(!manifest.contains("[[bin]]"), "{member}: update this test");
        let package = manifest
            .lines()
            .skip_while(|line| *line != "[package]")
            .find_map(|line| line.strip_prefix("name = "))
            .unwrap_or_else(|| panic!("{member} has no package name"))
            .trim_matches('"');
        if dir.join("src/main.rs").is_file() {
            binaries.insert(package.to_string());
        }
        if let Ok(entries) = fs::read_dir(dir.join("src/bin")) {
            for entry in entries {
                let path = entry.unwrap().path();
                binaries.insert(path.file_stem().unwrap().to_string_lossy().into_owned());
            }
        }
    }
    binaries
}

/// The Dockerfile with `\` continuations joined, so an instruction is one line.
fn dockerfile_instructions() -> Vec<String> {
    read("Dockerfile")
        .replace("\\\n", " ")
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(String::from)
        .collect()
}

fn port_of(addr: &str) -> u16 {
    addr.parse::<SocketAddr>().unwrap().port()
}

#[test]
fn grpc_and_rest_services_publish_the_default_ports_and_run_their_servers() {
    let services = services(&read("docker-compose.yml"));
    let grpc_port = port_of(grpc_server::server::DEFAULT_ADDR);
    let rest_port = port_of(rest_server::server::DEFAULT_ADDR);
    assert_eq!((grpc_port, rest_port), (50051, 8443));

    for (name, binary, env, port) in [
        ("grpc", "grpc-server", "GRPC_ADDR", grpc_port),
        ("rest", "rest-server", "REST_ADDR", rest_port),
    ] {
        let service = services
            .get(name)
            .unwrap_or_else(|| panic!("no `{name}` service in {services:?}"));
        assert_eq!(exec_form(value(service, "command").unwrap()), [binary]);
        // Inside a container the server must listen on every interface, or the
        // published port leads nowhere.
        assert_eq!(
            value(service, env),
            Some(format!("0.0.0.0:{port}").as_str()),
            "{name}"
        );
        assert_eq!(published_ports(service), [port], "{name}");
    }
}

#[test]
fn certs_service_creates_the_pki_and_builds_the_image_the_others_run() {
    let services = workshop_services(&read("docker-compose.yml"));
    let certs = &services["certs"];
    assert_eq!(exec_form(value(certs, "command").unwrap())[0], "certs");

    // One service builds the image; every service runs that same image.
    let image = value(certs, "image").unwrap();
    assert_eq!(value(certs, "build"), Some("."));
    for (name, service) in &services {
        assert_eq!(value(service, "image"), Some(image), "{name}");
    }
}

#[test]
fn every_binary_the_containers_run_is_built_by_the_dockerfile_and_exists() {
    let mut commands: BTreeSet<String> = workshop_services(&read("docker-compose.yml"))
        .values()
        .map(|service| exec_form(value(service, "command").unwrap())[0].clone())
        .collect();
    let instructions = dockerfile_instructions();
    let default_cmd = instructions
        .iter()
        .find_map(|line| line.strip_prefix("CMD "))
        .expect("the Dockerfile has a CMD");
    commands.insert(exec_form(default_cmd)[0].clone());
    assert_eq!(
        commands,
        BTreeSet::from(["certs", "grpc-server", "rest-server", "stack"].map(String::from))
    );

    let binaries = workspace_binaries();
    let build = instructions
        .iter()
        .find(|line| line.starts_with("RUN cargo build"))
        .expect("the Dockerfile runs cargo build");
    let copy = instructions
        .iter()
        .find(|line| line.starts_with("COPY --from=build"))
        .expect("the Dockerfile copies the binaries out of the build stage");
    for binary in &commands {
        // Each of these is its package's main binary, so `-p <binary>` builds it.
        assert!(
            binaries.contains(binary),
            "{binary} is not a workspace binary"
        );
        let words: Vec<&str> = build.split_whitespace().collect();
        assert!(
            words.windows(2).any(|w| w == ["-p", binary.as_str()]),
            "`{build}` does not build {binary}"
        );
        assert!(
            copy.split_whitespace()
                .any(|word| word.ends_with(&format!("/target/release/{binary}"))),
            "`{copy}` does not copy {binary}"
        );
    }
}

#[test]
fn prometheus_scrapes_each_servers_metrics_port_and_the_dashboard_asks_for_real_names() {
    let compose = read("docker-compose.yml");
    let services = services(&compose);
    let scrape = read("deploy/prometheus.yml");
    for (name, env) in [("grpc", "GRPC_METRICS_ADDR"), ("rest", "REST_METRICS_ADDR")] {
        let addr = value(&services[name], env).unwrap_or_else(|| panic!("{name} sets no {env}"));
        let target = format!("\"{name}:{}\"", port_of(addr));
        assert!(
            scrape.contains(&target),
            "deploy/prometheus.yml does not scrape {target}"
        );
    }
    for (name, mount) in [
        ("prometheus", "./deploy/prometheus.yml:"),
        ("grafana", "./deploy/grafana/dashboards:"),
    ] {
        let service = services
            .get(name)
            .unwrap_or_else(|| panic!("no {name} service"));
        assert!(
            service.iter().any(|l| l.contains(mount)),
            "{name} does not mount {mount}"
        );
    }

    // Every metric a panel queries is one the workshop registers.
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/dashboards/workshop.json")).unwrap();
    let registered: String = [
        "chapters/04-grpc-greeter/src/metrics.rs",
        "chapters/05-rest-greeter/src/metrics.rs",
        "chapters/11-backpressure/ingest/src/metrics.rs",
        "chapters/13-overload/src/metrics.rs",
    ]
    .map(read)
    .concat();
    let mut queried = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let names = expr
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|w| {
                    ["grpc_server_", "http_request", "ingest_", "overload_"]
                        .iter()
                        .any(|p| w.starts_with(p))
                });
            for name in names {
                let family = ["_bucket", "_total"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(name);
                assert!(
                    registered.contains(&format!("\"{family}\"")),
                    "panel {:?} queries {name}, which no metrics.rs registers",
                    panel["title"]
                );
                queried += 1;
            }
        }
    }
    assert!(
        queried >= 10,
        "only {queried} metric names found in the dashboard"
    );
}

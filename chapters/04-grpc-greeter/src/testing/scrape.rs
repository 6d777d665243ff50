//! A Prometheus scrape for tests: fetch `/metrics` over plain HTTP/1.1 and
//! read the text exposition format strictly, so that a test fails on a line
//! Prometheus itself would reject, not only on a wrong number.

use std::{collections::BTreeMap, net::SocketAddr};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use super::within;

/// One scrape: every sample, keyed by its series as written
/// (`name{label="value",...}`), and each family's declared type.
#[derive(Debug, Default)]
pub struct Scrape {
    pub samples: BTreeMap<String, f64>,
    pub types: BTreeMap<String, String>,
}

impl Scrape {
    /// The sample of `series`, or 0 if the family has not seen it yet (a
    /// label set appears with its first increment).
    pub fn value(&self, series: &str) -> f64 {
        self.samples.get(series).copied().unwrap_or(0.0)
    }
}

/// GETs `/metrics` from `addr` and parses it; panics with the reason if the
/// answer is not 200, not the text format's content type, or not valid.
pub async fn scrape(addr: SocketAddr) -> Scrape {
    let raw = within("scrape /metrics", async {
        let mut stream = TcpStream::connect(addr).await.expect("connect to /metrics");
        let request = format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.expect("read");
        raw
    })
    .await;
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "scrape answered {head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "scrape's head {head}"
    );
    parse(body).unwrap_or_else(|e| panic!("invalid exposition: {e}\n{body}"))
}

/// Scrapes until `done` holds, within [`WAIT`](super::WAIT): a call's end is
/// recorded when its response finishes, a moment after the client has its
/// answer.
pub async fn scrape_until(addr: SocketAddr, done: impl Fn(&Scrape) -> bool) -> Scrape {
    within("the expected scrape", async {
        loop {
            let s = scrape(addr).await;
            if done(&s) {
                return s;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
}

/// Reads the text exposition format (version 0.0.4). Every sample must
/// belong to a family declared by `# TYPE` before it.
pub fn parse(text: &str) -> Result<Scrape, String> {
    let mut scrape = Scrape::default();
    for (n, line) in text.lines().enumerate() {
        let at = |e: &str| format!("line {}: {e}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.split_whitespace();
            if let (Some("TYPE"), Some(name), Some(kind)) =
                (words.next(), words.next(), words.next())
            {
                if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                    return Err(at("unknown type"));
                }
                check_name(name).map_err(|e| at(&e))?;
                scrape.types.insert(name.to_owned(), kind.to_owned());
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').ok_or_else(|| at("no value"))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| at("bad value"))?,
        };
        let name = match series.split_once('{') {
            Some((name, labels)) => {
                let labels = labels
                    .strip_suffix('}')
                    .ok_or_else(|| at("unclosed labels"))?;
                check_labels(labels).map_err(|e| at(&e))?;
                name
            }
            None => series,
        };
        check_name(name).map_err(|e| at(&e))?;
        let family = ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|f| scrape.types.contains_key(*f))
            })
            .unwrap_or(name);
        if !scrape.types.contains_key(family) {
            return Err(at("sample of an undeclared family"));
        }
        if scrape.samples.insert(series.to_owned(), value).is_some() {
            return Err(at("duplicate series"));
        }
    }
    Ok(scrape)
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(())
    } else {
        Err(format!("bad metric name {name:?}"))
    }
}

/// `k="v",k2="v2"`, values with `\\`, `\"` and `\n` escapes.
fn check_labels(mut rest: &str) -> Result<(), String> {
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").ok_or("a label without =\"")?;
        check_name(key).map_err(|_| format!("bad label name {key:?}"))?;
        let mut escaped = false;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                let closes = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                closes
            })
            .map(|(i, _)| i)
            .ok_or("an unterminated label value")?;
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn valid_text_parses_and_invalid_lines_are_named() {
        let ok = "# HELP a_total A.\n# TYPE a counter\na_total{x=\"1\",y=\"q\\\"\"} 3\n\
                  # TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.5\nh_count 2\n";
        let s = parse(ok).unwrap();
        assert_eq!(s.value("a_total{x=\"1\",y=\"q\\\"\"}"), 3.0);
        assert_eq!(s.value("h_count"), 2.0);
        for bad in [
            "b 1\n",
            "# TYPE a counter\na_total{x=1} 1\n",
            "# TYPE a counter\na_total one\n",
            "# TYPE a thing\n",
            "# TYPE a counter\na_total 1\na_total 2\n",
            "# TYPE 1a counter\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}

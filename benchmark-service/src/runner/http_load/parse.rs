//! ApacheBench's (2.x) and wrk's (4.x) text output as typed reports.
//!
//! Pure functions of the text: a required figure that is missing is an error naming it (a tool
//! that fails early prints only its error), an optional one that is missing or unparsable is 0
//! or absent, and nothing here panics on any input.

/// The rows of ApacheBench's "Percentage of the requests served within a certain time" table.
pub const PERCENTAGES: [u32; 9] = [50, 66, 75, 80, 90, 95, 98, 99, 100];

/// What an ApacheBench run reported.
#[derive(Debug, Clone, PartialEq)]
pub struct AbReport {
    /// `Complete requests`.
    pub complete: u64,
    /// `Failed requests` (connect, receive, length and exception failures).
    pub failed: u64,
    /// `Non-2xx responses` (0 when ab printed no such line).
    pub non_2xx: u64,
    /// `Time taken for tests`, seconds.
    pub time_taken_s: f64,
    /// `Requests per second … (mean)`.
    pub requests_per_second: f64,
    /// `Time per request … (mean)` — the latency a client sees, ms (not the
    /// "across all concurrent requests" line).
    pub time_per_request_ms: f64,
    /// The minimum of the `Total:` row of the connection times, ms, when printed.
    pub min_ms: Option<f64>,
    /// The percentage table: (percent, ms), in ab's order.
    pub percentages: Vec<(u32, f64)>,
}

impl AbReport {
    /// The table value for `percent`, if ab printed it.
    pub fn percentage(&self, percent: u32) -> Option<f64> {
        lookup(&self.percentages, percent)
    }
}

/// What a wrk run reported.
#[derive(Debug, Clone, PartialEq)]
pub struct WrkReport {
    /// Requests completed (`N requests in Ts, …`).
    pub requests: u64,
    /// The run's duration, seconds (from the same line).
    pub duration_s: f64,
    /// `Requests/sec`.
    pub requests_per_second: f64,
    /// Thread stats latency average, ms.
    pub latency_avg_ms: f64,
    /// Thread stats latency standard deviation, ms.
    pub latency_stdev_ms: f64,
    /// Thread stats latency maximum, ms.
    pub latency_max_ms: f64,
    /// The `--latency` distribution: (percent, ms) — wrk prints 50, 75, 90 and 99.
    pub percentages: Vec<(u32, f64)>,
    /// Sum of the `Socket errors` line (connect, read, write, timeout).
    pub socket_errors: u64,
    /// `Non-2xx or 3xx responses` (0 when wrk printed no such line).
    pub non_2xx: u64,
}

impl WrkReport {
    /// The distribution value for `percent`, if wrk printed it.
    pub fn percentage(&self, percent: u32) -> Option<f64> {
        lookup(&self.percentages, percent)
    }
}

fn lookup(table: &[(u32, f64)], percent: u32) -> Option<f64> {
    table.iter().find(|(p, _)| *p == percent).map(|(_, v)| *v)
}

/// The first whitespace-separated token after `label` on a line starting with it.
fn value_after<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    line.trim_start()
        .strip_prefix(label)?
        .split_whitespace()
        .next()
}

/// Parses ApacheBench's output (2.x). Requires `Complete requests`, `Requests per second` and
/// the mean `Time per request`; everything else is optional. The error names what is missing
/// (ab prints only its error, e.g. `apr_socket_recv: Connection refused`, when it fails early).
pub fn parse_ab(text: &str) -> Result<AbReport, String> {
    let mut complete = None;
    let mut failed = 0;
    let mut non_2xx = 0;
    let mut time_taken_s = 0.0;
    let mut rps = None;
    let mut tpr = None;
    let mut min_ms = None;
    let mut percentages = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        if let Some(v) = value_after(line, "Complete requests:") {
            complete = v.parse::<u64>().ok();
        } else if let Some(v) = value_after(line, "Failed requests:") {
            failed = v.parse().unwrap_or(0);
        } else if let Some(v) = value_after(line, "Non-2xx responses:") {
            non_2xx = v.parse().unwrap_or(0);
        } else if let Some(v) = value_after(line, "Time taken for tests:") {
            time_taken_s = v.parse().unwrap_or(0.0);
        } else if let Some(v) = value_after(line, "Requests per second:") {
            rps = v.parse::<f64>().ok();
        } else if let Some(v) = value_after(line, "Time per request:") {
            // Two such lines; the first is "(mean)", the second "(mean, across all …)".
            if tpr.is_none() && !line.contains("across") {
                tpr = v.parse::<f64>().ok();
            }
        } else if let Some(v) = value_after(line, "Total:") {
            min_ms = v.parse::<f64>().ok();
        } else if line.starts_with("Percentage of the requests") {
            in_table = true;
        } else if in_table {
            let mut tokens = line.split_whitespace();
            let percent = tokens
                .next()
                .and_then(|t| t.strip_suffix('%'))
                .and_then(|t| t.parse::<u32>().ok());
            let ms = tokens.next().and_then(|t| t.parse::<f64>().ok());
            match (percent, ms) {
                (Some(p), Some(ms)) => percentages.push((p, ms)),
                _ => in_table = !line.trim().is_empty() && percentages.is_empty(),
            }
        }
    }
    let missing = |what: &str| format!("no `{what}` in ab's output");
    Ok(AbReport {
        complete: complete.ok_or_else(|| missing("Complete requests"))?,
        failed,
        non_2xx,
        time_taken_s,
        requests_per_second: rps.ok_or_else(|| missing("Requests per second"))?,
        time_per_request_ms: tpr.ok_or_else(|| missing("Time per request"))?,
        min_ms,
        percentages,
    })
}

/// A wrk duration (`412.35us`, `1.08ms`, `2.00s`, `1.50m`, `1.00h`) in ms.
fn parse_wrk_duration(token: &str) -> Option<f64> {
    let split = token.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = token.split_at(split);
    let value: f64 = number.parse().ok()?;
    let factor = match unit {
        "ns" => 1e-6,
        "us" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        "m" => 60e3,
        "h" => 3_600e3,
        _ => return None,
    };
    Some(value * factor)
}

/// Parses wrk's output (4.x, with or without `--latency`). Requires `Requests/sec` and the
/// `Latency` thread-stats line; the distribution, error lines and request count are optional.
pub fn parse_wrk(text: &str) -> Result<WrkReport, String> {
    let mut requests = 0;
    let mut duration_s = 0.0;
    let mut rps = None;
    let mut latency = None;
    let mut percentages = Vec::new();
    let mut socket_errors = 0;
    let mut non_2xx = 0;
    let mut in_distribution = false;
    for line in text.lines() {
        let trimmed = line.trim();
        let tokens: Vec<&str> = trimmed.split_whitespace().collect();
        if let Some(v) = value_after(trimmed, "Requests/sec:") {
            rps = v.parse::<f64>().ok();
        } else if tokens.first() == Some(&"Latency") && tokens.len() >= 4 {
            // "Latency   412.35us  201.18us   8.93ms   91.02%"
            let ms: Option<Vec<f64>> = tokens[1..4].iter().map(|t| parse_wrk_duration(t)).collect();
            if let Some(ms) = ms {
                latency = Some((ms[0], ms[1], ms[2]));
            }
        } else if trimmed == "Latency Distribution" {
            in_distribution = true;
        } else if in_distribution {
            let percent = tokens
                .first()
                .and_then(|t| t.strip_suffix('%'))
                .and_then(|t| t.parse::<f64>().ok());
            let ms = tokens.get(1).and_then(|t| parse_wrk_duration(t));
            match (percent, ms) {
                // wrk prints "50%", "75%", …; fractions ("99.9%") are not table rows.
                (Some(p), Some(ms)) if p.fract() == 0.0 => percentages.push((p as u32, ms)),
                (Some(_), Some(_)) => {}
                _ => in_distribution = false,
            }
        }
        if tokens.len() >= 4 && tokens[1] == "requests" && tokens[2] == "in" {
            // "120964 requests in 5.00s, 10.38MB read"
            requests = tokens[0].parse().unwrap_or(0);
            duration_s =
                parse_wrk_duration(tokens[3].trim_end_matches(',')).map_or(0.0, |ms| ms / 1000.0);
        } else if let Some(rest) = trimmed.strip_prefix("Socket errors:") {
            // "Socket errors: connect 0, read 3, write 0, timeout 0"
            socket_errors = rest
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum();
        } else if let Some(v) = value_after(trimmed, "Non-2xx or 3xx responses:") {
            non_2xx = v.parse().unwrap_or(0);
        }
    }
    let (latency_avg_ms, latency_stdev_ms, latency_max_ms) =
        latency.ok_or_else(|| "no `Latency` line in wrk's output".to_owned())?;
    Ok(WrkReport {
        requests,
        duration_s,
        requests_per_second: rps.ok_or_else(|| "no `Requests/sec` in wrk's output".to_owned())?,
        latency_avg_ms,
        latency_stdev_ms,
        latency_max_ms,
        percentages,
        socket_errors,
        non_2xx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_duration_units() {
        assert_eq!(parse_wrk_duration("1.50m"), Some(90_000.0));
        assert_eq!(parse_wrk_duration("12"), None);
        assert_eq!(parse_wrk_duration("3.0xs"), None);
    }
}

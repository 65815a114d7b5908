//! The parsers and scene builders on real ab 2.3 and wrk 4.1 output, and the table that puts
//! them next to binary scenes.

use super::*;
use crate::report::SceneResult;

/// `ab -n 10000 -c 10 -p body.json -T application/json …` with ab 2.3 (Debian 12).
const AB_SAMPLE: &str = "\
This is ApacheBench, Version 2.3 <$Revision: 1903618 $>
Copyright 1996 Adam Twiss, Zeus Technology Ltd, http://www.zeustech.net/
Licensed to The Apache Software Foundation, http://www.apache.org/

Benchmarking 127.0.0.1 (be patient)
Completed 1000 requests
Completed 2000 requests
Completed 3000 requests
Completed 4000 requests
Completed 5000 requests
Completed 6000 requests
Completed 7000 requests
Completed 8000 requests
Completed 9000 requests
Completed 10000 requests
Finished 10000 requests


Server Software:        
Server Hostname:        127.0.0.1
Server Port:            41327

Document Path:          /BenchmarkService/do_nothing
Document Length:        4 bytes

Concurrency Level:      10
Time taken for tests:   1.873 seconds
Complete requests:      10000
Failed requests:        0
Total transferred:      1030000 bytes
Total body sent:        1800000
HTML transferred:       40000 bytes
Requests per second:    5339.06 [#/sec] (mean)
Time per request:       1.873 [ms] (mean)
Time per request:       0.187 [ms] (mean, across all concurrent requests)
Transfer rate:          537.04 [Kbytes/sec] received
                        938.51 kb/s sent
                        1475.55 kb/s total

Connection Times (ms)
              min  mean[+/-sd] median   max
Connect:        0    1   0.3      1       4
Processing:     0    1   0.5      1       9
Waiting:        0    1   0.4      1       8
Total:          1    2   0.6      2      11

Percentage of the requests served within a certain time (ms)
  50%      2
  66%      2
  75%      2
  80%      2
  90%      3
  95%      3
  98%      4
  99%      5
 100%     11 (longest request)
";

/// `ab -k …` with failures and non-2xx answers (ab 2.3).
const AB_K_FAILURES_SAMPLE: &str = "\
This is ApacheBench, Version 2.3 <$Revision: 1903618 $>
Benchmarking 127.0.0.1 (be patient)
Finished 10000 requests


Concurrency Level:      10
Time taken for tests:   0.612 seconds
Complete requests:      10000
Failed requests:        12
   (Connect: 0, Receive: 0, Length: 12, Exceptions: 0)
Non-2xx responses:      7
Keep-Alive requests:    10000
Total transferred:      1180000 bytes
Requests per second:    16339.87 [#/sec] (mean)
Time per request:       0.612 [ms] (mean)
Time per request:       0.061 [ms] (mean, across all concurrent requests)
Transfer rate:          1882.86 [Kbytes/sec] received

Connection Times (ms)
              min  mean[+/-sd] median   max
Connect:        0    0   0.0      0       0
Processing:     0    1   0.3      1       6
Waiting:        0    1   0.3      1       6
Total:          0    1   0.3      1       6

Percentage of the requests served within a certain time (ms)
  50%      1
  66%      1
  75%      1
  80%      1
  90%      1
  95%      1
  98%      2
  99%      2
 100%      6 (longest request)
";

/// `wrk -t1 -c10 -d5s --latency -s post.lua …` with wrk 4.1.0 (Debian 12).
const WRK_SAMPLE: &str = "\
Running 5s test @ http://127.0.0.1:41327/BenchmarkService/do_nothing
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   412.35us  201.18us   8.93ms   91.02%
    Req/Sec    24.31k     1.02k   26.11k    78.00%
  Latency Distribution
     50%  381.00us
     75%  452.00us
     90%  553.00us
     99%    1.08ms
  120964 requests in 5.00s, 10.38MB read
Requests/sec:  24192.35
Transfer/sec:      2.08MB
";

/// wrk with errors and a slow tail (seconds).
const WRK_ERRORS_SAMPLE: &str = "\
Running 5s test @ http://127.0.0.1:1/x
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.21ms    3.40ms   1.02s    99.10%
    Req/Sec     8.01k   500.00     9.00k    70.00%
  Latency Distribution
     50%  800.00us
     75%    1.00ms
     90%    1.50ms
     99%   12.00ms
  40000 requests in 5.01s, 3.43MB read
  Socket errors: connect 0, read 3, write 1, timeout 2
  Non-2xx or 3xx responses: 5
Requests/sec:   7984.03
Transfer/sec:    701.71KB
";

#[test]
fn parses_ab() {
    let r = parse_ab(AB_SAMPLE).unwrap();
    assert_eq!(r.complete, 10_000);
    assert_eq!(r.failed, 0);
    assert_eq!(r.non_2xx, 0);
    assert_eq!(r.requests_per_second, 5339.06);
    assert_eq!(r.time_per_request_ms, 1.873);
    assert_eq!(r.time_taken_s, 1.873);
    assert_eq!(r.min_ms, Some(1.0));
    let expected: Vec<(u32, f64)> = PERCENTAGES
        .iter()
        .copied()
        .zip([2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 4.0, 5.0, 11.0])
        .collect();
    assert_eq!(r.percentages, expected);

    let s = ab_scene("http-ab", false, &r, &ServerLabels::default());
    assert_eq!((s.connect_type.as_str(), s.connections), ("http", 1));
    assert_eq!(
        (s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms),
        (2.0, 3.0, 5.0, 11.0)
    );
    assert_eq!((s.succeeded, s.errors), (10_000, 0));
    assert_eq!(s.extra.get("p66_ms"), Some(&2.0));
}

#[test]
fn parses_ab_failures() {
    let r = parse_ab(AB_K_FAILURES_SAMPLE).unwrap();
    assert_eq!((r.failed, r.non_2xx), (12, 7));
    assert_eq!(r.time_per_request_ms, 0.612);
    assert_eq!(r.percentage(100), Some(6.0));
    let s = ab_scene("http-ab-k", true, &r, &ServerLabels::default());
    assert_eq!((s.succeeded, s.errors), (9_981, 19));
    assert_eq!(s.connections, CONCURRENCY);
}

#[test]
fn ab_errors_are_reported_not_panics() {
    let refused = "This is ApacheBench, Version 2.3 <$Revision: 1903618 $>\n\
            Benchmarking 127.0.0.1 (be patient)\n\
            apr_socket_recv: Connection refused (111)\n";
    let e = parse_ab(refused).unwrap_err();
    assert!(e.contains("Complete requests"), "{e}");
    assert!(parse_ab("").is_err());
    // Garbage numbers are missing values, not panics.
    let garbage = "Complete requests: x\nRequests per second: y\nTime per request: z\n";
    assert!(parse_ab(garbage).is_err());
    // Truncated table: what is there is kept.
    let cut = AB_SAMPLE.split(" 95%").next().unwrap_or_default();
    assert_eq!(parse_ab(cut).unwrap().percentages.len(), 5);
}

#[test]
fn parses_wrk() {
    let r = parse_wrk(WRK_SAMPLE).unwrap();
    assert_eq!(r.requests, 120_964);
    assert!((r.duration_s - 5.0).abs() < 1e-9);
    assert_eq!(r.requests_per_second, 24192.35);
    assert!((r.latency_avg_ms - 0.41235).abs() < 1e-9);
    assert!((r.latency_stdev_ms - 0.20118).abs() < 1e-9);
    assert!((r.latency_max_ms - 8.93).abs() < 1e-9);
    let pcts: Vec<u32> = r.percentages.iter().map(|(p, _)| *p).collect();
    assert_eq!(pcts, [50, 75, 90, 99]);
    assert!((r.percentage(99).unwrap_or_default() - 1.08).abs() < 1e-9);
    assert_eq!((r.socket_errors, r.non_2xx), (0, 0));

    let s = wrk_scene(&r, &ServerLabels::default());
    assert_eq!(s.scenario, "http-wrk");
    assert_eq!(s.extra.get("p75_ms"), Some(&0.452));
    assert_eq!(s.extra.get("p100_ms"), Some(&8.93));
    assert!(!s.extra.contains_key("p66_ms"));
}

#[test]
fn parses_wrk_errors_and_units() {
    let r = parse_wrk(WRK_ERRORS_SAMPLE).unwrap();
    assert_eq!((r.socket_errors, r.non_2xx), (6, 5));
    assert!((r.latency_max_ms - 1020.0).abs() < 1e-9);
    assert!((r.duration_s - 5.01).abs() < 1e-9);
    let s = wrk_scene(&r, &ServerLabels::default());
    assert_eq!((s.succeeded, s.errors), (39_995, 11));
    // The unit conversions themselves: parse.rs's `wrk_duration_units`.
    // No --latency: still a result, without the distribution.
    let plain: String = WRK_SAMPLE
        .lines()
        .filter(|l| !l.contains('%') || l.contains("Stdev") || l.contains("Latency"))
        .filter(|l| !l.contains("Distribution"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(parse_wrk(&plain).unwrap().percentages.is_empty());
    assert!(parse_wrk("unable to connect to 127.0.0.1:1 Connection refused\n").is_err());
}

#[test]
fn table_puts_binary_and_http_side_by_side() {
    let labels = ServerLabels::default();
    let mut percall = SceneResult::new("brisk", "nth", 10, 5000, "sync");
    percall.connect_type = "percall".into();
    percall.tps = 4000.0;
    percall.avg_ms = 2.5;
    for p in PERCENTAGES {
        percall.extra.insert(percentage_key(p), f64::from(p) / 10.0);
    }
    let mut fixed = percall.clone();
    fixed.connect_type = "fixed".into();
    fixed.connections = 10;
    let other = SceneResult::new("brisk", "nth", 10, 5000, "sync");
    assert_eq!(seed001_table(&[percall.clone(), fixed.clone()]), None);
    let scenes = [
        percall,
        fixed,
        other,
        ab_scene("http-ab", false, &parse_ab(AB_SAMPLE).unwrap(), &labels),
        ab_scene(
            "http-ab-k",
            true,
            &parse_ab(AB_K_FAILURES_SAMPLE).unwrap(),
            &labels,
        ),
        wrk_scene(&parse_wrk(WRK_SAMPLE).unwrap(), &labels),
    ];
    let table = seed001_table(&scenes).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    // header, rule, 3 rows, 9 percentages
    assert_eq!(lines.len(), 14, "{table}");
    for name in [
        "binary per-call",
        "binary persistent (fixed/10)",
        "HTTP ab",
        "HTTP ab -k",
        "HTTP wrk",
    ] {
        assert!(lines[0].contains(name), "{table}");
    }
    assert!(lines[2].starts_with("Requests per second") && lines[2].contains("24192.35"));
    let p66 = lines.iter().find(|l| l.starts_with(" 66%")).unwrap();
    assert!(p66.trim_end().ends_with('-'), "{table}");
    let p75 = lines.iter().find(|l| l.starts_with(" 75%")).unwrap();
    assert!(p75.trim_end().ends_with("0.452"), "{table}");
}

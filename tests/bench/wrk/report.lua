-- Shared by the wrk scripts of tests/bench/load.ts: done() prints one line
-- "FERRY_RESULT {json}" that the harness parses. Latencies are microseconds.
-- Each thread's globals named in `counters` (e.g. acked, empty) are summed over threads.

local threads = {}

function report_setup(thread)
  table.insert(threads, thread)
end

function report_done(summary, latency, counters)
  local e = summary.errors
  local parts = {
    string.format('"requests":%d', summary.requests),
    string.format('"duration_us":%d', summary.duration),
    string.format('"bytes":%d', summary.bytes),
    string.format('"connect_errors":%d', e.connect),
    string.format('"read_errors":%d', e.read),
    string.format('"write_errors":%d', e.write),
    string.format('"status_errors":%d', e.status),
    string.format('"timeouts":%d', e.timeout),
    string.format('"p50_us":%d', latency:percentile(50)),
    string.format('"p90_us":%d', latency:percentile(90)),
    string.format('"p99_us":%d', latency:percentile(99)),
    string.format('"max_us":%d', latency.max),
    string.format('"mean_us":%.1f', latency.mean),
  }
  for _, name in ipairs(counters or {}) do
    local sum = 0
    for _, t in ipairs(threads) do
      sum = sum + (t:get(name) or 0)
    end
    table.insert(parts, string.format('"%s":%d', name, sum))
  end
  io.write("FERRY_RESULT {" .. table.concat(parts, ",") .. "}\n")
end

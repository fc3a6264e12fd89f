-- Timed publish load over several topics for tests/bench/load.ts (the workers rows): POST
-- /publish/<prefix>-<n % TOPICS> with a fixed body, so every worker owns some of the topics.
-- wrk -t1 -cN -dDs -s publish_topics.lua http://127.0.0.1:PORT/ -- SIZE TOPICS PREFIX

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

function setup(thread)
  report_setup(thread)
end

local n, topics, prefix = 0, 16, "bench"

function init(args)
  local size = tonumber(args[1]) or 1024
  topics = tonumber(args[2]) or 16
  prefix = args[3] or "bench"
  wrk.method = "POST"
  wrk.body = string.rep("x", size)
  wrk.headers["Content-Type"] = "application/octet-stream"
end

function request()
  n = n + 1
  return wrk.format(nil, "/publish/" .. prefix .. "-" .. (n % topics))
end

function done(summary, latency)
  report_done(summary, latency, {})
end

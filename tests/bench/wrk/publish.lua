-- Timed publish load for tests/bench/load.ts: POST <url path> with a fixed body.
-- wrk -t1 -cN -dDs -s publish.lua http://127.0.0.1:PORT/publish/TOPIC -- SIZE
-- The request is static (no request() function), so wrk builds it once per thread.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

function setup(thread)
  report_setup(thread)
end

function init(args)
  local size = tonumber(args[1]) or 1024
  wrk.method = "POST"
  wrk.body = string.rep("x", size)
  wrk.headers["Content-Type"] = "application/octet-stream"
end

function done(summary, latency)
  report_done(summary, latency, {})
end

-- Pre-fill for tests/bench/load.ts: each thread publishes exactly QUOTA messages of SIZE
-- bytes to the URL's path, then stops itself; the harness ends wrk (SIGINT) once the
-- broker's stats show them all. The first request() call and over-quota calls (other
-- connections of the same event-loop turn) send a cheap GET /healthz instead of publishing:
-- wrk calls request() once before the run to verify it, and that call must not count.
-- wrk -tT -cC -d300s -s fill.lua http://127.0.0.1:PORT/publish/TOPIC -- SIZE QUOTA

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

function setup(thread)
  report_setup(thread)
end

local publish_req, idle_req, quota
local calls = 0
sent = 0
created = 0
stopped = false

function init(args)
  local size = tonumber(args[1]) or 1024
  quota = tonumber(args[2]) or 0
  publish_req = wrk.format("POST", wrk.path,
    { ["Content-Type"] = "application/octet-stream" }, string.rep("x", size))
  idle_req = wrk.format("GET", "/healthz")
end

function request()
  calls = calls + 1
  if calls > 1 and sent < quota then
    sent = sent + 1
    return publish_req
  end
  return idle_req
end

function response(status)
  if status == 201 then
    created = created + 1
  end
  if created >= quota and not stopped then
    stopped = true
    wrk.thread:stop()
  end
end

function done(summary, latency)
  report_done(summary, latency, { "sent", "created" })
end

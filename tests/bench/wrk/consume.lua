-- Consume+ack drain for tests/bench/load.ts. Run with one connection per thread
-- (wrk -tN -cN) so each thread's state alternates: consume, then ack what it got.
-- wrk -tN -cN -d300s -s consume.lua http://127.0.0.1:PORT/ -- TOPIC LIMIT
-- LIMIT 1:  GET /consume/T?limit=1 -> one Message, then POST /ack/T/{id} (204).
-- LIMIT >1: GET /consume/T?limit=L -> array, then POST /ack/T {"ids":[...]} (200 {"acked":N}).
-- An empty queue answers 404; the thread just asks again until the harness stops wrk.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

function setup(thread)
  report_setup(thread)
end

local topic, limit, consume_req
local pending = nil -- the ack request to send next, if any
local last = "consume"
consumed = 0
acked = 0
empty = 0
failed = 0

function init(args)
  topic = args[1]
  limit = tonumber(args[2]) or 1
  consume_req = wrk.format("GET", "/consume/" .. topic .. "?limit=" .. limit)
end

function request()
  if pending then
    local r = pending
    pending = nil
    last = "ack"
    return r
  end
  last = "consume"
  return consume_req
end

function response(status, headers, body)
  if last == "consume" then
    if status == 200 then
      if limit == 1 then
        local id = body:match('"id":"([^"]+)"')
        consumed = consumed + 1
        pending = wrk.format("POST", "/ack/" .. topic .. "/" .. id)
      else
        -- plain find is several times cheaper than gmatch on a ~250 KB body
        local ids, n, pos = {}, 0, 1
        while true do
          local _, e = string.find(body, '"id":"', pos, true)
          if not e then break end
          local close = string.find(body, '"', e + 1, true)
          n = n + 1
          ids[n] = string.sub(body, e, close) -- the id with its quotes
          pos = close + 1
        end
        consumed = consumed + n
        pending = wrk.format("POST", "/ack/" .. topic,
          { ["Content-Type"] = "application/json" },
          '{"ids":[' .. table.concat(ids, ",") .. "]}")
      end
    elseif status == 404 then
      empty = empty + 1
    else
      failed = failed + 1
    end
  else
    if status == 204 then
      acked = acked + 1
    elseif status == 200 then
      acked = acked + (tonumber(body:match('"acked":(%d+)')) or 0)
    else
      failed = failed + 1
    end
  end
end

function done(summary, latency)
  report_done(summary, latency, { "consumed", "acked", "empty", "failed" })
end

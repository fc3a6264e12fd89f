-- Timed batch publish load for tests/bench/load.ts: POST <url path> with a fixed JSON array of
-- COUNT messages, each a Base64 payload of SIZE bytes.
-- wrk -t1 -cN -dDs -s publish_batch.lua http://127.0.0.1:PORT/publish/TOPIC/batch -- COUNT SIZE
-- The request is static (no request() function), so wrk builds it once per thread.

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. "report.lua")

function setup(thread)
  report_setup(thread)
end

-- Base64 of `size` bytes: "QUJD" is "ABC"; the tail pads the last one or two bytes.
local function base64_of(size)
  local tail = ({ [0] = "", [1] = "QQ==", [2] = "QUI=" })[size % 3]
  return string.rep("QUJD", math.floor(size / 3)) .. tail
end

function init(args)
  local count = tonumber(args[1]) or 100
  local size = tonumber(args[2]) or 1024
  local item = '{"payload":"' .. base64_of(size) .. '"}'
  local items = {}
  for i = 1, count do
    items[i] = item
  end
  wrk.method = "POST"
  wrk.body = "[" .. table.concat(items, ",") .. "]"
  wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency)
  report_done(summary, latency, {})
end

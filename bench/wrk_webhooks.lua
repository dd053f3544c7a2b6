-- wrk script of bench/wrkload.py: sends prepared requests, each once, then stops its thread.
--
-- wrk -t T -c C -d MAX -s bench/wrk_webhooks.lua URL -- REQUESTS_FILE T MARKER_DIR
--
-- REQUESTS_FILE: one request a line, "path<TAB>headers<TAB>body"; headers are name<0x1e>value
-- pairs joined by 0x1f; an empty body is a GET. Thread k (0-based) sends lines k, k+T, k+2T, …
-- in order; once its last one is answered it writes MARKER_DIR/done-k and stops (wrk's main
-- thread sleeps until -d or SIGINT, which bench/wrkload.py sends when every marker is there).
-- A connection that asks for a request after the thread's last one sends the last one again
-- (a duplicate delivery; at most one per connection); those answers are not counted.
-- done() prints one JSON line: answered, non-2xx, the first request and last counted answer on
-- the monotonic clock (seconds), and wrk's latency percentiles (microseconds).

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]]
local ts = ffi.new("bench_timespec")
local function now()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local reqs, n, sent, marker

function init(args)
  local file, nthreads, markers = args[1], tonumber(args[2]), args[3]
  reqs = {}
  local i = 0
  for line in io.lines(file) do
    if i % nthreads == id then
      local path, hdrs, body = line:match("^([^\t]*)\t([^\t]*)\t(.*)$")
      local headers = {}
      for pair in hdrs:gmatch("[^\31]+") do
        local k, v = pair:match("^([^\30]*)\30(.*)$")
        headers[k] = v
      end
      if body == "" then
        reqs[#reqs + 1] = wrk.format("GET", path, headers)
      else
        reqs[#reqs + 1] = wrk.format("POST", path, headers, body)
      end
    end
    i = i + 1
  end
  n = #reqs
  sent = 0
  answered = 0
  non2xx = 0
  t0 = 0
  t1 = 0
  marker = markers .. "/done-" .. id
  if n == 0 then
    local f = io.open(marker, "w"); f:write("0"); f:close()
  end
end

function request()
  if sent == 0 then t0 = now() end
  sent = sent + 1
  if sent > n then return reqs[n] end
  return reqs[sent]
end

function response(status, headers, body)
  if answered >= n then return end
  answered = answered + 1
  if status < 200 or status > 299 then non2xx = non2xx + 1 end
  if answered == n then
    t1 = now()
    local f = io.open(marker, "w"); f:write(tostring(n)); f:close()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local first, last, count, bad = nil, 0, 0, 0
  for _, t in ipairs(threads) do
    local a, b = t:get("t0"), t:get("t1")
    if a and a > 0 and (first == nil or a < first) then first = a end
    if b and b > last then last = b end
    count = count + (t:get("answered") or 0)
    bad = bad + (t:get("non2xx") or 0)
  end
  io.write(string.format(
    '{"answered": %d, "non_2xx": %d, "first": %.6f, "last": %.6f, "sent_by_wrk": %d, ' ..
    '"socket_errors": %d, "timeouts": %d, "p50_us": %d, "p95_us": %d, "p99_us": %d, ' ..
    '"max_us": %d}\n',
    count, bad, first or 0, last, summary.requests,
    summary.errors.connect + summary.errors.read + summary.errors.write, summary.errors.timeout,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max))
end

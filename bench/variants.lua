-- wrk: every request a variant never asked for before, so nothing is answered from a cache.
-- Request n asks for source n mod #sources with a box of (512 - n div 7000) × (513 + n mod 7000): the box
-- stays under the origin's 8000 px cap (a capped box would repeat an earlier variant), and the image inside
-- it is the same 512-wide fit. Thread i of t takes n = first + i, first + i + t, … (wrk's Lua threads
-- share one state seed: the id from setup() keeps their numbers apart).
-- args: <format> <threads> <first> <base58 source>...
local started = 0
function setup(thread)
  thread:set("id", started)
  started = started + 1
end
function init(args)
  format = args[1]
  threads = tonumber(args[2])
  first = tonumber(args[3])
  sources = {}
  for i = 4, #args do sources[#sources + 1] = args[i] end
  count = 0
end
function request()
  local n = first + count * threads + id
  count = count + 1
  local source = sources[(n % #sources) + 1]
  local width = 512 - math.floor(n / 7000)
  local height = 513 + n % 7000
  return wrk.format("GET", "/p/" .. source .. "?width=" .. width .. "&height=" .. height .. "&mode=fit&format=" .. format)
end

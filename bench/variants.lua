-- wrk: every request a variant never asked for before, so nothing is answered from a cache.
-- args: <template> <span> <first> <source>...; the template's {source}, {width} and {height} are filled in.
-- Request n asks for source n mod #sources in a box of (512 - n div 7000) × (513 + n mod 7000): the box stays
-- under the origin's 8000 px cap (a capped box would repeat an earlier variant), and the image inside it is
-- the same 512-wide fit. Thread i takes n = first + i × span, then the next, …: each thread cycles through
-- every source, so a thread that draws only cheap sources cannot inflate the figure (wrk's Lua threads share
-- one state seed: the id from setup() keeps their numbers apart).
local started = 0
function setup(thread)
  thread:set("id", started)
  started = started + 1
end
function init(args)
  template = args[1]
  span = tonumber(args[2])
  first = tonumber(args[3])
  sources = {}
  for i = 4, #args do sources[#sources + 1] = args[i] end
  count = 0
end
function request()
  local n = first + id * span + count
  count = count + 1
  local path = template:gsub("{source}", sources[(n % #sources) + 1])
  path = path:gsub("{width}", tostring(512 - math.floor(n / 7000)))
  path = path:gsub("{height}", tostring(513 + n % 7000))
  return wrk.format("GET", path)
end

-- wrk: the paths given, in turn, over and over (each thread from its own place in the list).
-- args: <path>...
local started = 0
function setup(thread)
  thread:set("id", started)
  started = started + 1
end
function init(args)
  paths = {}
  for i = 1, #args do paths[#paths + 1] = args[i] end
  count = id * 7
end
function request()
  count = count + 1
  return wrk.format("GET", paths[(count % #paths) + 1])
end

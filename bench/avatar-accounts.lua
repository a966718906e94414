-- wrk: each thread asks for avatars of random accounts among `accounts`, with its own random sequence
-- (wrk's Lua threads share one seed: without a per-thread id the "random" URLs of all threads collide).
-- Requests are formatted once per thread in init(): formatting per request makes wrk the bottleneck.
local accounts = 1000
local counter = 0
local requests = {}
function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end
function init(args)
  math.randomseed(os.time() * 1000 + id)
  for i = 0, accounts - 1 do
    requests[i + 1] = wrk.format("GET", "/u/bench-" .. i .. "/avatar")
  end
end
function request()
  return requests[math.random(1, accounts)]
end

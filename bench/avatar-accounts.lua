-- wrk: each thread asks for avatars of random accounts among `accounts`, with its own random sequence
-- (wrk's Lua threads share one seed: without a per-thread id the "random" URLs of all threads collide).
local accounts = 1000
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end
function init(args)
  math.randomseed(os.time() * 1000 + id)
end
function request()
  return wrk.format("GET", "/u/bench-" .. math.random(0, accounts - 1) .. "/avatar")
end

import { readdirSync } from 'node:fs';
import os from 'node:os';

/**
 * Runs every thread of this process but the main one (the event loop) at a lower CPU priority: the libuv
 * pool threads that drive sharp (where most of the decoding and encoding happens), libvips' own workers and
 * V8's helpers. Under a flood of transforms the request path (this event loop, nginx, varnish, haproxy,
 * the avatar resolver) then gets the CPU first, so refusals, cache hits and redirects stay fast while
 * transforms take what is left; on an idle host nothing changes. Linux applies setpriority() to the one
 * thread whose id it is given, and raising one's own niceness needs no privilege. Threads are looked for
 * again every interval, since libuv and libvips start them on demand.
 * @param {{ nice: number, intervalMs?: number, onError?: (err: unknown) => void }} options
 * @returns {{ scan: () => number, stop: () => void }} scan returns how many threads it lowered
 */
export function lowerWorkerPriority({ nice, intervalMs = 1000, onError = () => {} }) {
  const enabled = nice > 0 && process.platform === 'linux';
  const scan = () => {
    if (!enabled) return 0;
    let count = 0;
    for (const entry of readdirSync('/proc/self/task')) {
      const tid = Number(entry);
      if (tid === process.pid) continue;
      try {
        if (os.getPriority(tid) >= nice) continue;
        os.setPriority(tid, nice);
        count += 1;
      } catch (err) {
        onError(err); // the thread ended between the listing and the call: nothing to do
      }
    }
    return count;
  };
  const timer = enabled ? setInterval(scan, intervalMs).unref() : undefined;
  return { scan, stop: () => clearInterval(timer) };
}

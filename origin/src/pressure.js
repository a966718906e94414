// CPU pressure (Linux PSI, /proc/pressure/cpu): the share of the last second in which some runnable task
// waited for a CPU. A warmer's transform starts only while it is under WARM_MAX_CPU_PRESSURE: idle capacity
// measured rather than guessed from slot counts (on a small machine, work at the lowest priority still
// slows readers). Where PSI is missing the share reads 0 (no gate).
import fs from 'node:fs';

/** The `some` line's total (µs stalled since boot), or null. @param {string} text */
export function stalledMicros(text) {
  const match = /^some .*\btotal=(\d+)/m.exec(text);
  return match ? Number(match[1]) : null;
}

/**
 * Samples `file` every `intervalMs`; `share()` is the last interval's stalled share (0–1). `now`: the clock in
 * ms (a test's own, so that what it writes and when agree however late the timer fires).
 * @param {{ file?: string, intervalMs?: number, now?: () => number }} [options]
 */
export function watchCpuPressure({
  file = '/proc/pressure/cpu',
  intervalMs = 1000,
  now = () => performance.now(),
} = {}) {
  const read = () => {
    try {
      return stalledMicros(fs.readFileSync(file, 'utf8'));
    } catch {
      return null;
    }
  };
  let last = read();
  let lastAt = now();
  let share = 0;
  const timer =
    last === null
      ? undefined
      : setInterval(() => {
          const total = read();
          const at = now();
          if (total !== null && last !== null && at > lastAt)
            share = Math.min(1, Math.max(0, (total - last) / 1000 / (at - lastAt)));
          last = total;
          lastAt = at;
        }, intervalMs).unref();
  return { share: () => share, stop: () => clearInterval(timer) };
}

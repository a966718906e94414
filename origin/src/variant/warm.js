// A warmer's variants (X-Warm: 1): made before any reader asks, only on what readers leave. The queue's later
// lane (behind every reader's transform, beside their slots), a worker at the lowest CPU priority, and, with
// WARM_MAX_CPU_PRESSURE, only while the machine's CPU is that idle; otherwise a 429 the warmer retries after.
import { HttpError, degradeDepth } from '@stack/lib';
import { watchCpuPressure } from '../pressure.js';

/**
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, queue: import('../queue.js').TransformQueue,
 *   metrics: import('../metrics.js').OriginMetrics }} deps
 */
export function createWarmGate({ config, queue, metrics }) {
  const pressure = config.WARM_MAX_CPU_PRESSURE > 0 ? watchCpuPressure() : { share: () => 0, stop: () => {} };
  const deep = degradeDepth(config);

  /** Why a warm transform may not start now (null when it may): readers' queue, the warm lane, the CPU. */
  function busy() {
    if (queue.depth >= deep || !queue.laterHasRoom)
      return { reason: 'the transform queue is busy with readers', retryAfter: '2' };
    // the pressure reads 0 without WARM_MAX_CPU_PRESSURE (no gate)
    if (pressure.share() * 100 > config.WARM_MAX_CPU_PRESSURE)
      return { reason: 'the CPU is busy (pressure past WARM_MAX_CPU_PRESSURE)', retryAfter: '1' };
    return null;
  }

  return {
    /**
     * Lets a warm transform start now, or throws the 429 that defers it. One already in flight for the same
     * variant is joined whatever the load (it costs nothing more). @param {{ inFlight: boolean }} options
     */
    admit({ inFlight }) {
      const refusal = inFlight ? null : busy();
      if (refusal) {
        metrics.warm.inc({ result: 'deferred' });
        throw new HttpError(429, 'warm_deferred', { reason: refusal.reason }, { 'Retry-After': refusal.retryAfter });
      }
      metrics.warm.inc({ result: 'made' });
    },
    stop: () => pressure.stop(),
  };
}

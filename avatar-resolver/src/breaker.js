/**
 * A circuit breaker: after `failures` consecutive failures the circuit opens and calls fail at once;
 * after `cooldownMs` one trial call is let through (half-open), and its outcome closes or reopens it.
 * States, as the gauge shows them: 0 closed, 1 open, 2 half-open.
 */
export class Breaker {
  /** @param {{ failures: number, cooldownMs: number, onState?: (state: number) => void }} options */
  constructor({ failures, cooldownMs, onState = () => {} }) {
    this.limit = failures;
    this.cooldownMs = cooldownMs;
    this.onState = onState;
    this.failures = 0;
    this.state = 0;
    this.openedAt = 0;
  }

  /** @template T @param {() => Promise<T>} work @returns {Promise<T>} */
  async run(work) {
    if (this.state === 1) {
      if (Date.now() - this.openedAt < this.cooldownMs)
        throw Object.assign(new Error('circuit open'), { code: 'ECIRCUITOPEN' });
      this.set(2);
    } else if (this.state === 2) {
      throw Object.assign(new Error('circuit half-open: trial in flight'), { code: 'ECIRCUITOPEN' });
    }
    try {
      const result = await work();
      this.failures = 0;
      this.set(0);
      return result;
    } catch (err) {
      this.failures += 1;
      if (this.state === 2 || this.failures >= this.limit) {
        this.openedAt = Date.now();
        this.set(1);
      }
      throw err;
    }
  }

  /** @param {number} state */
  set(state) {
    if (state !== this.state) {
      this.state = state;
      this.onState(state);
    }
  }
}

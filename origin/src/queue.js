import { HttpError } from '@stack/lib';

/**
 * Bounded work: at most `concurrency` tasks at once, at most `maxQueued` waiting (small ones first),
 * past that an immediate 503 with Retry-After, so memory stays flat under any burst.
 */
export class TransformQueue {
  /**
   * `refusal`: what a refused task is told (reason, Retry-After seconds).
   * @param {{ concurrency: number, maxQueued: number, onChange?: (queue: TransformQueue) => void,
   *   refusal?: { reason: string, retryAfterS: number } }} options
   */
  constructor({ concurrency, maxQueued, onChange = () => {}, refusal = { reason: 'transform_queue_full', retryAfterS: 2 } }) {
    this.concurrency = concurrency;
    this.maxQueued = maxQueued;
    this.onChange = onChange;
    this.refusal = refusal;
    this.running = 0;
    /** @type {Array<() => void>} */
    this.small = [];
    /** @type {Array<() => void>} */
    this.large = [];
    this.reserved = 0;
  }

  get depth() {
    return this.small.length + this.large.length;
  }

  /** True when a slot is free and nothing waits or prepares for one: room for work nobody waits for. */
  get idle() {
    return this.running < this.concurrency && this.depth === 0 && this.reserved === 0;
  }

  /**
   * Room for work nobody waits for (a warmer's request): nothing queued or reserved, and `keepFree` slots
   * left free for readers after it (but on a one-slot machine, the slot when it is free).
   * @param {number} keepFree
   */
  roomFor(keepFree) {
    return this.depth === 0 && this.reserved === 0 && this.running < Math.max(1, this.concurrency - keepFree);
  }

  /** True when a new task would be refused: checked before any I/O, so a refusal costs nothing. */
  get full() {
    return this.running >= this.concurrency && this.depth + this.reserved >= this.maxQueued;
  }

  /**
   * Holds a place for a task still preparing (probing its original on the libuv pool), so that a burst
   * arriving while one place is free cannot all pass the full check, pile up on the pool, and be refused
   * only afterwards, slowly. Returns the release; run() takes a reservation's place when given it.
   * @returns {() => void}
   */
  reserve() {
    if (this.full) throw this.overloaded();
    this.reserved += 1;
    let held = true;
    return () => {
      if (held) this.reserved -= 1;
      held = false;
    };
  }

  /** The 503 a refused task gets. */
  overloaded() {
    return new HttpError(503, 'overloaded', { reason: this.refusal.reason }, { 'Retry-After': String(this.refusal.retryAfterS) });
  }

  /**
   * @template T
   * @param {() => Promise<T>} task
   * @param {boolean} small
   * @param {() => void} [release] the task's reservation, exchanged for its place in the queue
   * @returns {Promise<{ value: T, waitMs: number }>}
   */
  async run(task, small, release) {
    const queuedAt = performance.now();
    release?.();
    if (this.full) throw this.overloaded();
    if (this.running >= this.concurrency) {
      await new Promise((resolve) => {
        (small ? this.small : this.large).push(() => resolve(null));
        this.onChange(this);
      });
    }
    const waitMs = performance.now() - queuedAt;
    this.running += 1;
    this.onChange(this);
    try {
      return { value: await task(), waitMs };
    } finally {
      this.running -= 1;
      const next = this.small.shift() || this.large.shift();
      next?.();
      this.onChange(this);
    }
  }
}

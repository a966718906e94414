import { HttpError } from '@stack/lib';

/**
 * Bounded work: at most `concurrency` tasks at once, at most `maxQueued` waiting (small ones first),
 * past that an immediate 503 with Retry-After, so memory stays flat under any burst.
 */
export class TransformQueue {
  /**
   * @param {{ concurrency: number, maxQueued: number, onChange?: (queue: TransformQueue) => void }} options
   */
  constructor({ concurrency, maxQueued, onChange = () => {} }) {
    this.concurrency = concurrency;
    this.maxQueued = maxQueued;
    this.onChange = onChange;
    this.running = 0;
    /** @type {Array<() => void>} */
    this.small = [];
    /** @type {Array<() => void>} */
    this.large = [];
  }

  get depth() {
    return this.small.length + this.large.length;
  }

  /** True when a new task would be refused: checked before any I/O, so a refusal costs nothing. */
  get full() {
    return this.running >= this.concurrency && this.depth >= this.maxQueued;
  }

  /** The 503 a refused task gets. */
  static overloaded() {
    return new HttpError(503, 'overloaded', { reason: 'transform_queue_full' }, { 'Retry-After': '2' });
  }

  /**
   * @template T
   * @param {() => Promise<T>} task
   * @param {boolean} small
   * @returns {Promise<{ value: T, waitMs: number }>}
   */
  async run(task, small) {
    const queuedAt = performance.now();
    if (this.full) throw TransformQueue.overloaded();
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

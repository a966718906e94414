import { HttpError } from '@stack/lib';

/**
 * Bounded work: at most `concurrency` tasks at once, at most `maxQueued` waiting (small ones first),
 * past that an immediate 503 with Retry-After, so memory stays flat under any burst. Work nobody waits for
 * (a warmer's) has a lane of its own behind every reader's task: it starts only while no reader's task
 * waits and `keepFree` slots stay free, at most `laterConcurrency` of it at once and `laterMax` of it
 * waiting. It runs beside the readers' slots, not in one (its caller runs it on one thread at the lowest
 * CPU priority): a reader arriving while it runs finds every slot it would have found without it.
 */
export class TransformQueue {
  /**
   * `refusal`: what a refused task is told (reason, Retry-After seconds).
   * @param {{ concurrency: number, maxQueued: number, onChange?: (queue: TransformQueue) => void,
   *   refusal?: { reason: string, retryAfterS: number }, keepFree?: number, laterMax?: number, laterConcurrency?: number }} options
   */
  constructor({
    concurrency,
    maxQueued,
    onChange = () => {},
    refusal = { reason: 'transform_queue_full', retryAfterS: 2 },
    keepFree = 1,
    laterMax = 8,
    laterConcurrency = 1,
  }) {
    this.concurrency = concurrency;
    this.maxQueued = maxQueued;
    // slots a later task may fill: all but keepFree (a one-slot machine: its slot, when nothing else waits)
    this.laterSlots = Math.max(1, concurrency - keepFree);
    this.laterMax = laterMax;
    this.laterConcurrency = Math.max(1, laterConcurrency);
    /** later tasks running now */
    this.laterRunning = 0;
    /** @type {Array<() => void>} */
    this.later = [];
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

  /**
   * Slots neither running a task nor held for one preparing (0 while any task waits): room for work nobody
   * waits for.
   */
  get freeSlots() {
    return this.depth ? 0 : Math.max(0, this.concurrency - this.running - this.reserved);
  }

  /** Whether a later task may start now: no reader's task waits, keepFree slots are free, and fewer than laterConcurrency run. */
  get laterMayRun() {
    return this.depth === 0 && this.running < this.laterSlots && this.laterRunning < this.laterConcurrency;
  }

  /** Whether the later lane has room for one more task. */
  get laterHasRoom() {
    return this.later.length < this.laterMax;
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
    return new HttpError(
      503,
      'overloaded',
      { reason: this.refusal.reason },
      { 'Retry-After': String(this.refusal.retryAfterS) },
    );
  }

  /**
   * @template T
   * @param {() => Promise<T>} task
   * @param {{ small?: boolean, release?: () => void, later?: boolean }} [options] small: waits in the small
   *   tasks' line, ahead of the large; release: the task's reservation, exchanged for its place in the queue;
   *   later: work nobody waits for, in the later lane (its caller checked laterHasRoom)
   * @returns {Promise<{ value: T, waitMs: number }>}
   */
  async run(task, { small = false, release, later = false } = {}) {
    const queuedAt = performance.now();
    release?.();
    if (this.full) throw this.overloaded();
    if (later ? !this.laterMayRun : this.running >= this.concurrency) {
      await new Promise((resolve) => {
        (later ? this.later : small ? this.small : this.large).push(() => resolve(null));
        this.onChange(this);
      });
    }
    const waitMs = performance.now() - queuedAt;
    if (later) this.laterRunning += 1;
    else this.running += 1;
    this.onChange(this);
    try {
      return { value: await task(), waitMs };
    } finally {
      if (later) this.laterRunning -= 1;
      else this.running -= 1;
      // a later task's end frees no reader's slot: only the next later task may start then
      const reader = later ? undefined : this.small.shift() || this.large.shift();
      const next = reader || (this.laterMayRun ? this.later.shift() : undefined);
      next?.();
      this.onChange(this);
    }
  }
}

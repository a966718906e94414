// One variant request as it goes through the origin (images.js → variant/make.js → the pipeline): what is
// asked of which source, for whom, by when. A job is made once per request and handed through every step,
// which reads its deadline from it instead of keeping a timer of its own.
import { HttpError } from '@stack/lib';

/**
 * @typedef {import('@stack/lib/src/sources.js').Source} Source
 * @typedef {import('../options.js').Want} Want
 * @typedef {{ fetch?: number, queue?: number, transform?: number }} Timings
 * @typedef {'reader' | 'background' | 'warm'} MakeMode who a variant is made for: a reader (who may get a first
 *   answer instead of an AVIF); the background encode of what a first answer fell back from; a warmer (in the
 *   queue's later lane, in a worker at the lowest CPU priority)
 * @typedef {{ source: Source, want: Want, key: string, mode: MakeMode, answerBy: number, answerWithinS: number,
 *   timings: Timings }} VariantJob
 *   key: the result cache's key of the variant (keys.js variantKey); answerBy: when its answer is due
 *   (performance.now() ms: answerWithinS, REQUEST_TIMEOUT_S, after it arrived); timings: what it spent where
 *   (Server-Timing)
 */

/**
 * @param {{ source: Source, want: Want, key: string, mode?: MakeMode, requestTimeoutS: number }} fields
 * @returns {VariantJob}
 */
export function newJob({ source, want, key, mode = 'reader', requestTimeoutS }) {
  const answerBy = performance.now() + requestTimeoutS * 1000;
  return { source, want, key, mode, answerBy, answerWithinS: requestTimeoutS, timings: {} };
}

/** Milliseconds left until `at` (performance.now() ms), never below 1. @param {number} at */
export const msUntil = (at) => Math.max(1, at - performance.now());

/**
 * The work, or a 503 at the job's answer deadline (under haproxy's server timeout: the origin answers first,
 * cleanly). The work goes on; what it makes is cached for the next request.
 * @template T @param {VariantJob} job @param {Promise<T>} work @returns {Promise<T>}
 */
export function byAnswerDeadline(job, work) {
  return byDeadline(
    work,
    job.answerBy,
    () => new HttpError(503, 'request_timeout', { limit_s: job.answerWithinS }, { 'Retry-After': '5' }),
  );
}

/**
 * The work, or `failure()` at `at` (performance.now() ms), whichever comes first; the work's own failure
 * after that is ignored (answered already). @template T @param {Promise<T>} work @param {number} at
 * @param {() => Error} failure @returns {Promise<T>}
 */
export function byDeadline(work, at, failure) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  const expired = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(failure()), msUntil(at));
  });
  work.catch(() => {});
  return /** @type {Promise<T>} */ (Promise.race([work, expired])).finally(() => clearTimeout(timer));
}

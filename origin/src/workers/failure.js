// A transform's failure as it crosses from a worker (a process of pool.js, a thread of threads.js) to the
// origin, and the error the origin answers with on this side.
import { HttpError, isGone } from '@stack/lib/src/errors.js';
import { missingSource } from '../pipeline/index.js';

/**
 * @typedef {{ status: number, name: string, info: Record<string, unknown>, headers: Record<string, string>, missing: boolean }} Failure
 */

/** What crosses for `err`: its status and JSON error, or a 500 for what is not an HttpError. @param {unknown} err @returns {Failure} */
export function failureOf(err) {
  const failure = /** @type {any} */ (err);
  return {
    status: failure.status || 500,
    name: failure.status ? failure.name : 'internal_error',
    info: failure.info || {},
    headers: failure.headers || {},
    missing: isGone(failure),
  };
}

/** The error to answer with for a failure that crossed. @param {Failure} failure */
export const errorOf = (failure) =>
  failure.missing ? missingSource() : new HttpError(failure.status, failure.name, failure.info, failure.headers);

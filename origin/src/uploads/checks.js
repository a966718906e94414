// What an upload must pass before its body is worth reading, run by nginx's upload check
// (GET /.upload-check/…) and by the upload's route: the bearer token, a Hive account and signature's shape, a
// client that has not been sending forged signatures, an account not taken down, a week not full.
import { timingSafeEqual } from 'node:crypto';
import { HttpError, isAccountName, takedownError } from '@stack/lib';
import { LRUCache } from 'lru-cache';
import { takeQuota } from './quota.js';

/** @typedef {import('./accept.js').UploadDeps} UploadDeps */

/**
 * What a Hive upload must pass before its body is worth reading: a valid account name and signature shape,
 * a client that has not been sending forged signatures, an account not taken down, a week not full.
 * @param {UploadDeps} deps @param {string} account @param {string} signature @param {string} client
 */
export async function hivePrecheck(deps, account, signature, client) {
  if (!isAccountName(account)) throw new HttpError(400, 'invalid_account', { account: account.slice(0, 32) });
  if (!/^[0-9a-f]{130}$/i.test(signature)) throw new HttpError(400, 'invalid_signature', { reason: 'malformed' });
  await checkFailures(deps, client);
  if (deps.guard.blockedUpload('', account)) throw takedownError(deps.config.CACHE_CONTROL_TAKEDOWN);
  await takeQuota(deps.redis, account, deps.config.UPLOAD_QUOTA_PER_WEEK, '');
}

/**
 * The Hive uploads whose precheck passed in nginx's upload check (GET /.upload-check/<path>, asked with the
 * upload's own X-Request-Id, which nginx sets), by request id and path, for as long as nginx may take to
 * read the body: the upload that follows on this origin is not prechecked again, so each check runs once.
 * Each pass is taken once; an upload that reaches another origin, or was never checked, runs the precheck
 * itself. Nothing a client sends can skip a check it did not pass.
 * @param {number} ttlMs
 */
export function passedPrechecks(ttlMs) {
  const passed = new LRUCache({ max: 10_000, ttl: ttlMs });
  /** @param {string} reqId @param {string} path */
  const key = (reqId, path) => `${reqId} ${path}`;
  return {
    /** @param {string} reqId @param {string} path */
    pass: (reqId, path) => void passed.set(key(reqId, path), true),
    /** Whether it passed (and no longer): @param {string} reqId @param {string} path */
    take: (reqId, path) => passed.delete(key(reqId, path)),
  };
}

/** @typedef {ReturnType<typeof passedPrechecks>} PassedPrechecks */

/** The client's address as nginx gave it (the first X-Forwarded-For entry). @param {import('express').Request} req */
export function clientOf(req) {
  return String(req.headers['x-forwarded-for'] || req.socket.remoteAddress || '')
    .split(',')[0]
    .trim();
}

const FAILURE_WINDOW_S = 600;

/**
 * A signature that does not verify (or names no account) costs its sender: counted per client for ten
 * minutes, and past UPLOAD_FAILURES_PER_CLIENT its uploads are refused before their body is read, so forged
 * uploads cannot turn this origin into a stream of Hive API calls. Rethrows the refusal.
 * @param {UploadDeps} deps @param {unknown} err @param {string} client @returns {Promise<never>}
 */
export async function countFailure(deps, err, client) {
  const status = /** @type {HttpError} */ (err).status;
  if (client && (status === 403 || status === 404 || status === 400)) {
    await deps.redis
      .multi()
      .incr(`origin:upload-failures:${client}`)
      .expire(`origin:upload-failures:${client}`, FAILURE_WINDOW_S)
      .exec()
      .catch(() => {});
  }
  throw err;
}

/** @param {UploadDeps} deps @param {string} client */
export async function checkFailures(deps, client) {
  if (!client) return;
  const failures = Number(await deps.redis.get(`origin:upload-failures:${client}`).catch(() => 0)) || 0;
  if (failures >= deps.config.UPLOAD_FAILURES_PER_CLIENT) {
    throw new HttpError(
      429,
      'too_many_failed_uploads',
      { window_s: FAILURE_WINDOW_S },
      { 'Retry-After': String(FAILURE_WINDOW_S) },
    );
  }
}

/** @param {UploadDeps & { verifyHivesigner: ((token: string) => Promise<string>) | null }} deps @param {string} token */
export function hivesignerPrecheck(deps, token) {
  if (!deps.verifyHivesigner) throw new HttpError(404, 'hivesigner_disabled');
  if (token.length > 4096) throw new HttpError(400, 'invalid_token', { reason: 'too long' });
  return deps.verifyHivesigner;
}

/** The bearer token check of POST /upload. @param {UploadDeps} deps */
export function tokenPrecheck(deps) {
  const tokens = deps.config.UPLOAD_TOKENS.map((/** @type {string} */ token) => Buffer.from(token));
  return (/** @type {import('express').Request} */ req) => {
    const given = Buffer.from(/^Bearer (.+)$/.exec(req.headers.authorization || '')?.[1] || '');
    const ok = tokens.some(
      (/** @type {Buffer} */ token) => token.length === given.length && timingSafeEqual(token, given),
    );
    if (!ok)
      throw new HttpError(
        401,
        'unauthorized',
        { reason: tokens.length ? 'bad token' : 'token uploads disabled' },
        { 'WWW-Authenticate': 'Bearer' },
      );
  };
}

import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import { createHash, timingSafeEqual } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import busboy from 'busboy';
import { HttpError, TAKEDOWN_KEYS, isAccountName, takedownError } from '@stack/lib';
import { challengeHash, keyFromDigest } from '../keys.js';
import { scrubbed } from '../scrub/stored.js';
import { probe, verify } from '../pipeline/index.js';

/**
 * @typedef {{ digest: Buffer, checksum: Buffer | null, sha256: Buffer | null, bytes: number, filename: string }} Received
 *   checksum: the file's sha256 when the signature is over it; sha256: when asked for (a checksum upload, a scrub's record)
 * @typedef {{ store: import('../store/index.js').Store, config: import('@stack/lib/src/config-types.js').OriginConfig, metrics: import('../metrics.js').OriginMetrics,
 *   checks: import('../queue.js').TransformQueue, guard: import('../takedown.js').Guard, redis: import('ioredis').Redis,
 *   logger: import('pino').Logger }} UploadDeps
 */

/** Checks the declared length before reading a byte: 411 without one, 413 when too big. @param {import('express').Request} req @param {number} maxBytes */
function checkLength(req, maxBytes) {
  const declared = req.headers['content-length'];
  if (declared === undefined) throw new HttpError(411, 'length_required');
  // multipart framing adds a little around the file
  if (Number(declared) > maxBytes + 64 * 1024) throw new HttpError(413, 'payload_too_large', { limit: maxBytes });
  if (!/^multipart\/form-data/i.test(req.headers['content-type'] || '')) {
    throw new HttpError(400, 'invalid_body', { reason: 'expected multipart/form-data with a file' });
  }
}

/**
 * Streams the multipart file to a temp file while hashing it (the key and the signature need the hash);
 * the size limit is enforced while reading.
 * `checksum`: the file's own sha256 too (a checksum-signed upload), else null; `sha256`: the file's sha256
 * wanted anyway (for the record of a scrubbed upload).
 * @param {import('express').Request} req @param {{ maxBytes: number, tempPath: string, checksum: boolean, sha256: boolean }} options
 * @returns {Promise<Received>}
 */
function receiveFile(req, { maxBytes, tempPath, checksum, sha256 }) {
  return new Promise((resolve, reject) => {
    /** @type {Promise<Received> | null} */
    let saving = null;
    let parser;
    try {
      parser = busboy({ headers: req.headers, limits: { files: 1, fileSize: maxBytes, fields: 20, parts: 30 } });
    } catch {
      reject(new HttpError(400, 'invalid_body', { reason: 'malformed multipart' }));
      return;
    }
    parser.on('file', (field, file, info) => {
      if (saving || (field !== 'image_file' && field !== 'file')) {
        file.resume();
        return;
      }
      saving = saveFile(file, tempPath, maxBytes, info.filename || '', checksum, sha256);
      saving.catch(() => {});
    });
    parser.on('error', () => reject(new HttpError(400, 'invalid_body', { reason: 'malformed multipart' })));
    parser.on('close', () => {
      if (!saving) reject(new HttpError(400, 'missing_file', { field: 'image_file' }));
      else saving.then(resolve, reject);
    });
    req.on('aborted', () => reject(new HttpError(400, 'aborted')));
    req.pipe(parser);
  });
}

/**
 * @param {import('node:stream').Readable & { truncated?: boolean }} file @param {string} tempPath @param {number} maxBytes
 * @param {string} filename @param {boolean} checksum @param {boolean} sha256 @returns {Promise<Received>}
 */
async function saveFile(file, tempPath, maxBytes, filename, checksum, sha256) {
  const hash = challengeHash();
  const plain = checksum || sha256 ? createHash('sha256') : null;
  let bytes = 0;
  const tap = new Transform({
    transform(chunk, _encoding, done) {
      hash.update(chunk);
      plain?.update(chunk);
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  let over = false;
  file.on('limit', () => {
    over = true;
  });
  await pipeline(file, tap, createWriteStream(tempPath));
  if (over || file.truncated) throw new HttpError(413, 'payload_too_large', { limit: maxBytes });
  if (bytes === 0) throw new HttpError(400, 'invalid_image', { reason: 'empty file' });
  const plainDigest = plain ? plain.digest() : null;
  return { digest: hash.digest(), checksum: checksum ? plainDigest : null, sha256: plainDigest, bytes, filename };
}

/** A safe filename for the answer URL. @param {string} name @param {string} format */
function cleanFilename(name, format) {
  const base = (name || '')
    .split(/[\\/]/)
    .pop()
    ?.replace(/[^\w.-]+/g, '-')
    .replace(/^[.-]+/, '')
    .slice(0, 100);
  return base || `image.${format === 'jpeg' ? 'jpg' : format}`;
}

/**
 * The upload pipeline shared by both routes: receive → check it is an image → authorise → store durably.
 * The answer is sent only after the file is fsynced under its key.
 * @param {UploadDeps} deps
 * @param {string} kind
 * @param {(digest: Buffer, checksum: Buffer | null) => Promise<string | null>} authorise the key's digest (sha256 of
 *   "ImageSigningChallenge" + bytes) and, when asked for (`checksum`), the file's own sha256: the uploader's
 *   account (null for a token upload)
 * @param {import('express').Request} req @param {import('express').Response} res
 */
async function acceptUpload(deps, kind, authorise, req, res, checksum = false) {
  const { store, config, metrics, checks } = deps;
  const tempPath = store.tempPath();
  try {
    checkLength(req, config.UPLOAD_MAX_BYTES);
    const file = await receiveFile(req, {
      maxBytes: config.UPLOAD_MAX_BYTES,
      tempPath,
      checksum,
      sha256: config.UPLOAD_METADATA !== 'none',
    });
    // an animation is never refused for its length or its frames' total (images.hive.blog takes any file
    // under its size limit): what of it is too costly to transform is served as it is (images.js)
    const info = await probe(tempPath, {
      maxPixels: config.MAX_INPUT_PIXELS,
      maxFrames: config.MAX_FRAMES,
      heic: config.HEIC_DECODE,
      animations: true,
    });
    const account = await authorise(file.digest, file.checksum);
    // after authorisation (only a known uploader spends a decode), in a slot of the upload checks: decodes at
    // once stay bounded, and never wait behind transforms (someone's post is waiting on this one)
    await checks.run(() => verify(tempPath, info, config.MAX_INPUT_PIXELS), { small: true });
    const key = keyFromDigest(file.digest);
    if (deps.guard.blockedUpload(key, account)) throw takedownError(config.CACHE_CONTROL_TAKEDOWN);
    const stored = await scrubbed(deps, tempPath, info, key, file.sha256);
    await store.put(key, stored.path, stored.record);
    if (account) await recordOwner(deps.redis, key, account);
    metrics.uploads.inc({ kind });
    metrics.bytes.inc({ direction: 'in' }, file.bytes);
    res
      .set('Cache-Control', 'no-store')
      .json({ url: `${config.PUBLIC_URL}/${key}/${cleanFilename(file.filename, info.format)}` });
  } catch (err) {
    const httpError = /** @type {HttpError} */ (err);
    metrics.rejections.inc({ reason: httpError.name || 'error' });
    if (httpError.status === 413 || httpError.status === 411) res.set('Connection', 'close');
    throw err;
  } finally {
    await fs.rm(tempPath, { force: true });
    await fs.rm(`${tempPath}.scrubbed`, { force: true });
  }
}

/**
 * Who uploaded a key, for a takedown of the account (its uploads then answer 451). An upload is answered
 * only once this is recorded: Redis down is a 503 (the quota already needs it).
 * @param {import('ioredis').Redis} redis @param {string} key @param {string} account
 */
async function recordOwner(redis, key, account) {
  try {
    await redis.multi().hsetnx(TAKEDOWN_KEYS.owners, key, account).sadd(TAKEDOWN_KEYS.uploads(account), key).exec();
  } catch {
    throw new HttpError(503, 'unavailable', { reason: 'owner store' }, { 'Retry-After': '10' });
  }
}

const WEEK_MS = 7 * 24 * 3600 * 1000;
// a rolling week: the account's uploads of the last 7 days by key (a retry of the same bytes, the same key,
// counts once), the oldest dropped as they age out; taken only while under the limit. Without a key (''),
// only whether the week is full.
const TAKE_QUOTA = `redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])
if ARGV[4] ~= '' and redis.call('ZSCORE', KEYS[1], ARGV[4]) then return 0 end
local used = redis.call('ZCARD', KEYS[1])
if used >= tonumber(ARGV[3]) then return redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2] end
if ARGV[4] == '' then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0`;

/**
 * Per-account quota over a rolling week in Redis, one count per distinct upload (a retried upload of the
 * same bytes is not counted again); Redis down means no upload (503), never an unmetered one. Past the limit
 * a 429 whose Retry-After says when the oldest upload of the window ages out. With `key` '' nothing is
 * taken: an account whose week is already full is refused before its body is read, checked or its
 * signature verified (a Hive API call), so a full account costs the origin one Redis call; a retry of an
 * upload the week already counts is refused with it (its URL is its content's hash, known to the client).
 * @param {import('ioredis').Redis} redis @param {string} account @param {number} limit @param {string} key the upload's key, or ''
 */
async function takeQuota(redis, account, limit, key) {
  const now = Date.now();
  let oldest;
  try {
    oldest = Number(
      await redis.eval(TAKE_QUOTA, 1, `origin:quota:${account}`, String(now), String(WEEK_MS), String(limit), key),
    );
  } catch {
    throw new HttpError(503, 'unavailable', { reason: 'quota store' }, { 'Retry-After': '10' });
  }
  if (oldest) {
    const retryAfter = Math.max(1, Math.ceil((oldest + WEEK_MS - now) / 1000));
    throw new HttpError(
      429,
      'quota_exceeded',
      { limit, period: 'rolling week' },
      { 'Retry-After': String(retryAfter), ...(key ? {} : { Connection: 'close' }) },
    );
  }
}

/**
 * POST /<account>/<signature>: the Hive upload, signed over sha256("ImageSigningChallenge" + bytes).
 * POST /cs/<account>/<signature> (`signed: 'checksum'`, imagehoster's uploadCsHandler): signed over
 * sha256("ImageSigningChallenge" + sha256(bytes)), so a wallet signs 32 bytes instead of the whole image.
 * Either way the key is the first digest's, so the same bytes have one URL.
 * @param {UploadDeps & { redis: import('ioredis').Redis, verifySignature: import('../hive-auth.js').VerifySignature }} deps
 * @param {'data' | 'checksum'} [signed]
 * @returns {import('express').RequestHandler}
 */
export function hiveUploadRoute(deps, signed = 'data') {
  return async (req, res, next) => {
    res.locals.route = 'upload';
    const { account, signature } = req.params;
    try {
      await hivePrecheck(deps, account, signature, clientOf(req)).catch((err) => {
        deps.metrics.rejections.inc({ reason: err.name });
        throw err;
      });
      await acceptUpload(
        deps,
        'hive',
        async (digest, checksum) => {
          await deps
            .verifySignature(account, signature, checksum ? challengeHash().update(checksum).digest() : digest)
            .catch((err) => countFailure(deps, err, clientOf(req)));
          await takeQuota(deps.redis, account, deps.config.UPLOAD_QUOTA_PER_WEEK, keyFromDigest(digest));
          return account;
        },
        req,
        res,
        signed === 'checksum',
      );
    } catch (err) {
      next(err);
    }
  };
}

/**
 * What a Hive upload must pass before its body is worth reading: a valid account name and signature shape,
 * a client that has not been sending forged signatures, an account not taken down, a week not full.
 * @param {UploadDeps} deps @param {string} account @param {string} signature @param {string} client
 */
async function hivePrecheck(deps, account, signature, client) {
  if (!isAccountName(account)) throw new HttpError(400, 'invalid_account', { account: account.slice(0, 32) });
  if (!/^[0-9a-f]{130}$/i.test(signature)) throw new HttpError(400, 'invalid_signature', { reason: 'malformed' });
  await checkFailures(deps, client);
  if (deps.guard.blockedUpload('', account)) throw takedownError(deps.config.CACHE_CONTROL_TAKEDOWN);
  await takeQuota(deps.redis, account, deps.config.UPLOAD_QUOTA_PER_WEEK, '');
}

/** The client's address as nginx gave it (the first X-Forwarded-For entry). @param {import('express').Request} req */
function clientOf(req) {
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
async function countFailure(deps, err, client) {
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
async function checkFailures(deps, client) {
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

/**
 * POST /hs/<access token>: the upload of a user logged in through Hivesigner (imagehoster's uploadHsHandler).
 * Off (404) until HIVESIGNER_APP names this site's Hivesigner app.
 * @param {UploadDeps & { redis: import('ioredis').Redis, verifyHivesigner: ((token: string) => Promise<string>) | null }} deps
 * @returns {import('express').RequestHandler}
 */
export function hivesignerUploadRoute(deps) {
  return async (req, res, next) => {
    res.locals.route = 'upload';
    try {
      const verify = hivesignerPrecheck(deps, req.params.token);
      await acceptUpload(
        deps,
        'hivesigner',
        async (digest) => {
          const account = await verify(req.params.token);
          await takeQuota(deps.redis, account, deps.config.UPLOAD_QUOTA_PER_WEEK, keyFromDigest(digest));
          return account;
        },
        req,
        res,
      );
    } catch (err) {
      next(err);
    }
  };
}

/** @param {UploadDeps & { verifyHivesigner: ((token: string) => Promise<string>) | null }} deps @param {string} token */
function hivesignerPrecheck(deps, token) {
  if (!deps.verifyHivesigner) throw new HttpError(404, 'hivesigner_disabled');
  if (token.length > 4096) throw new HttpError(400, 'invalid_token', { reason: 'too long' });
  return deps.verifyHivesigner;
}

/**
 * POST /upload with `Authorization: Bearer <token>`, for sites without Hive accounts.
 * @param {UploadDeps} deps
 * @returns {import('express').RequestHandler}
 */
export function tokenUploadRoute(deps) {
  const check = tokenPrecheck(deps);
  return async (req, res, next) => {
    res.locals.route = 'upload';
    try {
      check(req);
      await acceptUpload(deps, 'token', async () => null, req, res);
    } catch (err) {
      next(err);
    }
  };
}

/** The bearer token check of POST /upload. @param {UploadDeps} deps */
function tokenPrecheck(deps) {
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

/**
 * GET /.upload-check/<upload path>: nginx asks this before it reads an upload's body (nginx/upload-body.lua),
 * so an upload that would be refused whatever its bytes (a wrong token, a malformed signature, a full week,
 * a client sending forged signatures) is refused before it can hold an upload slot. 204: read the body.
 * Not on the public path (nginx's location is internal).
 * @param {UploadDeps & { verifyHivesigner: ((token: string) => Promise<string>) | null }} deps
 * @returns {import('express').RequestHandler}
 */
export function uploadCheckRoute(deps) {
  const token = tokenPrecheck(deps);
  return async (req, res, next) => {
    res.locals.route = 'upload-check';
    try {
      const path = req.path.slice('/.upload-check'.length);
      const hive = /^\/(?:cs\/)?([^/]+)\/([^/]+)$/.exec(path);
      if (path === '/upload') token(req);
      else if (path.startsWith('/hs/')) hivesignerPrecheck(deps, path.slice(4));
      else if (path.startsWith('/proxy-auth/')) {
        /* a small signed JSON body, checked by its own route */
      } else if (hive)
        await hivePrecheck(deps, decodeURIComponent(hive[1]), decodeURIComponent(hive[2]), clientOf(req));
      else throw new HttpError(404, 'not_found');
      res.set('Cache-Control', 'no-store').status(204).end();
    } catch (err) {
      deps.metrics.rejections.inc({ reason: /** @type {HttpError} */ (err).name || 'error' });
      next(err);
    }
  };
}

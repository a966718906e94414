// The upload pipeline, whatever route it came by: receive (receive.js) → check it is an image → authorise →
// key → scrub (../scrub/) → store durably → record its owner; answered only once the file is stored under its key.
import fs from 'node:fs/promises';
import { HttpError, TAKEDOWN_KEYS, takedownError } from '@stack/lib';
import { keyFromDigest } from '../keys.js';
import { probe, verify } from '../pipeline/index.js';
import { scrubbed } from '../scrub/stored.js';
import { checkLength, cleanFilename, receiveFile } from './receive.js';

/**
 * @typedef {{ store: import('../store/index.js').Store, config: import('@stack/lib/src/config-types.js').OriginConfig, metrics: import('../metrics.js').OriginMetrics,
 *   checks: import('../queue.js').TransformQueue, guard: import('../takedown.js').Guard, redis: import('ioredis').Redis,
 *   logger: import('pino').Logger }} UploadDeps
 */

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
export async function acceptUpload(deps, kind, authorise, req, res, checksum = false) {
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

// origin-scrub-store [--concurrency N]: the uploads already stored (fs or S3, STORE), scrubbed as new uploads
// are (UPLOAD_METADATA), each checked against its key first; an object whose bytes changed is replaced
// atomically with its record, and a "changed" event queued on the purge stream, so that the purge service
// takes the old bytes out of every varnish node, the origins' caches and the CDN. Idempotent and resumable:
// an object with a record is left alone, one with nothing to remove is left as it is; run it again after
// an interruption. `./infra/stack scrub-store` runs it with the stack's settings.
import '../../../lib/src/node-version.js';
import fs from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ListObjectsV2Command, GetObjectCommand } from '@aws-sdk/client-s3';
import { connectRedis, createLogger, isUploadKey, loadConfig } from '@stack/lib';
import { runBatch } from './batch.js';
import { settings } from '../config.js';
import { uploadFiles } from './migrate.js';
import { scrubFile } from '../scrub/file.js';
import { ScrubError } from '../scrub/index.js';
import { digestsOf } from '../store/record.js';
import { FsStore } from '../store/fs.js';
import { objectRecord, putObject, s3Client } from '../store/s3.js';
import { probe } from '../pipeline/index.js';

/**
 * @typedef {{ keys: () => Promise<string[]>, record: (key: string) => Promise<unknown>, fetch: (key: string, temp: string) => Promise<void>,
 *   replace: (key: string, file: string, record: import('../store/record.js').StoredRecord) => Promise<void>, close: () => void }} Objects
 */

/** The fs store's uploads, replaced by rename (the record first), owned as the directory they are in. @param {string} dataDir @returns {Objects} */
function fsObjects(dataDir) {
  const store = new FsStore(dataDir);
  return {
    async keys() {
      const keys = [];
      for await (const file of uploadFiles(dataDir)) keys.push(path.basename(file));
      return keys;
    },
    record: (key) => store.record(key),
    fetch: (key, temp) => fs.copyFile(store.pathFor(key), temp),
    async replace(key, file, record) {
      const { uid, gid } = await fs.stat(path.dirname(store.pathFor(key)));
      await fs.chown(file, uid, gid).catch(() => {});
      await store.put(key, file, record);
      await fs.chown(`${store.pathFor(key)}.json`, uid, gid).catch(() => {});
    },
    close() {},
  };
}

/** The bucket's uploads, replaced by writing the object again with its record. @param {import('../store/s3.js').S3Settings} config @returns {Objects} */
function s3Objects(config) {
  const client = s3Client(config);
  return {
    async keys() {
      const keys = [];
      let token;
      do {
        const page = await client.send(
          new ListObjectsV2Command({ Bucket: config.S3_BUCKET, Prefix: config.S3_PREFIX, ContinuationToken: token }),
        );
        for (const object of page.Contents || []) {
          const key = String(object.Key).slice(config.S3_PREFIX.length);
          if (isUploadKey(key)) keys.push(key);
        }
        token = page.NextContinuationToken;
      } while (token);
      return keys;
    },
    record: (key) => objectRecord(client, config, key),
    async fetch(key, temp) {
      const object = await client.send(
        new GetObjectCommand({ Bucket: config.S3_BUCKET, Key: `${config.S3_PREFIX}${key}` }),
      );
      await fs.writeFile(temp, /** @type {any} */ (object.Body));
    },
    replace: (key, file, record) => putObject(client, config, key, file, record),
    close: () => client.destroy(),
  };
}

/**
 * One upload: `already` (it has a record), `damaged` (its bytes do not make its key), `clean` (nothing to
 * remove), `scrubbed` (replaced, its purge queued) or `unsupported` (no in-place editor: left as it is).
 * @param {{ objects: Objects, config: import('@stack/lib/src/config-types.js').OriginConfig, tmp: string, queuePurge: (key: string) => Promise<void> }} deps @param {string} key
 */
async function scrubObject({ objects, config, tmp, queuePurge }, key) {
  if (await objects.record(key)) return 'already';
  const temp = path.join(tmp, `${key}.${process.pid}`);
  try {
    await objects.fetch(key, temp);
    const uploaded = await digestsOf(temp);
    if (uploaded.key !== key) return 'damaged';
    const info = await probe(temp, {
      maxPixels: Number.MAX_SAFE_INTEGER,
      maxFrames: Number.MAX_SAFE_INTEGER,
      heic: config.HEIC_DECODE,
    });
    // scrubStore refuses UPLOAD_METADATA=none before any object
    const mode = /** @type {'all' | 'location'} */ (config.UPLOAD_METADATA);
    let result;
    try {
      result = await scrubFile(temp, info.format, mode);
    } catch (err) {
      if (err instanceof ScrubError) return 'unsupported';
      throw err;
    }
    if (!result.removed.length) return 'clean';
    const stored = await digestsOf(result.path);
    await objects.replace(key, result.path, {
      key,
      scrubbed: mode,
      uploadSha256: uploaded.sha256,
      storedSha256: stored.sha256,
      removed: result.removed,
    });
    await queuePurge(key);
    return 'scrubbed';
  } finally {
    await fs.rm(temp, { force: true });
    await fs.rm(`${temp}.scrubbed`, { force: true });
  }
}

/**
 * Every stored upload through scrubObject, `concurrency` at a time.
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, concurrency: number, log?: (line: string) => void }} options
 */
export async function scrubStore({ config, concurrency, log }) {
  if (config.UPLOAD_METADATA === 'none') throw new Error('UPLOAD_METADATA=none: nothing to scrub');
  const objects =
    config.STORE === 's3'
      ? s3Objects(/** @type {import('../store/s3.js').S3Settings} */ (config))
      : fsObjects(config.DATA_DIR);
  const tmp = path.join(config.DATA_DIR, 'tmp');
  await fs.mkdir(tmp, { recursive: true });
  const redis = connectRedis({ ...config }, createLogger('scrub-store', 'fatal'));
  await new Promise((resolve, reject) => {
    redis.once('ready', resolve);
    redis.once('error', reject);
  });
  const queuePurge = async (/** @type {string} */ key) => {
    await redis.xadd(
      config.PURGE_STREAM,
      '*',
      'type',
      'changed',
      'key',
      key,
      'source',
      'scrub-store',
      'at',
      String(Date.now()),
    );
  };
  try {
    const keys = await objects.keys();
    return await runBatch({
      items: keys,
      concurrency,
      outcomes: ['scrubbed', 'clean', 'already', 'unsupported', 'damaged'],
      name: (key) => key,
      log,
      work: (key) => scrubObject({ objects, config, tmp, queuePurge }, key),
    });
  } finally {
    objects.close();
    redis.disconnect();
  }
}

async function main() {
  const { values } = parseArgs({ options: { concurrency: { type: 'string', default: '4' } } });
  const config = /** @type {import('@stack/lib/src/config-types.js').OriginConfig} */ (loadConfig(settings));
  process.stderr.write(
    `scrubbing the uploads of the ${config.STORE} store (UPLOAD_METADATA=${config.UPLOAD_METADATA})\n`,
  );
  const result = await scrubStore({ config, concurrency: Number(values.concurrency) });
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.stderr.write(
    `${result.total} uploads: ${result.scrubbed} scrubbed (their caches purged), ${result.clean} with nothing to remove, ${result.already} scrubbed before, ${result.unsupported} not editable in place (left as they are), ${result.damaged} damaged, ${result.failed} failed\n`,
  );
  process.exitCode = result.failed || result.damaged ? 1 : 0;
}

if (import.meta.main) {
  main().catch((err) => {
    process.stderr.write(`scrub-store: ${err.message}\n`);
    process.exit(2);
  });
}

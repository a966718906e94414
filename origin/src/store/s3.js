import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { recordFromMetadata, recordMetadata } from './record.js';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { HttpError, StartupError } from '@stack/lib';
import { challengeHash, keyFromDigest } from '../keys.js';
import { sniffFile } from '../sniff.js';
import { createSingleFlight } from '../single-flight.js';

/** @typedef {import('./index.js').Store} StoreContract */

/**
 * @typedef {{ S3_ENDPOINT: string, S3_REGION: string, S3_BUCKET: string, S3_PREFIX: string, S3_FORCE_PATH_STYLE: boolean,
 *   S3_ACCESS_KEY_ID: string, S3_SECRET_ACCESS_KEY: string, S3_TIMEOUT_MS: number, S3_MAX_ATTEMPTS: number }} S3Settings
 */

/** The S3 client of these settings (credentials from the settings, else the SDK's chain: env, profile, instance role). @param {S3Settings} config */
export function s3Client(config) {
  return new S3Client({
    region: config.S3_REGION,
    endpoint: config.S3_ENDPOINT || undefined,
    forcePathStyle: config.S3_FORCE_PATH_STYLE,
    credentials: config.S3_ACCESS_KEY_ID
      ? { accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY }
      : undefined,
    maxAttempts: config.S3_MAX_ATTEMPTS,
    // the SDK's requestTimeout alone only logs a warning: a server that stops answering would hold a request
    // (and every reader of that key) for ever; socketTimeout ends a request whose socket is quiet that long
    requestHandler: {
      connectionTimeout: Math.min(config.S3_TIMEOUT_MS, 3000),
      requestTimeout: config.S3_TIMEOUT_MS,
      throwOnRequestTimeout: true,
      socketTimeout: config.S3_TIMEOUT_MS,
    },
  });
}

/**
 * One S3 operation, retries included, ended after S3_TIMEOUT_MS whatever the server does (a stopped or
 * unreachable S3 keeps its sockets open and quiet); the signal also bounds reading a GET's body.
 * @param {{ S3_TIMEOUT_MS: number }} config
 */
const deadline = (config) => ({ abortSignal: AbortSignal.timeout(config.S3_TIMEOUT_MS) });

/** The HTTP status S3 answered, or 0 when it did not answer (unreachable, timed out). @param {unknown} err */
function s3Status(err) {
  return /** @type {any} */ (err)?.$metadata?.httpStatusCode || 0;
}

/** Whether an S3 error says the object is not there. @param {unknown} err */
const missing = (err) =>
  s3Status(err) === 404 ||
  /** @type {any} */ (err)?.name === 'NoSuchKey' ||
  /** @type {any} */ (err)?.name === 'NotFound';

/** Why an S3 operation failed, for the log: a timeout says how long it waited. @param {unknown} err @param {number} ms */
function s3Failure(err, ms) {
  const quiet = /abort|timeout|timed out/i.test(`${/** @type {any} */ (err)?.name} ${String(err)}`);
  return quiet ? `S3 quiet for S3_TIMEOUT_MS (${ms} ms): stopped, overloaded or unreachable` : String(err);
}

/** S3 down, slow or refusing: a clean 503 the client may retry, never a "not found" anyone remembers. */
function storeUnavailable() {
  return new HttpError(503, 'store_unavailable', { reason: 'object storage unreachable' }, { 'Retry-After': '5' });
}

/**
 * Why a bucket cannot be used, in one line for the log, or '' when it can (or S3 is only unreachable for now:
 * an origin starts and serves what it has cached, and reads the bucket once it is back).
 * @param {S3Client} client @param {S3Settings} config
 */
export async function bucketProblem(client, config) {
  try {
    await client.send(new HeadBucketCommand({ Bucket: config.S3_BUCKET }), deadline(config));
    return '';
  } catch (err) {
    const where = `bucket "${config.S3_BUCKET}" at ${config.S3_ENDPOINT || `AWS S3 (${config.S3_REGION})`}`;
    const status = s3Status(err);
    if (status === 403) return `S3 store: access to ${where} denied: check S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY`;
    if (status === 404) return `S3 store: ${where} does not exist: create it, or check S3_BUCKET`;
    if (status === 301 || status === 400)
      return `S3 store: ${where} answered ${status}: check S3_REGION and S3_FORCE_PATH_STYLE`;
    return '';
  }
}

/** An upload's object key. @param {S3Settings} config @param {string} key */
const objectKey = (config, key) => `${config.S3_PREFIX}${key}`;

/**
 * An upload's object size, or null when the bucket has no such object (HEAD).
 * @param {S3Client} client @param {S3Settings} config @param {string} key @returns {Promise<number | null>}
 */
export async function objectSize(client, config, key) {
  try {
    const head = await client.send(
      new HeadObjectCommand({ Bucket: config.S3_BUCKET, Key: objectKey(config, key) }),
      deadline(config),
    );
    return head.ContentLength ?? 0;
  } catch (err) {
    if (missing(err)) return null;
    throw err;
  }
}

/**
 * Writes a file as an upload's object; resolves once S3 acknowledged it.
 * @param {S3Client} client @param {S3Settings} config @param {string} key @param {string} file
 */
export async function putObject(
  client,
  config,
  key,
  file,
  record = /** @type {import('./record.js').StoredRecord | null} */ (null),
) {
  const { size } = await fs.stat(file);
  await client.send(
    new PutObjectCommand({
      Bucket: config.S3_BUCKET,
      Key: objectKey(config, key),
      Body: createReadStream(file),
      ContentLength: size,
      ContentType: await sniffFile(file),
      CacheControl: 'public, max-age=31536000, immutable',
      ...(record ? { Metadata: recordMetadata(record) } : {}),
    }),
    deadline(config),
  );
}

/** The record stored with an object (its metadata), or null. @param {S3Client} client @param {S3Settings} config @param {string} key */
export async function objectRecord(client, config, key) {
  try {
    const head = await client.send(
      new HeadObjectCommand({ Bucket: config.S3_BUCKET, Key: objectKey(config, key) }),
      deadline(config),
    );
    return recordFromMetadata(key, head.Metadata);
  } catch (err) {
    if (missing(err)) return null;
    throw err;
  }
}

/**
 * Uploaded originals in an S3 bucket (AWS, R2, Ceph, MinIO, Garage, versitygw), shared by every origin: the
 * object's key is the upload's content-addressed key, so any origin serves any upload. This origin's disk
 * keeps a bounded read-through copy (the originals' LRU, shared with fetched remote originals).
 * An upload is answered only after S3 has acknowledged the object; S3 never shows half an object.
 * @implements {StoreContract}
 */
export class S3Store {
  /**
   * `previous`: the fs store this origin had before (DATA_DIR/uploads), read when the bucket lacks a key, so
   * uploads stay served while migrate-store copies them.
   * @param {{ config: S3Settings, cache: import('../cache/disk-lru.js').DiskLru, logger: import('pino').Logger,
   *   previous?: import('./fs.js').FsStore, onOperation?: (operation: string, result: string) => void }} deps
   */
  constructor({ config, cache, logger, previous, onOperation = () => {} }) {
    this.config = config;
    this.previous = previous;
    /** its files are copies in the originals cache: one gone is read from the bucket again */
    this.copies = true;
    this.client = s3Client(config);
    this.cache = cache;
    this.logger = logger;
    this.count = onOperation;
    this.flight = createSingleFlight(() => {});
  }

  /** Refuses to start on wrong credentials or a missing bucket; S3 only unreachable is a warning. */
  async init() {
    const problem = await bucketProblem(this.client, this.config);
    if (problem) throw new StartupError(problem);
  }

  /** @param {string} key */
  objectKey(key) {
    return objectKey(this.config, key);
  }

  /** A temp path in the local cache's directory (a fetched object is renamed into the cache). */
  tempPath() {
    return this.cache.tempPath();
  }

  /**
   * The upload as a local file: from the cache, else read from the bucket once however many ask.
   * Null when the bucket has no such object; a 503 when S3 cannot be reached.
   * @param {string} key a validated key @returns {Promise<{ path: string, size: number } | null>}
   */
  async stat(key) {
    const cached = this.cache.get(key);
    if (cached) return { path: cached.path, size: cached.size };
    return this.flight('get', key, () => this.download(key));
  }

  /** @param {string} key @returns {Promise<{ path: string, size: number } | null>} */
  async download(key) {
    const temp = this.cache.tempPath();
    const within = deadline(this.config);
    try {
      const answer = await this.client.send(
        new GetObjectCommand({ Bucket: this.config.S3_BUCKET, Key: this.objectKey(key) }),
        within,
      );
      const hash = challengeHash();
      const plain = createHash('sha256');
      let size = 0;
      const tap = new Transform({
        transform(chunk, _encoding, done) {
          hash.update(chunk);
          plain.update(chunk);
          size += chunk.length;
          done(null, chunk);
        },
      });
      await pipeline(/** @type {import('node:stream').Readable} */ (answer.Body), tap, createWriteStream(temp), {
        signal: within.abortSignal,
      });
      // content-addressed: an object whose bytes are neither its key's nor (a scrubbed upload) those its record
      // names is damaged, and never served
      const record = recordFromMetadata(key, answer.Metadata);
      const whole =
        keyFromDigest(hash.digest()) === key || Boolean(record && record.storedSha256 === plain.digest('hex'));
      if (!whole) {
        this.count('get', 'corrupt');
        this.logger.error({ key }, 'S3 object does not match its key: not served');
        throw new HttpError(502, 'store_corrupt', { key });
      }
      this.count('get', 'ok');
      return { path: await this.cache.place(key, 'bin', temp, size), size };
    } catch (err) {
      await fs.rm(temp, { force: true });
      if (err instanceof HttpError) throw err;
      if (missing(err)) {
        const local = await this.previous?.stat(key);
        this.count('get', local ? 'previous_store' : 'missing');
        return local ? { path: local.path, size: local.size } : null;
      }
      this.count('get', 'error');
      this.logger.warn({ err: s3Failure(err, this.config.S3_TIMEOUT_MS), key }, 'S3 read failed');
      throw storeUnavailable();
    }
  }

  /**
   * Writes a complete temp file under its key and returns once S3 acknowledged it; content-addressed, so
   * bytes already there are not written again. The file then joins the local cache.
   * @param {string} key @param {string} tempFile @param {import('./record.js').StoredRecord | null} [record]
   */
  async put(key, tempFile, record = null) {
    try {
      if ((await objectSize(this.client, this.config, key)) !== null) {
        this.count('put', 'exists');
      } else {
        await putObject(this.client, this.config, key, tempFile, record);
        this.count('put', 'ok');
      }
    } catch (err) {
      this.count('put', 'error');
      this.logger.warn({ err: s3Failure(err, this.config.S3_TIMEOUT_MS), key }, 'S3 write failed');
      throw storeUnavailable();
    }
    await this.cache.putFile(key, 'bin', tempFile);
  }

  /** The record stored with an upload, or null. @param {string} key */
  record(key) {
    return objectRecord(this.client, this.config, key);
  }

  /** Deletes an upload (a takedown with TAKEDOWN_DELETE_UPLOADS) from the bucket and this origin's disk. @param {string} key */
  async remove(key) {
    await this.client.send(
      new DeleteObjectCommand({ Bucket: this.config.S3_BUCKET, Key: this.objectKey(key) }),
      deadline(this.config),
    );
    await this.cache.remove(key);
    await this.previous?.remove(key);
  }
}

import { FsStore } from './fs.js';
import { S3Store } from './s3.js';

export { FsStore, S3Store };

/**
 * Where uploads are kept (STORE): the contract every store keeps, whatever keeps the bytes.
 * - `init()`: ready to serve, or a StartupError saying why not (wrong credentials, no bucket).
 * - `tempPath()`: a fresh path for new bytes, on the filesystem `put` moves them from.
 * - `stat(key)`: the upload as a local file, or null when the store has none; an HttpError 503 when the
 *   store cannot be reached (never null for "unreachable": a 404 would be cached).
 * - `put(key, tempFile, record)`: durable once it resolves (synced to disk, or acknowledged by S3) and
 *   served by `stat` from then on; content-addressed, so bytes already under the key are not written
 *   again; `tempFile` is consumed; `record` (a scrubbed upload's StoredRecord) is kept with it.
 * - `record(key)`: that record, or null.
 * - `remove(key)`: the upload and its record gone (a takedown with TAKEDOWN_DELETE_UPLOADS).
 * - `copies`: whether `stat`'s files are copies (one deleted by hand is read again) or the uploads.
 * @typedef {{
 *   copies: boolean,
 *   init(): Promise<void>,
 *   tempPath(): string,
 *   stat(key: string): Promise<{ path: string, size: number } | null>,
 *   put(key: string, tempFile: string, record?: import('./record.js').StoredRecord | null): Promise<void>,
 *   record(key: string): Promise<import('./record.js').StoredRecord | null>,
 *   remove(key: string): Promise<void>,
 * }} Store
 */

/**
 * The store STORE names: `fs` (DATA_DIR/uploads) or `s3` (a bucket shared by every origin, read through
 * the originals cache). @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, cache: import('../cache/disk-lru.js').DiskLru,
 *   logger: import('pino').Logger, metrics: import('../metrics.js').OriginMetrics }} deps @returns {Store}
 */
export function createStore({ config, cache, logger, metrics }) {
  if (config.STORE !== 's3') return new FsStore(config.DATA_DIR);
  const onOperation = (/** @type {string} */ operation, /** @type {string} */ result) =>
    metrics.store.inc({ operation, result });
  const previous = new FsStore(config.DATA_DIR);
  return new S3Store({
    config: /** @type {import('./s3.js').S3Settings} */ (config),
    cache,
    logger,
    previous,
    onOperation,
  });
}

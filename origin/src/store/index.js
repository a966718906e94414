import { FsStore } from './fs.js';
import { S3Store } from './s3.js';

/** @typedef {FsStore | S3Store} Store where uploads are kept (STORE) */

/**
 * The store STORE names: `fs` (DATA_DIR/uploads) or `s3` (a bucket shared by every origin, read through
 * the originals cache). @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, originals: import('../cache/disk-lru.js').DiskLru,
 *   logger: import('pino').Logger, metrics: import('../metrics.js').OriginMetrics }} deps @returns {Store}
 */
export function createStore({ config, originals, logger, metrics }) {
  if (config.STORE !== 's3') return new FsStore(config.DATA_DIR);
  const onOperation = (/** @type {string} */ operation, /** @type {string} */ result) => metrics.store.inc({ operation, result });
  const previous = new FsStore(config.DATA_DIR);
  return new S3Store({ config: /** @type {import('./s3.js').S3Settings} */ (config), cache: originals, logger, previous, onOperation });
}

// What is stored of an upload (or of an original pulled through from another image host): scrubbed as
// UPLOAD_METADATA says (scrub/), or a clean re-encode where it cannot be edited in place, with the record of
// what was done (store/record.js). Shared by the upload routes and the pull-through.
import fs from 'node:fs/promises';
import sharp from 'sharp';
import { HttpError } from '@stack/lib';
import { sha256Of } from '../store/record.js';
import { scrubFile } from './file.js';
import { ScrubError } from './index.js';

/**
 * The upload as it is stored (UPLOAD_METADATA): its location and device data taken out of its metadata in
 * place (scrub/), or, where its structure cannot be edited safely, a clean re-encode (logged and counted);
 * with the record of what was done. The key stays the uploaded bytes'.
 * @param {{ config: import('@stack/lib/src/config-types.js').OriginConfig, metrics: import('../metrics.js').OriginMetrics, logger: import('pino').Logger }} deps @param {string} tempPath @param {import('../pipeline/index.js').SourceInfo} info @param {string} key
 * @param {Buffer | null} uploadSha256 the uploaded bytes' (hashed as they arrived)
 * @returns {Promise<{ path: string, record: import('../store/record.js').StoredRecord | null }>}
 */
export async function scrubbed({ config, metrics, logger }, tempPath, info, key, uploadSha256) {
  const mode = config.UPLOAD_METADATA;
  if (mode === 'none') return { path: tempPath, record: null };
  /** @type {{ path: string, removed: string[] }} */
  let result;
  /** @type {import('../store/record.js').StoredRecord['scrubbed']} */
  let how = mode;
  try {
    result = await scrubFile(tempPath, info.format, mode);
  } catch (err) {
    if (!(err instanceof ScrubError)) throw err;
    await fs.writeFile(`${tempPath}.scrubbed`, await cleanReencode(tempPath, info, err.message));
    result = { path: `${tempPath}.scrubbed`, removed: ['everything'] };
    how = 'reencoded';
    logger.warn(
      { key, format: info.format, reason: err.message },
      'upload stored as a clean re-encode: its metadata could not be edited in place',
    );
  }
  metrics.scrubs.inc({ result: how === 'reencoded' ? 'reencoded' : result.removed.length ? 'scrubbed' : 'clean' });
  if (!result.removed.length) return { path: tempPath, record: null };
  const sha256 = sha256Of(result.path);
  return {
    path: result.path,
    record: {
      key,
      scrubbed: how,
      uploadSha256: uploadSha256?.toString('hex') || '',
      storedSha256: sha256,
      removed: result.removed,
    },
  };
}

/**
 * An upload whose metadata could not be edited safely, decoded and encoded again without any: turned
 * upright, its colour profile kept, in its own format where sharp writes it losslessly or at a high quality.
 * A file that cannot be decoded either is a bad image (400), not the service's failure.
 * @param {string} file @param {import('../pipeline/index.js').SourceInfo} info @param {string} scrubFailure
 * @returns {Promise<Buffer>}
 */
async function cleanReencode(file, info, scrubFailure) {
  try {
    return await reencode(file, info);
  } catch (err) {
    throw new HttpError(400, 'invalid_image', {
      reason: 'its metadata cannot be removed and its pixels cannot be decoded',
      metadata: scrubFailure,
      decode: /** @type {Error} */ (err).message.split('\n')[0],
    });
  }
}

/** @param {string} file @param {import('../pipeline/index.js').SourceInfo} info */
function reencode(file, info) {
  const image = sharp(file, { animated: info.frames > 1, limitInputPixels: false })
    .rotate()
    .keepIccProfile();
  switch (info.format) {
    case 'png':
      return image.png().toBuffer();
    case 'webp':
      return image.webp({ quality: 95 }).toBuffer();
    case 'gif':
      return image.gif().toBuffer();
    case 'tiff':
      return image.tiff({ compression: 'lzw' }).toBuffer();
    default:
      return image.jpeg({ quality: 95 }).toBuffer();
  }
}

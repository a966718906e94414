// Receiving an upload: its declared length checked before a byte is read, the multipart file streamed to a
// temporary file while it is hashed (its key and its signature need the hash), within the size limit.
import { createWriteStream } from 'node:fs';
import { createHash } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import busboy from 'busboy';
import { HttpError } from '@stack/lib';
import { challengeHash } from '../keys.js';

/**
 * @typedef {{ digest: Buffer, checksum: Buffer | null, sha256: Buffer | null, bytes: number, filename: string }} Received
 *   checksum: the file's sha256 when the signature is over it; sha256: when asked for (a checksum upload, a scrub's record)
 */

/** Checks the declared length before reading a byte: 411 without one, 413 when too big. @param {import('express').Request} req @param {number} maxBytes */
export function checkLength(req, maxBytes) {
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
export function receiveFile(req, { maxBytes, tempPath, checksum, sha256 }) {
  return new Promise((resolve, reject) => {
    /** @type {Promise<Received> | null} */
    let saving = null;
    let parser;
    try {
      // a browser form may hold other file inputs before image_file: those parts are read past, not kept
      parser = busboy({ headers: req.headers, limits: { files: 4, fileSize: maxBytes, fields: 20, parts: 30 } });
    } catch {
      reject(new HttpError(400, 'invalid_body', { reason: 'malformed multipart' }));
      return;
    }
    parser.on('file', (field, file, info) => {
      if (saving || (field !== 'image_file' && field !== 'file')) {
        // a part skipped: drained, and its error heard (a form cut short in it fails it with one, which
        // unheard ended the origin; the parser's own 'error' answers the upload)
        file.on('error', () => {});
        file.resume();
        return;
      }
      saving = saveFile(file, tempPath, maxBytes, info.filename || '', checksum, sha256);
      // a write that fails (the disk full) ends the upload at once: the form's parser, its file stream
      // destroyed, never closes, and the upload waited for nothing
      saving.catch(reject);
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
export function cleanFilename(name, format) {
  const base = (name || '')
    .split(/[\\/]/)
    .pop()
    ?.replace(/[^\w.-]+/g, '-')
    .replace(/^[.-]+/, '')
    .slice(0, 100);
  return base || `image.${format === 'jpeg' ? 'jpg' : format}`;
}

// A WebP's RIFF chunks: the pixels (VP8, VP8L, ALPH, ANIM, ANMF) and the ICC profile (ICCP) copied as they
// are; EXIF edited in place, XMP blanked in place under `location`; `all` keeps neither but an EXIF of the
// orientation, and the extended header's flags follow what is left.
import { minimalExif } from './exif.js';
import { ScrubError, orientationOf, scrubTiff } from './tiff.js';
import { xmpBudget, blankXmp } from './xmp.js';

const EXIF_FLAG = 0x08;
const XMP_FLAG = 0x04;

/** @param {string} fourcc @param {Buffer} data */
function chunk(fourcc, data) {
  const head = Buffer.alloc(8);
  head.write(fourcc, 0, 'latin1');
  head.writeUInt32LE(data.length, 4);
  return Buffer.concat([head, data, data.length & 1 ? Buffer.alloc(1) : Buffer.alloc(0)]);
}

/** @param {Buffer} input @param {'location' | 'all'} mode @returns {{ data: Buffer, removed: string[] }} */
export function scrubWebp(input, mode) {
  if (input.length < 12 || input.toString('latin1', 0, 4) !== 'RIFF' || input.toString('latin1', 8, 12) !== 'WEBP')
    throw new ScrubError('not a WebP');
  const end = Math.min(input.length, 8 + input.readUInt32LE(4));
  /** @type {Array<[string, Buffer]>} */
  const chunks = [];
  const removed = [];
  const budget = xmpBudget();
  let at = 12;
  while (at < end) {
    if (at + 8 > end) throw new ScrubError('a WebP chunk that is cut');
    const fourcc = input.toString('latin1', at, at + 4);
    const size = input.readUInt32LE(at + 4);
    if (at + 8 + size > end) throw new ScrubError('a WebP chunk longer than the file');
    chunks.push([fourcc, Buffer.from(input.subarray(at + 8, at + 8 + size))]);
    at += 8 + size + (size & 1);
  }
  /** @type {Array<[string, Buffer]>} */
  const kept = [];
  for (const [fourcc, data] of chunks) {
    if (fourcc === 'EXIF') {
      const start = data.subarray(0, 6).toString('latin1') === 'Exif\0\0' ? 6 : 0;
      if (mode === 'all') {
        removed.push('exif');
        const orientation = orientationOf(data, start, data.length);
        if (orientation !== 1) kept.push(['EXIF', minimalExif(orientation)]);
        continue;
      }
      try {
        removed.push(...scrubTiff(data, start, data.length, mode));
      } catch (err) {
        // an EXIF no reader can read: dropped, the image looks the same without it
        if (!(err instanceof ScrubError)) throw err;
        removed.push('exif_unreadable');
        continue;
      }
    } else if (fourcc === 'XMP ') {
      if (mode === 'all') {
        removed.push('xmp');
        continue;
      }
      if (blankXmp(data, 0, data.length, budget)) removed.push('xmp_location');
    }
    kept.push([fourcc, data]);
  }
  const header = kept.find(([fourcc]) => fourcc === 'VP8X');
  if (header) {
    const has = (/** @type {string} */ name) => kept.some(([fourcc]) => fourcc === name);
    header[1][0] =
      (header[1][0] & ~(EXIF_FLAG | XMP_FLAG)) | (has('EXIF') ? EXIF_FLAG : 0) | (has('XMP ') ? XMP_FLAG : 0);
  } else if (kept.some(([fourcc]) => fourcc === 'EXIF' || fourcc === 'XMP ')) {
    throw new ScrubError('metadata in a simple WebP without an extended header');
  }
  const body = Buffer.concat([Buffer.from('WEBP', 'latin1'), ...kept.map(([fourcc, data]) => chunk(fourcc, data))]);
  const riff = Buffer.alloc(8);
  riff.write('RIFF', 0, 'latin1');
  riff.writeUInt32LE(body.length, 4);
  return { data: Buffer.concat([riff, body]), removed };
}

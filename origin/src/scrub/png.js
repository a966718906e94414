// A PNG's chunks: the pixels (IHDR, PLTE, IDAT, …) and the colour profile (iCCP, sRGB, gAMA, cHRM) copied as
// they are; EXIF (eXIf) edited in place and its CRC computed again; text chunks: the XMP packet (iTXt
// "XML:com.adobe.xmp", uncompressed) blanked in place under `location`, EXIF or IPTC carried as text
// ("Raw profile type …") dropped; `all` keeps no text and an EXIF of the orientation alone.
import zlib from 'node:zlib';
import { minimalExif } from './exif.js';
import { ScrubError, orientationOf, scrubTiff } from './tiff.js';
import { xmpBudget, blankXmp } from './xmp.js';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const TEXT = new Set(['tEXt', 'zTXt', 'iTXt']);

/** A PNG chunk: its length, type, data and CRC. @param {string} type @param {Buffer} data */
export function chunk(type, data) {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(data, zlib.crc32(Buffer.from(type, 'latin1'))) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/** @param {Buffer} input @param {'location' | 'all'} mode @returns {{ data: Buffer, removed: string[] }} */
export function scrubPng(input, mode) {
  if (input.length < 8 || !input.subarray(0, 8).equals(SIGNATURE)) throw new ScrubError('not a PNG');
  const parts = [SIGNATURE];
  const removed = [];
  const budget = xmpBudget();
  let at = 8;
  let orientation = 1;
  let ended = false;
  while (!ended) {
    if (at + 12 > input.length) throw new ScrubError('a PNG chunk that is cut');
    const length = input.readUInt32BE(at);
    const type = input.toString('latin1', at + 4, at + 8);
    if (at + 12 + length > input.length) throw new ScrubError('a PNG chunk longer than the file');
    const data = Buffer.from(input.subarray(at + 8, at + 8 + length));
    const whole = Buffer.from(input.subarray(at, at + 12 + length));
    at += 12 + length;
    ended = type === 'IEND';
    if (type === 'eXIf') {
      orientation = orientationOf(data, 0, data.length);
      if (mode === 'all') {
        removed.push('exif');
        if (orientation !== 1) parts.push(chunk('eXIf', minimalExif(orientation)));
        continue;
      }
      try {
        removed.push(...scrubTiff(data, 0, data.length, mode));
        parts.push(chunk('eXIf', data));
      } catch (err) {
        // an EXIF no reader can read: dropped, the image looks the same without it
        if (!(err instanceof ScrubError)) throw err;
        removed.push('exif_unreadable');
      }
      continue;
    }
    if (TEXT.has(type)) {
      const keyword = data.toString('latin1', 0, Math.max(0, data.indexOf(0)));
      if (mode === 'all' || keyword.startsWith('Raw profile type')) {
        removed.push(keyword.startsWith('Raw profile type') ? keyword.slice(17) : 'text');
        continue;
      }
      if (type === 'iTXt' && keyword === 'XML:com.adobe.xmp') {
        const compressed = data[keyword.length + 1];
        if (compressed) {
          removed.push('xmp');
          continue;
        }
        if (blankXmp(data, keyword.length + 1, data.length, budget)) {
          removed.push('xmp_location');
          parts.push(chunk(type, data));
          continue;
        }
      }
    }
    parts.push(whole);
  }
  // anything after IEND is not part of the image
  return { data: Buffer.concat(parts), removed };
}

// A JPEG's metadata segments rewritten; everything from the first scan on (the compressed pixels) is copied
// byte for byte. Kept always: JFIF (APP0), the ICC profile (APP2 ICC_PROFILE, in as many segments as it
// came), Adobe's colour transform (APP14), the orientation. `location` edits EXIF, XMP and IPTC in place and
// drops extended XMP (split packets, often depth maps and more); `all` keeps no other metadata at all.
import { ScrubError, orientationOf, scrubTiff } from './tiff.js';
import { xmpBudget, blankXmp } from './xmp.js';
import { minimalExif } from './exif.js';

const EXIF = Buffer.from('Exif\0\0', 'latin1');
const XMP = Buffer.from('http://ns.adobe.com/xap/1.0/\0', 'latin1');
const PHOTOSHOP = Buffer.from('Photoshop 3.0\0', 'latin1');
const ICC = Buffer.from('ICC_PROFILE\0', 'latin1');
// IPTC datasets of record 2 that say where: content location code and name, city, sub-location,
// province or state, country code and name
const IPTC_LOCATION = new Set([26, 27, 90, 92, 95, 100, 101]);

/** @param {Buffer} body @param {Buffer} prefix */
const startsWith = (body, prefix) => body.length >= prefix.length && body.subarray(0, prefix.length).equals(prefix);

/**
 * @param {Buffer} input @param {'location' | 'all'} mode
 * @returns {{ data: Buffer, removed: string[] }}
 */
export function scrubJpeg(input, mode) {
  if (input.length < 4 || input[0] !== 0xff || input[1] !== 0xd8) throw new ScrubError('not a JPEG');
  const parts = [input.subarray(0, 2)];
  const removed = [];
  const budget = xmpBudget();
  let orientation = 1;
  let at = 2;
  for (;;) {
    if (at + 4 > input.length || input[at] !== 0xff) throw new ScrubError('a JPEG segment that is cut or misplaced');
    const marker = input[at + 1];
    if (marker === 0xff) {
      // fill byte
      at += 1;
      continue;
    }
    if (marker === 0xda || marker === 0xd9) {
      // the first scan (or the end): the rest as it is
      parts.push(input.subarray(at));
      break;
    }
    const length = input.readUInt16BE(at + 2);
    if (length < 2 || at + 2 + length > input.length) throw new ScrubError('a JPEG segment longer than the file');
    const segment = Buffer.from(input.subarray(at, at + 2 + length));
    const body = segment.subarray(4);
    at += 2 + length;
    const kept = scrubSegment(marker, segment, body, mode, removed, budget);
    if (marker === 0xe1 && startsWith(body, EXIF)) orientation = orientationOf(body, EXIF.length, body.length);
    if (kept) parts.push(kept);
  }
  if (mode === 'all' && orientation !== 1) parts.splice(1, 0, app1Exif(minimalExif(orientation)));
  return { data: Buffer.concat(parts), removed };
}

/**
 * One segment as it stays (maybe edited in place), or null when it goes.
 * @param {number} marker @param {Buffer} segment @param {Buffer} body @param {'location' | 'all'} mode @param {string[]} removed
 * @param {{ left: number }} budget the file's XMP scan budget
 */
function scrubSegment(marker, segment, body, mode, removed, budget) {
  const isApp = marker >= 0xe0 && marker <= 0xef;
  if (marker === 0xe0 || marker === 0xee || (marker === 0xe2 && startsWith(body, ICC))) return segment;
  if (marker === 0xe1 && startsWith(body, EXIF)) {
    if (mode === 'all') {
      removed.push('exif');
      return null;
    }
    return scrubbedOrDropped(
      () => removed.push(...scrubTiff(body, EXIF.length, body.length, mode)),
      segment,
      'exif',
      removed,
    );
  }
  if (marker === 0xe1 && startsWith(body, XMP)) {
    if (mode === 'all') {
      removed.push('xmp');
      return null;
    }
    if (blankXmp(body, XMP.length, body.length, budget)) removed.push('xmp_location');
    return segment;
  }
  if (marker === 0xe1) {
    // extended XMP and anything else in APP1
    removed.push('app1');
    return null;
  }
  if (marker === 0xed && startsWith(body, PHOTOSHOP)) {
    if (mode === 'all') {
      removed.push('iptc');
      return null;
    }
    const result = { edited: /** @type {Buffer | null} */ (null) };
    if (
      !scrubbedOrDropped(
        () => {
          result.edited = withoutIptcLocation(body, PHOTOSHOP.length);
        },
        segment,
        'iptc',
        removed,
      )
    )
      return null;
    const { edited } = result;
    if (!edited) return segment;
    if (edited.length + 2 > 0xffff) throw new ScrubError('an APP13 segment past its size');
    removed.push('iptc_location');
    const header = Buffer.from([0xff, 0xed, 0, 0]);
    header.writeUInt16BE(edited.length + 2, 2);
    return Buffer.concat([header, edited]);
  }
  if (mode === 'all' && (isApp || marker === 0xfe)) {
    removed.push(marker === 0xfe ? 'comment' : `app${marker - 0xe0}`);
    return null;
  }
  return segment;
}

/**
 * `edit`, or, when the metadata it edits cannot be read (offsets past its end, a cut dataset), the segment
 * dropped: a browser cannot read it either, so the image looks the same without it.
 * @param {() => void} edit @param {Buffer} segment @param {string} what @param {string[]} removed
 */
function scrubbedOrDropped(edit, segment, what, removed) {
  try {
    edit();
    return segment;
  } catch (err) {
    if (!(err instanceof ScrubError)) throw err;
    removed.push(`${what}_unreadable`);
    return null;
  }
}

/** An APP1 EXIF segment around a TIFF payload. @param {Buffer} tiff */
function app1Exif(tiff) {
  const header = Buffer.from([0xff, 0xe1, 0, 0]);
  header.writeUInt16BE(2 + EXIF.length + tiff.length, 2);
  return Buffer.concat([header, EXIF, tiff]);
}

/**
 * Photoshop's image resources (8BIM blocks) with the location datasets taken out of the IPTC one (0x0404),
 * or null when there were none. @param {Buffer} body @param {number} start
 */
function withoutIptcLocation(body, start) {
  const parts = [body.subarray(0, start)];
  let changed = false;
  let at = start;
  while (at + 12 <= body.length && body.toString('latin1', at, at + 4) === '8BIM') {
    const id = body.readUInt16BE(at + 4);
    const nameSize = (body[at + 6] + 2) & ~1; // the length byte and the name, padded to even
    const sizeAt = at + 6 + nameSize;
    if (sizeAt + 4 > body.length) throw new ScrubError('a Photoshop resource that is cut');
    const size = body.readUInt32BE(sizeAt);
    const data = sizeAt + 4;
    if (data + size > body.length) throw new ScrubError('a Photoshop resource longer than its segment');
    const kept = id === 0x0404 ? keptDatasets(body, data, data + size) : null;
    if (kept) {
      changed = true;
      const head = Buffer.from(body.subarray(at, data));
      head.writeUInt32BE(kept.length, sizeAt - at);
      parts.push(head, kept, kept.length & 1 ? Buffer.alloc(1) : Buffer.alloc(0));
    } else {
      parts.push(body.subarray(at, Math.min(body.length, data + size + (size & 1))));
    }
    at = data + size + (size & 1);
  }
  parts.push(body.subarray(Math.min(at, body.length)));
  return changed ? Buffer.concat(parts) : null;
}

/** The IPTC datasets but the location ones, or null when there were none. @param {Buffer} body @param {number} from @param {number} to */
function keptDatasets(body, from, to) {
  const kept = [];
  let dropped = false;
  let at = from;
  while (at + 5 <= to && body[at] === 0x1c) {
    const size = body.readUInt16BE(at + 3);
    if (size & 0x8000) throw new ScrubError('an IPTC dataset of extended length');
    if (at + 5 + size > to) throw new ScrubError('an IPTC dataset that is cut');
    if (body[at + 1] === 2 && IPTC_LOCATION.has(body[at + 2])) dropped = true;
    else kept.push(body.subarray(at, at + 5 + size));
    at += 5 + size;
  }
  if (!dropped) return null;
  kept.push(body.subarray(at, to));
  return Buffer.concat(kept);
}

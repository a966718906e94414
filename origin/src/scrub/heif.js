// A HEIF's (HEIC, AVIF) metadata items edited in place: the Exif item's TIFF by the same rules as elsewhere,
// the XMP item blanked (`location`) or emptied (`all`), each at its size, so that no offset of the file (iloc's
// extents, mdat's contents) moves. Items stored otherwise than as one extent of the file itself are a
// ScrubError.
import { ScrubError, scrubTiff } from './tiff.js';
import { blankXmp, emptyXmp, xmpBudget } from './xmp.js';

/**
 * The boxes in input[from, to). @param {Buffer} input @param {number} from @param {number} to
 * @returns {Array<{ type: string, start: number, body: number, end: number }>}
 */
function boxes(input, from, to) {
  const found = [];
  let at = from;
  while (at + 8 <= to) {
    let size = input.readUInt32BE(at);
    const type = input.toString('latin1', at + 4, at + 8);
    let body = at + 8;
    if (size === 1) {
      if (at + 16 > to) throw new ScrubError('a box that is cut');
      size = Number(input.readBigUInt64BE(at + 8));
      body = at + 16;
    } else if (size === 0) {
      size = to - at;
    }
    if (size < body - at || at + size > to) throw new ScrubError('a box longer than its parent');
    found.push({ type, start: at, body, end: at + size });
    at += size;
  }
  return found;
}

/** @param {Buffer} input @param {number} at @param {number} size bytes (0, 4 or 8) */
function uint(input, at, size) {
  if (size === 0) return 0;
  if (at + size > input.length) throw new ScrubError('an iloc entry that is cut');
  return size === 4
    ? input.readUInt32BE(at)
    : size === 8
      ? Number(input.readBigUInt64BE(at))
      : size === 2
        ? input.readUInt16BE(at)
        : (() => {
            throw new ScrubError('an iloc field size');
          })();
}

/** item id → { type, content } from iinf. @param {Buffer} input @param {{ body: number, end: number }} iinf */
function itemInfos(input, iinf) {
  const version = input[iinf.body];
  const first = iinf.body + 4 + (version === 0 ? 2 : 4);
  /** @type {Map<number, { type: string, content: string }>} */
  const items = new Map();
  for (const infe of boxes(input, first, iinf.end).filter((box) => box.type === 'infe')) {
    const infeVersion = input[infe.body];
    if (infeVersion < 2) continue;
    let at = infe.body + 4;
    const id = infeVersion === 2 ? input.readUInt16BE(at) : input.readUInt32BE(at);
    at += (infeVersion === 2 ? 2 : 4) + 2;
    const type = input.toString('latin1', at, at + 4);
    at += 4;
    const nameEnd = input.indexOf(0, at);
    const content =
      type === 'mime' && nameEnd >= 0
        ? input.toString('latin1', nameEnd + 1, Math.max(nameEnd + 1, input.indexOf(0, nameEnd + 1)))
        : '';
    items.set(id, { type, content });
  }
  return items;
}

/** item id → [offset, length] in the file, from iloc (one extent, construction method 0). @param {Buffer} input @param {{ body: number }} iloc */
function itemLocations(input, iloc) {
  const version = input[iloc.body];
  let at = iloc.body + 4;
  const offsetSize = input[at] >> 4;
  const lengthSize = input[at] & 15;
  const baseSize = input[at + 1] >> 4;
  const indexSize = version === 1 || version === 2 ? input[at + 1] & 15 : 0;
  at += 2;
  const count = version < 2 ? input.readUInt16BE(at) : input.readUInt32BE(at);
  at += version < 2 ? 2 : 4;
  /** @type {Map<number, [number, number] | null>} */
  const places = new Map();
  for (let i = 0; i < count; i += 1) {
    const id = version < 2 ? input.readUInt16BE(at) : input.readUInt32BE(at);
    at += version < 2 ? 2 : 4;
    let method = 0;
    if (version === 1 || version === 2) {
      method = input.readUInt16BE(at) & 15;
      at += 2;
    }
    at += 2; // data reference index
    const base = uint(input, at, baseSize);
    at += baseSize;
    const extents = input.readUInt16BE(at);
    at += 2;
    /** @type {Array<[number, number]>} */
    const list = [];
    for (let e = 0; e < extents; e += 1) {
      at += indexSize;
      const offset = uint(input, at, offsetSize);
      at += offsetSize;
      const length = uint(input, at, lengthSize);
      at += lengthSize;
      list.push([base + offset, length]);
    }
    places.set(id, method === 0 && list.length === 1 ? list[0] : null);
  }
  return places;
}

/** @param {Buffer} input @param {'location' | 'all'} mode @returns {{ data: Buffer, removed: string[] }} */
export function scrubHeif(input, mode) {
  const data = Buffer.from(input);
  const meta = boxes(data, 0, data.length).find((box) => box.type === 'meta');
  if (!meta) throw new ScrubError('a HEIF without a meta box');
  const children = boxes(data, meta.body + 4, meta.end);
  const iinf = children.find((box) => box.type === 'iinf');
  const iloc = children.find((box) => box.type === 'iloc');
  if (!iinf || !iloc) return { data, removed: [] };
  const infos = itemInfos(data, iinf);
  const places = itemLocations(data, iloc);
  const removed = [];
  const budget = xmpBudget();
  for (const [id, { type, content }] of infos) {
    const isExif = type === 'Exif';
    const isXmp = type === 'mime' && /rdf\+xml|xmp/i.test(content);
    if (!isExif && !isXmp) continue;
    const place = places.get(id);
    if (!place) throw new ScrubError('a metadata item not stored as one extent of the file');
    const [offset, length] = place;
    if (offset + length > data.length) throw new ScrubError('a metadata item outside the file');
    if (isExif) {
      if (length < 4) throw new ScrubError('an Exif item that is cut');
      const tiff = offset + 4 + data.readUInt32BE(offset);
      try {
        removed.push(...scrubTiff(data, tiff, offset + length, mode));
      } catch (err) {
        // an EXIF no reader can read: zeroed where it lies (the item keeps its size)
        if (!(err instanceof ScrubError)) throw err;
        data.fill(0, offset + 4, offset + length);
        removed.push('exif_unreadable');
      }
    } else if (mode === 'all') {
      const empty = emptyXmp(length);
      if (empty) empty.copy(data, offset);
      else data.fill(0x20, offset, offset + length);
      removed.push('xmp');
    } else if (blankXmp(data, offset, offset + length, budget)) {
      removed.push('xmp_location');
    }
  }
  return { data, removed };
}

// EXIF (a TIFF structure) edited in place. An entry is unlinked from its IFD (the entries after it move up,
// the count drops by one) and the bytes only it pointed to are zeroed; no offset anywhere else changes, so the
// container around (a JPEG segment, a PNG or WebP chunk, a HEIF item) stays valid at the same size. Every
// offset is checked against the payload's bounds; anything that does not add up is a ScrubError, never a
// read or a write outside the payload.

/** Bytes per value of each TIFF type (BYTE, ASCII, SHORT, LONG, RATIONAL, SBYTE, UNDEFINED, SSHORT, …). */
const TYPE_SIZES = /** @type {Record<number, number>} */ ({
  1: 1,
  2: 1,
  3: 2,
  4: 4,
  5: 8,
  6: 1,
  7: 1,
  8: 2,
  9: 4,
  10: 8,
  11: 4,
  12: 8,
  13: 4,
});
/** Entries that point to an IFD of their own. */
const SUB_IFDS = /** @type {Record<number, 'exif' | 'gps' | 'interop'>} */ ({
  0x8769: 'exif',
  0x8825: 'gps',
  0xa005: 'interop',
});
const MAX_ENTRIES = 1000;

/** A file whose metadata cannot be edited safely: the caller stores a clean re-encode instead. */
export class ScrubError extends Error {}

/**
 * What is removed (`location`): where the photograph was taken, and what identifies the person or their
 * device: GPS, the owner's name, serial numbers, the maker note (where phones and cameras keep more of both).
 * (`all`): everything but the orientation. Tag ids by IFD.
 * @type {Record<'location' | 'all', (ifd: string, tag: number) => boolean>}
 */
export const POLICIES = {
  location: (ifd, tag) =>
    (ifd === 'ifd0' && (tag === 0x8825 || tag === 0xc62f)) ||
    (ifd === 'exif' && [0xa430, 0xa431, 0xa435, 0x927c].includes(tag)),
  all: (ifd, tag) => !(ifd === 'ifd0' && tag === 0x0112),
};

/** Names for the log and the metric. @type {Record<number, string>} */
const NAMES = {
  0x8825: 'gps',
  0xc62f: 'camera_serial',
  0xa430: 'owner_name',
  0xa431: 'body_serial',
  0xa435: 'lens_serial',
  0x927c: 'maker_note',
};

/**
 * @typedef {{ at: number, tag: number, type: number, count: number, size: number, data: number }} Entry
 *   data: where the value is (inline in the entry when size <= 4)
 * @typedef {{ at: number, kind: string, entries: Entry[], next: number }} Ifd
 */

/**
 * Scrubs the TIFF structure in buf[start, end) in place by `policy`. Returns the names of what was removed
 * (empty: nothing there to remove).
 * @param {Buffer} buf @param {number} start @param {number} end @param {'location' | 'all'} mode
 * @returns {string[]}
 */
export function scrubTiff(buf, start, end, mode) {
  const policy = POLICIES[mode];
  const io = access(buf, start, end);
  const ifd0 = io.u32(4);
  /** @type {Ifd[]} */
  const ifds = [];
  const seen = new Set();
  const walk = (/** @type {number} */ offset, /** @type {string} */ kind) => {
    if (seen.has(offset)) throw new ScrubError('an IFD is reached twice');
    seen.add(offset);
    const ifd = readIfd(io, offset, kind);
    ifds.push(ifd);
    for (const entry of ifd.entries)
      if (SUB_IFDS[entry.tag] && entry.size === 4) walk(io.u32(entry.data), SUB_IFDS[entry.tag]);
    return ifd;
  };
  const first = walk(ifd0, 'ifd0');
  const thumbnail = first.next ? walk(first.next, 'ifd1') : null;
  /** @type {Array<[number, number]>} byte ranges to zero, relative to start */
  const zap = [];
  /** @type {Array<[number, number]>} byte ranges still in use */
  const keep = [[0, 8]];
  const removed = [];
  const dropped = new Set();
  // everything but the orientation: the thumbnail (IFD1) goes too
  if (thumbnail && mode === 'all') {
    first.next = 0;
    dropped.add(thumbnail.at);
    zapIfd(io, thumbnail, zap);
    removed.push('thumbnail');
  }
  for (const ifd of ifds) {
    if (dropped.has(ifd.at)) continue;
    const gone = ifd.kind === 'ifd1' ? [] : ifd.entries.filter((entry) => policy(ifd.kind, entry.tag));
    if (!gone.length) {
      if (ifd === first) io.w32(first.at + 2 + first.entries.length * 12, first.next);
      keep.push([ifd.at, ifd.at + 6 + ifd.entries.length * 12]);
      for (const entry of ifd.entries) if (entry.size > 4) keep.push([entry.data, entry.data + entry.size]);
      continue;
    }
    for (const entry of gone) {
      removed.push(NAMES[entry.tag] || `tag_${entry.tag.toString(16)}`);
      if (entry.size > 4) zap.push([entry.data, entry.data + entry.size]);
      const sub =
        SUB_IFDS[entry.tag] &&
        ifds.find((candidate) => candidate.at === io.u32(entry.data) && candidate.kind === SUB_IFDS[entry.tag]);
      if (sub) {
        dropSubtree(io, sub, ifds, zap, dropped);
      }
    }
    const kept = ifd.entries.filter((entry) => !gone.includes(entry));
    rewriteIfd(io, ifd, kept);
    keep.push([ifd.at, ifd.at + 6 + kept.length * 12]);
    for (const entry of kept) if (entry.size > 4) keep.push([entry.data, entry.data + entry.size]);
    zap.push([ifd.at + 6 + kept.length * 12, ifd.at + 6 + ifd.entries.length * 12]);
  }
  keep.sort((x, y) => x[0] - y[0]);
  for (const [from, to] of zap) zeroOutside(io, from, to, keep);
  return removed;
}

/** An IFD and every IFD below it: their entries and data go. @param {ReturnType<typeof access>} io @param {Ifd} ifd @param {Ifd[]} ifds @param {Array<[number, number]>} zap @param {Set<number>} dropped */
function dropSubtree(io, ifd, ifds, zap, dropped) {
  dropped.add(ifd.at);
  zapIfd(io, ifd, zap);
  for (const entry of ifd.entries) {
    const sub =
      SUB_IFDS[entry.tag] &&
      ifds.find((candidate) => candidate.at === io.u32(entry.data) && candidate.kind === SUB_IFDS[entry.tag]);
    if (sub && !dropped.has(sub.at)) dropSubtree(io, sub, ifds, zap, dropped);
  }
}

/** @param {ReturnType<typeof access>} io @param {Ifd} ifd @param {Array<[number, number]>} zap */
function zapIfd(io, ifd, zap) {
  zap.push([ifd.at, ifd.at + 6 + ifd.entries.length * 12]);
  for (const entry of ifd.entries) if (entry.size > 4) zap.push([entry.data, entry.data + entry.size]);
  // a thumbnail's JPEG (JPEGInterchangeFormat, JPEGInterchangeFormatLength)
  const offset = ifd.entries.find((entry) => entry.tag === 0x0201);
  const length = ifd.entries.find((entry) => entry.tag === 0x0202);
  if (offset && length && offset.size === 4 && length.size === 4) {
    const from = io.u32(offset.data);
    const to = from + io.u32(length.data);
    if (to <= io.length && from <= to) zap.push([from, to]);
  }
}

/** The IFD's kept entries written in place; its next-IFD pointer follows them. @param {ReturnType<typeof access>} io @param {Ifd} ifd @param {Entry[]} kept */
function rewriteIfd(io, ifd, kept) {
  const copies = kept.map((entry) => io.slice(entry.at, entry.at + 12));
  io.w16(ifd.at, kept.length);
  copies.forEach((bytes, i) => io.write(bytes, ifd.at + 2 + i * 12));
  io.w32(ifd.at + 2 + kept.length * 12, ifd.next);
}

/**
 * Zeroes [from, to) but for what `keep` still uses (sorted once: linear in the ranges, whatever a hostile
 * file makes them). @param {ReturnType<typeof access>} io @param {number} from @param {number} to
 * @param {Array<[number, number]>} keep
 */
function zeroOutside(io, from, to, keep) {
  let at = Math.max(0, from);
  const end = Math.min(to, io.length);
  for (const [a, b] of keep) {
    if (b <= at || a >= end) continue;
    if (a > at) io.fill(at, a);
    at = Math.max(at, b);
  }
  if (at < end) io.fill(at, end);
}

/** @param {ReturnType<typeof access>} io @param {number} offset @param {string} kind @returns {Ifd} */
function readIfd(io, offset, kind) {
  const count = io.u16(offset);
  if (count > MAX_ENTRIES) throw new ScrubError(`an IFD of ${count} entries`);
  /** @type {Entry[]} */
  const entries = [];
  for (let i = 0; i < count; i += 1) {
    const at = offset + 2 + i * 12;
    const type = io.u16(at + 2);
    const values = io.u32(at + 4);
    const size = (TYPE_SIZES[type] || 0) * values;
    const data = size > 4 ? io.u32(at + 8) : at + 8;
    if (size > 4 && (data + size > io.length || data < 8)) throw new ScrubError('an entry points outside the EXIF');
    entries.push({ at, tag: io.u16(at), type, count: values, size: TYPE_SIZES[type] ? size : 4, data });
  }
  const next = kind === 'ifd0' || kind === 'ifd1' ? io.u32(offset + 2 + count * 12) : 0;
  return { at: offset, kind, entries, next };
}

/**
 * Reads and writes of buf[start, end) at offsets relative to start, in the TIFF's byte order, each checked.
 * @param {Buffer} buf @param {number} start @param {number} end
 */
function access(buf, start, end) {
  if (end - start < 8) throw new ScrubError('a TIFF header that is cut');
  const order = buf.toString('latin1', start, start + 2);
  if (order !== 'II' && order !== 'MM') throw new ScrubError('not a TIFF header');
  const little = order === 'II';
  const length = end - start;
  const check = (/** @type {number} */ at, /** @type {number} */ size) => {
    if (!Number.isInteger(at) || at < 0 || at + size > length) throw new ScrubError('an offset outside the EXIF');
    return start + at;
  };
  const io = {
    length,
    u16: (/** @type {number} */ at) => (little ? buf.readUInt16LE(check(at, 2)) : buf.readUInt16BE(check(at, 2))),
    u32: (/** @type {number} */ at) => (little ? buf.readUInt32LE(check(at, 4)) : buf.readUInt32BE(check(at, 4))),
    fill: (/** @type {number} */ from, /** @type {number} */ to) => {
      buf.fill(0, check(from, to - from), start + to);
    },
    w16: (/** @type {number} */ at, /** @type {number} */ value) =>
      little ? buf.writeUInt16LE(value, check(at, 2)) : buf.writeUInt16BE(value, check(at, 2)),
    w32: (/** @type {number} */ at, /** @type {number} */ value) =>
      little ? buf.writeUInt32LE(value, check(at, 4)) : buf.writeUInt32BE(value, check(at, 4)),
    slice: (/** @type {number} */ from, /** @type {number} */ to) =>
      Buffer.from(buf.subarray(check(from, to - from), start + to)),
    write: (/** @type {Buffer} */ bytes, /** @type {number} */ at) => {
      bytes.copy(buf, check(at, bytes.length));
    },
  };
  if (io.u16(2) !== 42) throw new ScrubError('not a TIFF header');
  return io;
}

/** The orientation an EXIF payload gives (1 when none or unreadable). @param {Buffer} buf @param {number} start @param {number} end */
export function orientationOf(buf, start, end) {
  try {
    const io = access(buf, start, end);
    const ifd = readIfd(io, io.u32(4), 'ifd0');
    const entry = ifd.entries.find((candidate) => candidate.tag === 0x0112);
    return entry ? io.u16(entry.data) : 1;
  } catch {
    return 1;
  }
}

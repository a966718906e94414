import fs from 'node:fs';
import path from 'node:path';
import { setImmediate as yieldToEvents } from 'node:timers/promises';
import { promisify } from 'node:util';
import { crc32 } from 'node:zlib';
import { GoneError } from '@stack/lib';
import { DirLock } from './dir-lock.js';
import { FORGOTTEN, PackIndex } from './pack-index.js';

// A record: magic, key (32 bytes), extension (4 bytes, zero-padded), data length, CRC-32 of the data; then the data.
const MAGIC = 0x56504b31; // "VPK1"
const HEADER = 48;
// A segment's index file, written once the segment is full and synced: magic, the segment's size it
// describes, the entry count, CRC-32 of the entries; then per record its key's first 16 bytes, data offset,
// data length and extension (28 bytes).
const INDEX_MAGIC = 0x56505831; // "VPX1"
const INDEX_HEADER = 16;
const INDEX_ENTRY = 28;
const SEGMENT = /^(\d{8})\.pack$/;
const SEGMENT_INDEX = /^(\d{8})\.idx$/;
const KEY = /^[0-9a-f]{64}$/;
const MAX_SEGMENT = 64 * 1024 * 1024;
const MIN_SEGMENT = 256 * 1024;
// the start-up scan reads this much at a time, and lets requests in between
const WINDOW = 1024 * 1024;
const fsync = promisify(fs.fsync);
const ftruncate = promisify(fs.ftruncate);

/** Reads into `buffer` from `position`; resolves with the count read. @param {number} fd @param {Buffer} buffer @param {number} length @param {number} position @returns {Promise<number>} */
function read(fd, buffer, length, position) {
  return new Promise((resolve, reject) => {
    fs.read(fd, buffer, 0, length, position, (err, count) => (err ? reject(err) : resolve(count)));
  });
}

/**
 * A record's header. @param {string} key a SHA-256 in hex @param {string} ext at most 4 characters @param {Buffer} data
 */
export function recordHeader(key, ext, data) {
  const header = Buffer.alloc(HEADER);
  header.writeUInt32BE(MAGIC, 0);
  header.write(key, 4, 32, 'hex');
  header.write(ext, 36, 4, 'latin1');
  header.writeUInt32BE(data.length, 40);
  header.writeUInt32BE(crc32(data), 44);
  return header;
}

/**
 * @typedef {{ seq: number, file: string, fd: number, size: number, readers: number, gone: boolean, records: RecordList | null }} Segment
 * @typedef {{ key: string, segment: Segment, offset: number, size: number, ext: string }} PackEntry
 */

/** A segment's records as its index file lists them, growing as records are appended. */
class RecordList {
  constructor() {
    this.bytes = Buffer.allocUnsafe(INDEX_ENTRY * 256);
    this.count = 0;
  }

  /** @param {Buffer} record holds a record's header from `at` @param {number} at @param {number} offset its data's @param {number} size */
  add(record, at, offset, size) {
    if ((this.count + 1) * INDEX_ENTRY > this.bytes.length) {
      const bigger = Buffer.allocUnsafe(this.bytes.length * 2);
      this.bytes.copy(bigger);
      this.bytes = bigger;
    }
    const to = this.count * INDEX_ENTRY;
    record.copy(this.bytes, to, at + 4, at + 20); // the key's first half
    this.bytes.writeUInt32BE(offset, to + 16);
    this.bytes.writeUInt32BE(size, to + 20);
    record.copy(this.bytes, to + 24, at + 36, at + 40); // the extension
    this.count += 1;
  }

  /** The index file's bytes for a segment of `size` bytes. @param {number} size */
  file(size) {
    const entries = this.bytes.subarray(0, this.count * INDEX_ENTRY);
    const header = Buffer.alloc(INDEX_HEADER);
    header.writeUInt32BE(INDEX_MAGIC, 0);
    header.writeUInt32BE(size, 4);
    header.writeUInt32BE(this.count, 8);
    header.writeUInt32BE(crc32(entries), 12);
    return Buffer.concat([header, entries]);
  }
}

/**
 * The result cache: variants appended to segment files (`<n>.pack`), an index in memory rebuilt from them on
 * start, the oldest segment deleted past the byte bound. One write per variant into a file already open, and
 * no file, inode or rename per variant: on ext4 a file per variant cost its creation and, once evictions free
 * inodes, a pass over the recently freed ones at every new file; here it is a copy into the page cache.
 * Least recently used goes first: a hit on a variant in the older half of the cache appends it again at the
 * end (it was just read, so that is one more write), and deleting the oldest segment drops only what nobody
 * asked for since it was written there.
 * The index is compact (see pack-index.js) and rebuilt in the background on start: init() opens a new
 * segment for the appends and returns at once, then `built` settles once every older segment is indexed,
 * newest first, from its `<n>.idx` file (written when it was full and synced) or by reading it a window at a
 * time. Meanwhile a variant not yet indexed is a miss, made again; the newest record of a key always wins,
 * and a key forgotten meanwhile (a takedown) is not brought back by an older record.
 * Crash safety: a record lands in one write; on start a record that runs past its file's end or (in the two
 * newest segments without an index file, the only ones maybe not synced) fails its CRC ends that segment,
 * which is cut there. A segment is synced when the next one starts. One process per directory (dir-lock.js:
 * another container sharing the volume included); one that finds its lock taken over stops using it.
 */
export class PackCache {
  /**
   * @param {string} dir @param {number} maxBytes
   * @param {{ segmentBytes?: number, warn?: (details: object, message: string) => void }} [options]
   */
  constructor(dir, maxBytes, { segmentBytes, warn = () => {} } = {}) {
    this.dir = path.resolve(dir);
    this.lockFile = path.join(this.dir, 'lock');
    this.dirLock = new DirLock(this.lockFile, { onLost: (holder) => this.abandon(holder) });
    this.maxBytes = maxBytes;
    // a 32nd of the bound: eviction frees that much at a time
    this.segmentBytes = segmentBytes || Math.min(MAX_SEGMENT, Math.max(MIN_SEGMENT, Math.floor(maxBytes / 32)));
    this.warn = warn;
    this.totalBytes = 0;
    /** oldest first; the last one takes the appends @type {Segment[]} */
    this.segments = [];
    /** @type {Map<number, Segment>} */
    this.bySeq = new Map();
    this.index = new PackIndex((seq) => this.bySeq.has(seq));
    /** extension codes of the index (its entries hold a byte, not a string) @type {string[]} */
    this.extNames = [];
    /** @type {Map<number, number>} the code of each extension's 4 bytes read as a number */
    this.extCodes = new Map();
    this.building = false;
    /** settles when the start-up index build is over (it never rejects) @type {Promise<void>} */
    this.built = Promise.resolve();
    /** index files being written @type {Set<Promise<void>>} */
    this.writing = new Set();
    this.closed = false;
  }

  /**
   * Takes the directory, opens its segments and a new one for the appends, clears what an older layout left
   * there, and starts indexing the segments in the background (see `built`).
   */
  init() {
    fs.mkdirSync(this.dir, { recursive: true });
    this.lock();
    const names = fs.readdirSync(this.dir);
    const seqs = names
      .map((name) => SEGMENT.exec(name))
      .filter((match) => match !== null)
      .map((match) => Number(match[1]))
      .sort((a, b) => a - b);
    for (const seq of seqs) this.add(this.segmentOf(seq, 'r+'));
    // variants kept one file each by earlier versions (shard directories, tmp/), index files of segments
    // gone: a cache, so dropped
    for (const name of names) {
      const indexOf = SEGMENT_INDEX.exec(name);
      if (
        SEGMENT.test(name) ||
        name === path.basename(this.lockFile) ||
        (indexOf && this.bySeq.has(Number(indexOf[1])))
      )
        continue;
      // (an index file at once: the new segment may take its number)
      if (indexOf) fs.rmSync(path.join(this.dir, name), { force: true });
      else fs.rm(path.join(this.dir, name), { recursive: true, force: true }, () => {});
    }
    const last = this.segments[this.segments.length - 1];
    this.open(last ? last.seq + 1 : 1);
    this.evict();
    this.building = true;
    this.index.shadowing = true;
    this.built = this.build(this.segments.slice(0, -1).reverse())
      .catch((err) => {
        this.warn({ err }, 'variant cache: the index was not rebuilt whole; what it lacks is made again');
      })
      .finally(() => {
        this.building = false;
        this.index.shadowing = false;
      });
  }

  /** Refuses a directory another live process holds (two appending to one segment would interleave records). */
  lock() {
    this.dirLock.take();
  }

  /**
   * Stops using the directory: another process took its lock over (its records may land where this one's
   * index points). Every variant is a miss from now on, and nothing more is appended.
   * @param {{ pid: number, host: string } | null} holder
   */
  abandon(holder) {
    if (this.closed) return;
    this.warn(
      { dir: this.dir, holder },
      'variant cache: another process took this directory over; this origin stops using it (a directory each)',
    );
    this.closed = true;
    this.index.clear();
  }

  /** A segment's file opened with `flags`, not yet indexed. @param {number} seq @param {string} flags @returns {Segment} */
  segmentOf(seq, flags) {
    const file = path.join(this.dir, `${String(seq).padStart(8, '0')}.pack`);
    const fd = fs.openSync(file, flags);
    return { seq, file, fd, size: fs.fstatSync(fd).size, readers: 0, gone: false, records: null };
  }

  /** Counts a segment in (its bytes toward the bound, its number as live). @param {Segment} segment */
  add(segment) {
    this.segments.push(segment);
    this.bySeq.set(segment.seq, segment);
    this.totalBytes += segment.size;
  }

  /**
   * Indexes the segments given (newest first), one at a time, in a table sized once for the whole cache (a
   * rehash of millions of entries stops the event loop for a while). @param {Segment[]} newestFirst
   */
  async build(newestFirst) {
    let scanned = 0;
    let sized = false;
    /** by the first segment indexed: its records per byte over every byte of the cache @param {number} count @param {Segment} segment */
    const size = (count, segment) => {
      if (sized || !count) return;
      sized = true;
      this.index.reserve(Math.ceil((count / Math.max(1, segment.size)) * this.totalBytes * 1.1));
    };
    for (const segment of newestFirst) {
      if (this.closed) return;
      if (segment.gone) continue;
      this.hold(segment);
      try {
        const listed = await this.readIndexFile(segment);
        if (listed) {
          size(listed.length / INDEX_ENTRY, segment);
          await this.indexListed(segment, listed);
        } else {
          size(await this.scan(segment, scanned++ < 2), segment);
        }
      } finally {
        this.release(segment);
      }
    }
  }

  /**
   * A segment's index file's entries, if it has a whole one for the segment's present size; else null.
   * @param {Segment} segment @returns {Promise<Buffer | null>}
   */
  async readIndexFile(segment) {
    let bytes;
    try {
      bytes = await fs.promises.readFile(this.indexFile(segment));
    } catch {
      return null;
    }
    const count = bytes.length >= INDEX_HEADER ? bytes.readUInt32BE(8) : -1;
    if (
      count < 0 ||
      bytes.readUInt32BE(0) !== INDEX_MAGIC ||
      bytes.readUInt32BE(4) !== segment.size ||
      bytes.length !== INDEX_HEADER + count * INDEX_ENTRY ||
      crc32(bytes.subarray(INDEX_HEADER)) !== bytes.readUInt32BE(12)
    ) {
      this.warn(
        { file: this.indexFile(segment) },
        'variant cache: an index file does not match its segment; the segment is read instead',
      );
      return null;
    }
    return bytes.subarray(INDEX_HEADER);
  }

  /** Indexes the entries of a segment's index file. @param {Segment} segment @param {Buffer} entries */
  async indexListed(segment, entries) {
    for (let at = 0, i = 1; at < entries.length; at += INDEX_ENTRY, i += 1) {
      if (this.closed || segment.gone) return;
      this.index.set(
        entries,
        at,
        segment.seq,
        entries.readUInt32BE(at + 16),
        entries.readUInt32BE(at + 20),
        this.extCode(entries, at + 24),
      );
      if (i % 4096 === 0) await yieldToEvents();
    }
  }

  /**
   * Indexes a segment by reading it a window at a time; cuts off a torn or corrupt tail, then writes its index
   * file. Returns how many records it holds. @param {Segment} segment @param {boolean} verify whether to check
   * each record's CRC (segments maybe not synced) @returns {Promise<number>}
   */
  async scan(segment, verify) {
    const records = new RecordList();
    const window = Buffer.allocUnsafe(WINDOW);
    let start = 0;
    let filled = 0;
    let position = 0;
    while (position + HEADER <= segment.size && !this.closed && !segment.gone) {
      if (position + HEADER > start + filled) {
        start = position;
        filled = await read(segment.fd, window, Math.min(WINDOW, segment.size - position), position);
        if (filled < HEADER) break;
      }
      const at = position - start;
      const size = window.readUInt32BE(at + 40);
      if (window.readUInt32BE(at) !== MAGIC || position + HEADER + size > segment.size) break;
      if (verify && !(await this.intact(segment, window, at, position, size, start + filled))) break;
      const offset = position + HEADER;
      this.index.set(window, at + 4, segment.seq, offset, size, this.extCode(window, at + 36));
      records.add(window, at, offset, size);
      position = offset + size;
      if (records.count % 4096 === 0) await yieldToEvents();
    }
    if (this.closed || segment.gone) return records.count;
    if (position < segment.size) {
      this.warn(
        { file: segment.file, kept: position, dropped: segment.size - position },
        'variant cache: a torn or corrupt tail was cut off',
      );
      await ftruncate(segment.fd, position);
      this.totalBytes -= segment.size - position;
      segment.size = position;
    }
    await this.writeIndexFile(segment, records);
    return records.count;
  }

  /**
   * Whether a record's data matches its CRC (read apart when it runs past the window).
   * @param {Segment} segment @param {Buffer} window @param {number} at the header's place in the window
   * @param {number} position the header's place in the file @param {number} size @param {number} windowEnd
   */
  async intact(segment, window, at, position, size, windowEnd) {
    const end = position + HEADER + size;
    let data = window.subarray(at + HEADER, at + HEADER + size);
    if (end > windowEnd) {
      data = Buffer.allocUnsafe(size);
      if ((await read(segment.fd, data, size, position + HEADER)) !== size) return false;
    }
    return crc32(data) === window.readUInt32BE(at + 44);
  }

  /** @param {Segment} segment */
  indexFile(segment) {
    return segment.file.replace(/\.pack$/, '.idx');
  }

  /**
   * Writes a full segment's index file, once the segment is synced (a torn index file fails its CRC and the
   * segment is read instead). @param {Segment} segment @param {RecordList} records
   */
  async writeIndexFile(segment, records) {
    try {
      await fsync(segment.fd);
      const file = this.indexFile(segment);
      await fs.promises.writeFile(`${file}.tmp`, records.file(segment.size));
      await fs.promises.rename(`${file}.tmp`, file);
      // deleted meanwhile: so is its index file
      if (segment.gone) await fs.promises.rm(file, { force: true });
    } catch (err) {
      this.warn(
        { err, file: segment.file },
        'variant cache: index file not written; the segment is read at the next start',
      );
    }
  }

  /**
   * The code of an extension (4 bytes, zero-padded) in the index. @param {Buffer} bytes @param {number} at
   */
  extCode(bytes, at) {
    const word = bytes.readUInt32BE(at);
    let code = this.extCodes.get(word);
    if (code === undefined) {
      if (this.extNames.length >= FORGOTTEN) throw new Error(`variant cache: more than ${FORGOTTEN} extensions`);
      code = this.extNames.push(bytes.toString('latin1', at, at + 4).replace(/\0+$/, '')) - 1;
      this.extCodes.set(word, code);
    }
    return code;
  }

  /** Starts a new segment for the appends. @param {number} seq @returns {Segment} */
  open(seq) {
    const segment = this.segmentOf(seq, 'wx+');
    segment.records = new RecordList();
    this.add(segment);
    return segment;
  }

  /** The segment taking appends, a new one when `bytes` would not fit (a lone record may overflow one). @param {number} bytes */
  activeFor(bytes) {
    const active = this.segments[this.segments.length - 1];
    if (active.size === 0 || active.size + bytes <= this.segmentBytes) return active;
    this.seal(active);
    return this.open(active.seq + 1);
  }

  /**
   * A full segment goes to disk in the background (from now on only its tail can be lost to a power cut),
   * then its index file is written. @param {Segment} segment
   */
  seal(segment) {
    const records = /** @type {RecordList} */ (segment.records);
    segment.records = null;
    this.hold(segment);
    const writing = this.writeIndexFile(segment, records).finally(() => {
      this.release(segment);
      this.writing.delete(writing);
    });
    this.writing.add(writing);
  }

  /** @param {string} key @returns {PackEntry | null} */
  get(key) {
    const found = this.index.get(Buffer.from(key, 'hex'));
    const segment = found && this.bySeq.get(found.seq);
    if (!found || !segment) return null;
    return { key, segment, offset: found.offset, size: found.size, ext: this.extNames[found.ext] };
  }

  /**
   * Appends a variant (one write into the page cache, done when this returns). A variant larger than the whole
   * bound is not kept. @param {string} key a SHA-256 in hex @param {string} ext at most 4 characters @param {Buffer} data
   */
  put(key, ext, data) {
    if (!KEY.test(key) || ext.length > 4) throw new Error(`variant cache: bad key or extension ${key}.${ext}`);
    const bytes = HEADER + data.length;
    if (bytes > this.maxBytes || this.closed) return;
    const segment = this.activeFor(bytes);
    const header = recordHeader(key, ext, data);
    try {
      const written = fs.writevSync(segment.fd, [header, data], segment.size);
      if (written !== bytes) throw new Error(`variant cache: short write (${written} of ${bytes} bytes)`);
    } catch (err) {
      // never leave half a record for the next one to follow: cut it off, or append elsewhere from now on
      try {
        fs.ftruncateSync(segment.fd, segment.size);
      } catch {
        this.seal(segment);
        this.open(segment.seq + 1);
      }
      throw err;
    }
    const offset = segment.size + HEADER;
    this.index.set(header, 4, segment.seq, offset, data.length, this.extCode(header, 36));
    segment.records?.add(header, 0, offset, data.length);
    segment.size += bytes;
    this.totalBytes += bytes;
    this.evict();
  }

  /**
   * A cached variant's bytes. One read, from a file kept open (a segment deleted meanwhile is still read whole);
   * the record's header must carry the whole key (the index holds only its first half). An entry from the
   * older half of the cache is appended again, so that it outlives the segments it was in.
   * @param {PackEntry} entry @returns {Promise<Buffer>}
   */
  async read(entry) {
    const { segment } = entry;
    if (segment.gone && segment.readers === 0) throw new GoneError('variant cache: closed');
    const record = Buffer.allocUnsafe(HEADER + entry.size);
    this.hold(segment);
    try {
      const bytesRead = await read(segment.fd, record, record.length, entry.offset - HEADER);
      // cut short or overwritten by hand: treated like a deleted file, so the variant is made again
      if (bytesRead !== record.length) throw new GoneError(`variant cache: ${segment.file} is shorter than its index`);
      if (record.readUInt32BE(0) !== MAGIC || record.toString('hex', 4, 36) !== entry.key) {
        throw new GoneError(`variant cache: ${segment.file} holds another record where its index says`);
      }
    } finally {
      this.release(segment);
    }
    const data = record.subarray(HEADER);
    const now = this.get(entry.key);
    if (now && now.segment === segment && now.offset === entry.offset && this.old(segment)) {
      try {
        this.put(entry.key, entry.ext, data);
      } catch (err) {
        this.warn({ err, key: entry.key }, 'variant cache: a used variant was not moved forward');
      }
    }
    return data;
  }

  /** Where an entry's bytes are, for a range-aware file sender. @param {PackEntry} entry */
  location(entry) {
    return { file: entry.segment.file, start: entry.offset, end: entry.offset + entry.size - 1 };
  }

  /** Whether a segment is in the older half (by count) of the cache. @param {Segment} segment */
  old(segment) {
    return segment.seq < this.segments[Math.floor(this.segments.length / 2)].seq;
  }

  /**
   * Drops a key whose bytes could not be read (a segment deleted or cut by hand), or taken down: the next put
   * writes it again. While the index is being rebuilt, the key's older records stay shadowed. @param {string} key
   */
  forget(key) {
    const active = this.segments[this.segments.length - 1];
    if (!active || this.closed) return;
    const bytes = Buffer.from(key, 'hex');
    if (this.building || this.index.get(bytes)) this.index.set(bytes, 0, active.seq, active.size, 0, FORGOTTEN);
  }

  /**
   * After a cached variant's file was found gone (deleted by hand): when it is the segment taking appends, they
   * go to a new file from now on. Else every variant made again went where a range, sent from the file by its
   * name, cannot read it, and was made again at each range asked.
   */
  replaceLostActive() {
    const active = this.segments[this.segments.length - 1];
    if (!active || this.closed || fs.existsSync(active.file)) return;
    // no index file for it: what it holds stays readable through its open descriptor until evicted
    active.records = null;
    this.open(active.seq + 1);
  }

  /** Deletes the oldest segments (never the one taking appends) until the cache is within its bound. */
  evict() {
    while (this.totalBytes > this.maxBytes && this.segments.length > 1) {
      const segment = /** @type {Segment} */ (this.segments.shift());
      // its entries in the index are dead from now on (see PackIndex), and go at its next rehash
      this.bySeq.delete(segment.seq);
      this.totalBytes -= segment.size;
      for (const file of [segment.file, this.indexFile(segment)]) {
        fs.unlink(file, (err) => {
          if (err && err.code !== 'ENOENT') this.warn({ err, file }, 'variant cache: segment not deleted');
        });
      }
      this.retire(segment);
    }
  }

  /** No more reads start on a segment; its file closes now, or after its last reader. @param {Segment} segment */
  retire(segment) {
    segment.gone = true;
    if (segment.readers === 0) fs.closeSync(segment.fd);
  }

  /** @param {Segment} segment */
  hold(segment) {
    segment.readers += 1;
  }

  /** Closes a segment's file after its last reader, once it is deleted. @param {Segment} segment */
  release(segment) {
    segment.readers -= 1;
    if (segment.gone && segment.readers === 0) fs.closeSync(segment.fd);
  }

  /**
   * Closes every segment (after its last reader) and gives the directory up; resolves once the index files
   * of full segments are written. @returns {Promise<void>}
   */
  async close() {
    this.closed = true;
    for (const segment of this.segments) this.retire(segment);
    this.segments = [];
    this.bySeq.clear();
    this.index.clear();
    this.dirLock.release();
    await Promise.all(this.writing);
  }
}

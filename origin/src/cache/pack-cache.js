import fs from 'node:fs';
import path from 'node:path';
import { crc32 } from 'node:zlib';

// A record: magic, key (32 bytes), extension (4 bytes, zero-padded), data length, CRC-32 of the data; then the data.
const MAGIC = 0x56504b31; // "VPK1"
const HEADER = 48;
const SEGMENT = /^(\d{8})\.pack$/;
const KEY = /^[0-9a-f]{64}$/;
const MAX_SEGMENT = 64 * 1024 * 1024;
const MIN_SEGMENT = 256 * 1024;

/**
 * @typedef {{ seq: number, file: string, fd: number, size: number, keys: string[], readers: number, gone: boolean }} Segment
 * @typedef {{ key: string, segment: Segment, offset: number, size: number, ext: string }} PackEntry
 */

/**
 * The result cache: variants appended to segment files (`<n>.pack`), an index in memory rebuilt from them on
 * start, the oldest segment deleted past the byte bound. One write per variant into a file already open, and
 * no file, inode or rename per variant: on ext4 a file per variant cost its creation and, once evictions free
 * inodes, a pass over the recently freed ones at every new file; here it is a copy into the page cache.
 * Least recently used goes first: a hit on a variant in the older half of the cache appends it again at the
 * end (it was just read, so that is one more write), and deleting the oldest segment drops only what nobody
 * asked for since it was written there.
 * Crash safety: a record lands in one write; on start a record that runs past its file's end or (in the two
 * newest segments, the only ones not yet synced) fails its CRC ends that segment, which is cut there.
 * A segment is synced when the next one starts. One process per directory (a lock file says which).
 */
export class PackCache {
  /**
   * @param {string} dir @param {number} maxBytes
   * @param {{ segmentBytes?: number, warn?: (details: object, message: string) => void }} [options]
   */
  constructor(dir, maxBytes, { segmentBytes, warn = () => {} } = {}) {
    this.dir = path.resolve(dir);
    this.lockFile = path.join(this.dir, 'lock');
    this.maxBytes = maxBytes;
    // a 32nd of the bound: eviction frees that much at a time
    this.segmentBytes = segmentBytes || Math.min(MAX_SEGMENT, Math.max(MIN_SEGMENT, Math.floor(maxBytes / 32)));
    this.warn = warn;
    this.totalBytes = 0;
    /** @type {Map<string, PackEntry>} */
    this.index = new Map();
    /** oldest first; the last one takes the appends @type {Segment[]} */
    this.segments = [];
    this.closed = false;
  }

  /** Takes the directory, rebuilds the index from the segments, and clears what an older layout left there. */
  init() {
    fs.mkdirSync(this.dir, { recursive: true });
    this.lock();
    const names = fs.readdirSync(this.dir);
    const seqs = names.map((name) => SEGMENT.exec(name)).filter((match) => match !== null).map((match) => Number(match[1])).sort((a, b) => a - b);
    seqs.forEach((seq, i) => this.load(seq, i >= seqs.length - 2));
    const last = this.segments[this.segments.length - 1];
    if (!last || last.size >= this.segmentBytes) this.open(last ? last.seq + 1 : 1);
    this.evict();
    // variants kept one file each by earlier versions (shard directories, tmp/): a cache, so dropped
    for (const name of names) {
      if (!SEGMENT.test(name) && name !== path.basename(this.lockFile)) fs.rm(path.join(this.dir, name), { recursive: true, force: true }, () => {});
    }
  }

  /** Refuses a directory another live process holds (two appending to one segment would interleave records). */
  lock() {
    let holder = 0;
    try {
      holder = Number(fs.readFileSync(this.lockFile, 'utf8'));
    } catch (err) {
      if (/** @type {any} */ (err).code !== 'ENOENT') throw err;
    }
    if (holder && holder !== process.pid && alive(holder)) throw new Error(`${this.dir} is in use by process ${holder}`);
    fs.writeFileSync(this.lockFile, String(process.pid));
  }

  /** A segment's file opened with `flags`, not yet indexed. @param {number} seq @param {string} flags @returns {Segment} */
  segmentOf(seq, flags) {
    const file = path.join(this.dir, `${String(seq).padStart(8, '0')}.pack`);
    const fd = fs.openSync(file, flags);
    return { seq, file, fd, size: fs.fstatSync(fd).size, keys: [], readers: 0, gone: false };
  }

  /** @param {number} seq @param {boolean} verify whether to check each record's CRC (segments not yet synced) */
  load(seq, verify) {
    const segment = this.segmentOf(seq, 'r+');
    const end = this.scan(segment, verify);
    if (end < segment.size) {
      this.warn({ file: segment.file, kept: end, dropped: segment.size - end }, 'variant cache: a torn or corrupt tail was cut off');
      fs.ftruncateSync(segment.fd, end);
      segment.size = end;
    }
    this.segments.push(segment);
    this.totalBytes += segment.size;
  }

  /**
   * Indexes a segment's records; returns where the valid ones end.
   * @param {Segment} segment @param {boolean} verify @returns {number}
   */
  scan(segment, verify) {
    const header = Buffer.alloc(HEADER);
    let position = 0;
    while (position + HEADER <= segment.size) {
      fs.readSync(segment.fd, header, 0, HEADER, position);
      const size = header.readUInt32BE(40);
      if (header.readUInt32BE(0) !== MAGIC || position + HEADER + size > segment.size) break;
      if (verify) {
        const data = Buffer.allocUnsafe(size);
        fs.readSync(segment.fd, data, 0, size, position + HEADER);
        if (crc32(data) !== header.readUInt32BE(44)) break;
      }
      this.remember(header.toString('hex', 4, 36), header.toString('latin1', 36, 40).replace(/\0+$/, ''), segment, position, size);
      position += HEADER + size;
    }
    return position;
  }

  /**
   * Indexes the record at `position` of `segment` (a later record of the same key takes its place).
   * @param {string} key @param {string} ext @param {Segment} segment @param {number} position @param {number} size
   */
  remember(key, ext, segment, position, size) {
    this.index.set(key, { key, segment, offset: position + HEADER, size, ext });
    segment.keys.push(key);
  }

  /** Starts a new segment for the appends. @param {number} seq @returns {Segment} */
  open(seq) {
    const segment = this.segmentOf(seq, 'wx+');
    this.segments.push(segment);
    return segment;
  }

  /** The segment taking appends, a new one when `bytes` would not fit (a lone record may overflow one). @param {number} bytes */
  activeFor(bytes) {
    const active = this.segments[this.segments.length - 1];
    if (active.size === 0 || active.size + bytes <= this.segmentBytes) return active;
    // the full one goes to disk in the background: from now on only its tail can be lost to a power cut
    this.hold(active);
    fs.fsync(active.fd, (err) => {
      if (err) this.warn({ err, file: active.file }, 'variant cache: sync failed');
      this.release(active);
    });
    return this.open(active.seq + 1);
  }

  /** @param {string} key @returns {PackEntry | null} */
  get(key) {
    return this.index.get(key) || null;
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
    const header = Buffer.alloc(HEADER);
    header.writeUInt32BE(MAGIC, 0);
    header.write(key, 4, 32, 'hex');
    header.write(ext, 36, 4, 'latin1');
    header.writeUInt32BE(data.length, 40);
    header.writeUInt32BE(crc32(data), 44);
    try {
      const written = fs.writevSync(segment.fd, [header, data], segment.size);
      if (written !== bytes) throw new Error(`variant cache: short write (${written} of ${bytes} bytes)`);
    } catch (err) {
      // never leave half a record for the next one to follow: cut it off, or append elsewhere from now on
      try {
        fs.ftruncateSync(segment.fd, segment.size);
      } catch {
        this.open(segment.seq + 1);
      }
      throw err;
    }
    this.remember(key, ext, segment, segment.size, data.length);
    segment.size += bytes;
    this.totalBytes += bytes;
    this.evict();
  }

  /**
   * A cached variant's bytes. One read, from a file kept open (a segment deleted meanwhile is still read whole).
   * An entry from the older half of the cache is appended again, so that it outlives the segments it was in.
   * @param {PackEntry} entry @returns {Promise<Buffer>}
   */
  async read(entry) {
    const { segment } = entry;
    if (segment.gone && segment.readers === 0) throw Object.assign(new Error('variant cache: closed'), { code: 'ENOENT' });
    const data = Buffer.allocUnsafe(entry.size);
    this.hold(segment);
    try {
      const bytesRead = await new Promise((resolve, reject) => {
        fs.read(segment.fd, data, 0, entry.size, entry.offset, (err, count) => (err ? reject(err) : resolve(count)));
      });
      // cut short by hand: treated like a deleted file, so the variant is made again
      if (bytesRead !== entry.size) throw Object.assign(new Error(`variant cache: ${segment.file} is shorter than its index`), { code: 'ENOENT' });
    } finally {
      this.release(segment);
    }
    if (this.index.get(entry.key) === entry && this.old(segment)) {
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

  /** Drops a key whose bytes could not be read (a segment deleted or cut by hand): the next put writes it again. @param {string} key */
  forget(key) {
    this.index.delete(key);
  }

  /** Deletes the oldest segments (never the one taking appends) until the cache is within its bound. */
  evict() {
    while (this.totalBytes > this.maxBytes && this.segments.length > 1) {
      const segment = /** @type {Segment} */ (this.segments.shift());
      for (const key of segment.keys) {
        if (this.index.get(key)?.segment === segment) this.index.delete(key);
      }
      this.totalBytes -= segment.size;
      fs.unlink(segment.file, (err) => {
        if (err && err.code !== 'ENOENT') this.warn({ err, file: segment.file }, 'variant cache: segment not deleted');
      });
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

  /** Closes every segment (after its last reader) and gives the directory up. */
  close() {
    this.closed = true;
    for (const segment of this.segments) this.retire(segment);
    this.segments = [];
    this.index.clear();
    try {
      if (Number(fs.readFileSync(this.lockFile, 'utf8')) === process.pid) fs.rmSync(this.lockFile);
    } catch {
      // already gone
    }
  }
}

/** @param {number} pid */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return /** @type {any} */ (err).code === 'EPERM';
  }
}

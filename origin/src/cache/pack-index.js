// The result cache's index: open addressing (linear probing) over typed arrays, 29 bytes a slot (a 16-byte
// key prefix, the segment's number, the record's offset and size, an extension code), 53 to 80 % full: 36
// to 55 bytes a variant, where a Map of objects keyed by hex strings cost about 210.

const SLOT_KEY = 4; // u32 words of key prefix a slot holds
const MAX_LOAD = 0.8;
const LOAD_AFTER_REHASH = 0.6;
const MIN_CAPACITY = 1024;
/** the extension code of a forgotten key: it shadows older records of that key (see forget) */
export const FORGOTTEN = 255;

/**
 * @typedef {{ seq: number, offset: number, size: number, ext: number }} Slot
 */

export class PackIndex {
  /** @param {(seq: number) => boolean} live whether segment `seq` still exists (entries in deleted ones are dead) */
  constructor(live, capacity = MIN_CAPACITY) {
    this.live = live;
    /** whether forgotten keys are kept (while segments are being indexed: they shadow older records) */
    this.shadowing = false;
    this.capacity = 0;
    this.keys = new Uint32Array(0);
    this.seqs = new Uint32Array(0);
    this.offsets = new Uint32Array(0);
    this.sizes = new Uint32Array(0);
    this.exts = new Uint8Array(0);
    this.used = 0;
    this.allocate(Math.max(MIN_CAPACITY, capacity));
  }

  /** @param {number} capacity */
  allocate(capacity) {
    this.capacity = capacity;
    this.keys = new Uint32Array(capacity * SLOT_KEY);
    // seq 0 marks an empty slot: segments are numbered from 1
    this.seqs = new Uint32Array(capacity);
    this.offsets = new Uint32Array(capacity);
    this.sizes = new Uint32Array(capacity);
    this.exts = new Uint8Array(capacity);
    /** slots taken, dead ones included (they count toward the load until a rehash drops them) */
    this.used = 0;
  }

  /** Bytes of memory the table holds. */
  get bytes() {
    return this.capacity * (SLOT_KEY * 4 + 4 + 4 + 4 + 1);
  }

  /** Makes room for `count` entries at once (a rebuild that knows how many are coming). @param {number} count */
  reserve(count) {
    const capacity = Math.ceil(count / LOAD_AFTER_REHASH);
    if (capacity > this.capacity) this.rehash(capacity);
  }

  /**
   * The slot holding a key (given as four words of its prefix), or where it would go: -1 - slot.
   * @param {number} a @param {number} b @param {number} c @param {number} d @returns {number}
   */
  find(a, b, c, d) {
    const { keys, seqs, capacity } = this;
    // the keys are SHA-256 digests: their first word spread over the table is uniform already
    let slot = Math.min(capacity - 1, Math.floor((a / 4294967296) * capacity));
    for (;;) {
      if (seqs[slot] === 0) return -1 - slot;
      const k = slot * SLOT_KEY;
      if (keys[k] === a && keys[k + 1] === b && keys[k + 2] === c && keys[k + 3] === d) return slot;
      slot = slot + 1 === capacity ? 0 : slot + 1;
    }
  }

  /** The live entry of a key, if any (a forgotten one is none). @param {Buffer} key 16 bytes or more @returns {Slot | null} */
  get(key) {
    const slot = this.find(key.readUInt32BE(0), key.readUInt32BE(4), key.readUInt32BE(8), key.readUInt32BE(12));
    if (slot < 0 || !this.alive(slot) || this.exts[slot] === FORGOTTEN) return null;
    return { seq: this.seqs[slot], offset: this.offsets[slot], size: this.sizes[slot], ext: this.exts[slot] };
  }

  /** @param {number} slot */
  alive(slot) {
    return this.live(this.seqs[slot]);
  }

  /**
   * Records where a key's newest record is: kept only if it is newer (a later segment, or later in the same
   * one) than what the index has, so segments can be read in any order, and while the cache takes appends.
   * @param {Buffer} key its first 16 bytes from `at` @param {number} at @param {number} seq @param {number} offset @param {number} size @param {number} ext
   */
  set(key, at, seq, offset, size, ext) {
    const a = key.readUInt32BE(at);
    const b = key.readUInt32BE(at + 4);
    const c = key.readUInt32BE(at + 8);
    const d = key.readUInt32BE(at + 12);
    let slot = this.find(a, b, c, d);
    if (slot >= 0) {
      if (this.alive(slot) && (this.seqs[slot] > seq || (this.seqs[slot] === seq && this.offsets[slot] > offset))) return;
    } else {
      if ((this.used + 1) > this.capacity * MAX_LOAD) {
        this.rehash(0);
        slot = this.find(a, b, c, d);
      }
      slot = -1 - slot;
      this.used += 1;
      const k = slot * SLOT_KEY;
      this.keys[k] = a;
      this.keys[k + 1] = b;
      this.keys[k + 2] = c;
      this.keys[k + 3] = d;
    }
    this.seqs[slot] = seq;
    this.offsets[slot] = offset;
    this.sizes[slot] = size;
    this.exts[slot] = ext;
  }

  /**
   * Copies the live entries into a table with room for them at 60 % load (at least `capacity` slots): dead
   * ones (their segment deleted) go. @param {number} capacity
   */
  rehash(capacity) {
    const old = { keys: this.keys, seqs: this.seqs, offsets: this.offsets, sizes: this.sizes, exts: this.exts, capacity: this.capacity };
    let live = 0;
    for (let slot = 0; slot < old.capacity; slot += 1) if (old.seqs[slot] !== 0 && this.live(old.seqs[slot])) live += 1;
    // grown by half at least: each rehash stops the event loop (about 100 ms a million entries)
    this.allocate(Math.max(MIN_CAPACITY, capacity, Math.ceil((live + 1) / LOAD_AFTER_REHASH), live > this.capacity * 0.7 ? Math.ceil(this.capacity * 1.5) : 0));
    for (let slot = 0; slot < old.capacity; slot += 1) {
      const seq = old.seqs[slot];
      if (seq === 0 || !this.live(seq) || (old.exts[slot] === FORGOTTEN && !this.shadowing)) continue;
      const k = slot * SLOT_KEY;
      const to = -1 - this.find(old.keys[k], old.keys[k + 1], old.keys[k + 2], old.keys[k + 3]);
      this.keys.set(old.keys.subarray(k, k + SLOT_KEY), to * SLOT_KEY);
      this.seqs[to] = seq;
      this.offsets[to] = old.offsets[slot];
      this.sizes[to] = old.sizes[slot];
      this.exts[to] = old.exts[slot];
      this.used += 1;
    }
  }

  /** Entries alive now (a walk over the table: for metrics and tests). */
  count() {
    let live = 0;
    for (let slot = 0; slot < this.capacity; slot += 1) {
      if (this.seqs[slot] !== 0 && this.exts[slot] !== FORGOTTEN && this.alive(slot)) live += 1;
    }
    return live;
  }

  /** Every live entry, key prefix in hex (for tests). @returns {Map<string, Slot>} */
  entries() {
    /** @type {Map<string, Slot>} */
    const all = new Map();
    const bytes = Buffer.alloc(16);
    for (let slot = 0; slot < this.capacity; slot += 1) {
      if (this.seqs[slot] === 0 || this.exts[slot] === FORGOTTEN || !this.alive(slot)) continue;
      for (let i = 0; i < SLOT_KEY; i += 1) bytes.writeUInt32BE(this.keys[slot * SLOT_KEY + i], i * 4);
      all.set(bytes.toString('hex'), { seq: this.seqs[slot], offset: this.offsets[slot], size: this.sizes[slot], ext: this.exts[slot] });
    }
    return all;
  }

  clear() {
    this.allocate(MIN_CAPACITY);
  }
}

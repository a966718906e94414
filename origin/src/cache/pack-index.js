// The result cache's index: open addressing (linear probing) over typed arrays, 29 bytes a slot (a 16-byte
// key prefix, the segment's number, the record's offset and size, an extension code), 53 to 80 % full: 36
// to 55 bytes a variant, where a Map of objects keyed by hex strings cost about 210. It grows without
// stopping the event loop: the entries move to the larger table a few hundred at each get or set (while
// they move, a key is looked up in the new table, then the old one).

const SLOT_KEY = 4; // u32 words of key prefix a slot holds
const SLOT_BYTES = SLOT_KEY * 4 + 4 + 4 + 4 + 1;
const MAX_LOAD = 0.8;
const LOAD_AFTER_REHASH = 0.6;
const MIN_CAPACITY = 1024;
/** slots of the old table moved at each get or set while the table grows (a few µs) */
const MOVE_STEP = 256;
/** the extension code of a forgotten key: it shadows older records of that key (see forget) */
export const FORGOTTEN = 255;

/**
 * @typedef {{ seq: number, offset: number, size: number, ext: number }} Slot
 * @typedef {{ keys: Uint32Array, seqs: Uint32Array, offsets: Uint32Array, sizes: Uint32Array, exts: Uint8Array, capacity: number }} Table
 */

/**
 * The slot of `table` holding a key (four words of its prefix), or where it would go: -1 - slot.
 * @param {Table} table @param {number} a @param {number} b @param {number} c @param {number} d @returns {number}
 */
function findIn(table, a, b, c, d) {
  const { keys, seqs, capacity } = table;
  // the keys are SHA-256 digests: their first word spread over the table is uniform already
  let slot = Math.min(capacity - 1, Math.floor((a / 4294967296) * capacity));
  for (;;) {
    if (seqs[slot] === 0) return -1 - slot;
    const k = slot * SLOT_KEY;
    if (keys[k] === a && keys[k + 1] === b && keys[k + 2] === c && keys[k + 3] === d) return slot;
    slot = slot + 1 === capacity ? 0 : slot + 1;
  }
}

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
    /** @type {Table | null} the smaller table whose entries are still moving here (see grow) */
    this.old = null;
    /** the old table's next slot to move */
    this.cursor = 0;
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

  /** Bytes of memory the tables hold (both while one grows into the other). */
  get bytes() {
    return (this.capacity + (this.old?.capacity ?? 0)) * SLOT_BYTES;
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
    return findIn(this, a, b, c, d);
  }

  /** The live entry of a key, if any (a forgotten one is none). @param {Buffer} key 16 bytes or more @returns {Slot | null} */
  get(key) {
    this.step();
    const a = key.readUInt32BE(0);
    const b = key.readUInt32BE(4);
    const c = key.readUInt32BE(8);
    const d = key.readUInt32BE(12);
    const slot = this.find(a, b, c, d);
    if (slot >= 0) return this.live(this.seqs[slot]) && this.exts[slot] !== FORGOTTEN ? this.slotAt(this, slot) : null;
    // not moved here yet
    const old = this.old ? findIn(this.old, a, b, c, d) : -1;
    if (old < 0 || !this.old || !this.live(this.old.seqs[old]) || this.old.exts[old] === FORGOTTEN) return null;
    return this.slotAt(this.old, old);
  }

  /** @param {Table} table @param {number} slot @returns {Slot} */
  slotAt(table, slot) {
    return { seq: table.seqs[slot], offset: table.offsets[slot], size: table.sizes[slot], ext: table.exts[slot] };
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
    this.step();
    // the key's entry in the old table, if it has not moved yet, moves first: the newer of the two wins
    if (this.old) {
      const old = findIn(this.old, a, b, c, d);
      if (old >= 0) this.move(old);
    }
    if (this.find(a, b, c, d) < 0 && this.used + 1 > this.capacity * MAX_LOAD) this.grow();
    this.insert(a, b, c, d, seq, offset, size, ext);
  }

  /**
   * Puts an entry in the table unless it has a newer one for the key. The table has room: set() grows it first.
   * @param {number} a @param {number} b @param {number} c @param {number} d @param {number} seq @param {number} offset @param {number} size @param {number} ext
   */
  insert(a, b, c, d, seq, offset, size, ext) {
    let slot = this.find(a, b, c, d);
    if (slot >= 0) {
      if (this.alive(slot) && (this.seqs[slot] > seq || (this.seqs[slot] === seq && this.offsets[slot] > offset)))
        return;
    } else {
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
   * Starts moving into a table half as large again (or at 60 % load): this one becomes the old table, whose
   * entries move a few hundred at each get or set (step), so no call holds the event loop for long (a whole
   * copy took about 100 ms a million entries). Moving ends long before the new table fills: it is at most
   * 55 % full once all have moved, plus one entry a call.
   */
  grow() {
    this.finish();
    this.moveInto(
      Math.max(MIN_CAPACITY, Math.ceil(this.capacity * 1.5), Math.ceil((this.used + 1) / LOAD_AFTER_REHASH)),
    );
  }

  /** Makes this table the old one and starts a new one of `capacity` slots, empty, to move into. @param {number} capacity */
  moveInto(capacity) {
    const old = {
      keys: this.keys,
      seqs: this.seqs,
      offsets: this.offsets,
      sizes: this.sizes,
      exts: this.exts,
      capacity: this.capacity,
    };
    this.allocate(capacity);
    this.old = old;
    this.cursor = 0;
  }

  /** Moves the old table's next MOVE_STEP slots, if it is growing. @param {number} [slots] */
  step(slots = MOVE_STEP) {
    const old = this.old;
    if (!old) return;
    const end = Math.min(old.capacity, this.cursor + slots);
    for (let slot = this.cursor; slot < end; slot += 1) this.move(slot);
    this.cursor = end;
    if (end === old.capacity) this.old = null;
  }

  /** Moves everything left in the old table now (before a whole-table walk). */
  finish() {
    if (this.old) this.step(this.old.capacity);
  }

  /** Moves one slot of the old table: dead entries (their segment deleted) stay behind. @param {number} slot */
  move(slot) {
    const old = /** @type {Table} */ (this.old);
    const seq = old.seqs[slot];
    if (seq === 0 || !this.live(seq) || (old.exts[slot] === FORGOTTEN && !this.shadowing)) return;
    const k = slot * SLOT_KEY;
    this.insert(
      old.keys[k],
      old.keys[k + 1],
      old.keys[k + 2],
      old.keys[k + 3],
      seq,
      old.offsets[slot],
      old.sizes[slot],
      old.exts[slot],
    );
  }

  /**
   * Copies the live entries into a table with room for them at 60 % load (at least `capacity` slots), at once:
   * dead ones (their segment deleted) go. For reserve(), before a rebuild fills the table. @param {number} capacity
   */
  rehash(capacity) {
    this.finish();
    let live = 0;
    for (let slot = 0; slot < this.capacity; slot += 1) if (this.seqs[slot] !== 0 && this.alive(slot)) live += 1;
    this.moveInto(
      Math.max(
        MIN_CAPACITY,
        capacity,
        Math.ceil((live + 1) / LOAD_AFTER_REHASH),
        live > this.capacity * 0.7 ? Math.ceil(this.capacity * 1.5) : 0,
      ),
    );
    this.finish();
  }

  /** Entries alive now (a walk over the table: for tests and benchmarks). */
  count() {
    this.finish();
    let live = 0;
    for (let slot = 0; slot < this.capacity; slot += 1) {
      if (this.seqs[slot] !== 0 && this.exts[slot] !== FORGOTTEN && this.alive(slot)) live += 1;
    }
    return live;
  }

  /** Every live entry, key prefix in hex (for tests). @returns {Map<string, Slot>} */
  entries() {
    this.finish();
    /** @type {Map<string, Slot>} */
    const all = new Map();
    const bytes = Buffer.alloc(16);
    for (let slot = 0; slot < this.capacity; slot += 1) {
      if (this.seqs[slot] === 0 || this.exts[slot] === FORGOTTEN || !this.alive(slot)) continue;
      for (let i = 0; i < SLOT_KEY; i += 1) bytes.writeUInt32BE(this.keys[slot * SLOT_KEY + i], i * 4);
      all.set(bytes.toString('hex'), {
        seq: this.seqs[slot],
        offset: this.offsets[slot],
        size: this.sizes[slot],
        ext: this.exts[slot],
      });
    }
    return all;
  }

  clear() {
    this.old = null;
    this.allocate(MIN_CAPACITY);
  }
}
